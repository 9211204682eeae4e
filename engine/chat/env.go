package chat

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// environment is built once: gonja's own builtin sets are package globals, so ours are copies
// with the chat-template fixes applied, leaving gonja's defaults untouched for anyone else.
var environment = newEnvironment()

const rootName = "chat_template"

func newEnvironment() *exec.Environment {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{})
	filters.Update(builtins.Filters)
	for name, fn := range chatFilters() {
		if filters.Exists(name) {
			_ = filters.Replace(name, fn)
		} else {
			_ = filters.Register(name, fn)
		}
	}
	for _, name := range []string{"center", "indent"} {
		if fn, ok := filters.Get(name); ok {
			_ = filters.Replace(name, boundWidthFilter(name, fn))
		}
	}

	tests := exec.NewTestSet(map[string]exec.TestFunction{})
	tests.Update(builtins.Tests)

	// No include/import/extends/from: a template read from a model file must not reach the
	// file system.
	structures := map[string]parser.ControlStructureParser{}
	for _, name := range []string{"autoescape", "block", "filter", "for", "if", "macro", "raw",
		"set", "with", "do", "break", "continue", "call"} {
		if p, ok := builtins.ControlStructures.Get(name); ok {
			structures[name] = p
		}
	}
	// transformers' AssistantTracker extension: {% generation %} only marks assistant text.
	structures["generation"] = generationParser
	structures["set"] = guardSet(structures["set"])
	structures["macro"] = guardMacro(structures["macro"])

	globals := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	globals.Set("range", rangeFunction)

	return &exec.Environment{
		Context:           globals,
		Filters:           filters,
		Tests:             tests,
		ControlStructures: exec.NewControlStructureSet(structures),
		Methods:           chatMethods(),
	}
}

func newConfig() *config.Config {
	cfg := config.New()
	// transformers: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).
	// lstrip_blocks is done by applyLStripBlocks, gonja's version strips too much.
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = false
	return cfg
}

func compile(source string) (*exec.Template, error) {
	if err := checkLimits(source); err != nil {
		return nil, err
	}
	loader := &sourceLoader{source: preprocess(source)}
	return exec.NewTemplate(rootName, newConfig(), loader, environment)
}

// sourceLoader serves the one template text and nothing else.
type sourceLoader struct{ source string }

func (l *sourceLoader) Read(path string) (io.Reader, error) {
	if path != rootName {
		return nil, fmt.Errorf("chat templates cannot load other templates (%q)", path)
	}
	return bytes.NewReader([]byte(l.source)), nil
}

func (l *sourceLoader) Resolve(path string) (string, error) {
	if path != rootName {
		return "", fmt.Errorf("chat templates cannot load other templates (%q)", path)
	}
	return path, nil
}

func (l *sourceLoader) Inherit(string) (loaders.Loader, error) { return l, nil }

// renderState carries what one render needs: the clock and the message of raise_exception.
type renderState struct {
	now    func() time.Time
	raised *TemplateError
	// macroDepth is the number of macro calls in progress (guardMacro).
	macroDepth int
}

func (st *renderState) addGlobals(data map[string]any) {
	data[stateKey] = st
	data["raise_exception"] = func(_ *exec.Evaluator, args *exec.VarArgs) *exec.Value {
		msg := ""
		if len(args.Args) > 0 {
			msg = args.Args[0].String()
		}
		if st.raised == nil {
			st.raised = &TemplateError{Msg: msg}
		}
		return exec.AsValue(st.raised)
	}
	data["strftime_now"] = func(_ *exec.Evaluator, args *exec.VarArgs) *exec.Value {
		if len(args.Args) != 1 || !args.Args[0].IsString() {
			return exec.AsValue(fmt.Errorf("strftime_now takes one string argument"))
		}
		return exec.AsValue(strftime(args.Args[0].String(), st.now()))
	}
}

// maxRange bounds range(); jinja2's sandbox uses the same limit. gonja's own range also leaks a
// goroutine when a loop breaks early, so it is replaced.
const maxRange = 100000

func rangeFunction(_ *exec.Evaluator, args *exec.VarArgs) *exec.Value {
	var bounds [3]int
	n := len(args.Args)
	if n < 1 || n > 3 {
		return exec.AsValue(fmt.Errorf("range expects 1 to 3 integer arguments, got %d", n))
	}
	for i, a := range args.Args {
		if !a.IsInteger() {
			return exec.AsValue(fmt.Errorf("range argument %d is not an integer: %s", i+1, a.String()))
		}
		bounds[i] = a.Integer()
	}
	start, stop, step := 0, bounds[0], 1
	if n >= 2 {
		start, stop = bounds[0], bounds[1]
	}
	if n == 3 {
		step = bounds[2]
	}
	if step == 0 {
		return exec.AsValue(fmt.Errorf("range step cannot be 0"))
	}
	out := []any{}
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if len(out) >= maxRange {
			return exec.AsValue(fmt.Errorf("range has more than %d items", maxRange))
		}
		out = append(out, i)
	}
	return exec.AsValue(out)
}

// generationBlock renders its body unchanged.
type generationBlock struct {
	position *tokens.Token
	body     *nodes.Wrapper
}

func (g *generationBlock) Position() *tokens.Token { return g.position }

func (g *generationBlock) String() string {
	return fmt.Sprintf("GenerationControlStructure(Line=%d Col=%d)", g.position.Line, g.position.Col)
}

func (g *generationBlock) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	return r.ExecuteWrapper(g.body)
}

func generationParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	g := &generationBlock{position: p.Current()}
	if !args.End() {
		return nil, args.Error("generation takes no arguments", nil)
	}
	body, endArgs, err := p.WrapUntil("endgeneration")
	if err != nil {
		return nil, err
	}
	if !endArgs.End() {
		return nil, endArgs.Error("endgeneration takes no arguments", nil)
	}
	g.body = body
	return g, nil
}

// newOrderedDict builds a template dict that keeps insertion order, as Python's dict does, so
// that message|tojson lists "role" before "content" like transformers.
func newOrderedDict(kv ...string) *exec.Dict {
	d := exec.NewDict()
	for i := 0; i+1 < len(kv); i += 2 {
		d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(kv[i]), Value: exec.AsValue(kv[i+1])})
	}
	return d
}
