package chat

import (
	"errors"
	"fmt"
	"reflect"

	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Guards against templates that would crash the process rather than fail. gonja recurses
// without limit where Python would raise RecursionError, and a Go stack overflow cannot be
// recovered: a macro calling itself, or a namespace holding itself ({% set ns.x = ns %}, after
// which printing, comparing or even reading ns.x recurses forever), kills the app.

const (
	// maxMacroDepth bounds nested macro calls; real templates nest a few levels (a tool schema
	// rendered recursively).
	maxMacroDepth = 100
	// maxValueDepth and maxValueBytes bound what a namespace attribute may hold: nesting that
	// gonja's recursive printing can survive, and no more text than a render may output. Only
	// namespaces are mutable in a template, so only they can build a cycle or grow a value by
	// doubling it in a loop.
	maxValueDepth = 256
	maxValueBytes = maxOutputBytes
)

// stateKey holds the render's *renderState in the template context; the space keeps templates
// from naming it.
const stateKey = "nibble render state"

func stateOf(r *exec.Renderer) *renderState {
	v, _ := r.Environment.Context.Get(stateKey)
	st, _ := v.(*renderState)
	return st
}

// guardSet wraps gonja's set. It accepts only jinja2's targets, a name or name.attr (a
// namespace attribute); gonja also takes ns['k'] and a.b.c, which jinja2 rejects. After an
// attribute is set, the namespace is checked for a cycle and for size.
func guardSet(inner parser.ControlStructureParser) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		// Read the whole argument list to see the target, then hand gonja a fresh stream.
		var toks []*tokens.Token
		for !args.End() {
			toks = append(toks, args.Next())
		}
		toks = append(toks, args.Current()) // EOF, or the lexer's error token
		endOfTarget := func(i int) bool {
			return i < len(toks) && (toks[i].Type == tokens.Assign || toks[i].Type == tokens.EOF)
		}
		root := ""
		switch {
		case toks[0].Type == tokens.Name && endOfTarget(1):
		case toks[0].Type == tokens.Name && len(toks) > 3 && toks[1].Type == tokens.Dot &&
			toks[2].Type == tokens.Name && endOfTarget(3):
			root = toks[0].Val
		default:
			return nil, args.Error("set can only assign to a name or a namespace attribute (name.attr)", toks[0])
		}
		cs, err := inner(p, parser.NewParser(rootName, tokens.NewStream(toks), p.Config, p.Loader, nil))
		if err != nil || root == "" {
			return cs, err
		}
		return &guardedSet{ControlStructure: cs, root: root}, nil
	}
}

type guardedSet struct {
	nodes.ControlStructure
	root string
}

func (g *guardedSet) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	if err := g.ControlStructure.(exec.ControlStructure).Execute(r, tag); err != nil {
		return err
	}
	v, _ := r.Environment.Context.Get(g.root)
	w := valueWalker{seen: map[valueID]int{}}
	if _, err := w.size(v, 0); err != nil {
		return fmt.Errorf("set %s: %w", g.root, err)
	}
	return nil
}

var (
	errCycle   = errors.New("a namespace cannot contain itself")
	errTooDeep = fmt.Errorf("value nested deeper than %d", maxValueDepth)
	errTooBig  = fmt.Errorf("value larger than %d bytes", maxValueBytes)
)

// valueID identifies a container: its kind, data pointer and length (two slices of one array
// differ).
type valueID struct {
	kind reflect.Kind
	ptr  uintptr
	n    int
}

// valueWalker measures a value as printing would see it: shared parts count once per
// occurrence, but each container is walked once (a value doubled in a loop is a DAG whose
// printed size grows exponentially).
type valueWalker struct {
	seen map[valueID]int // printed size; -1 while its contents are being walked
}

func (w *valueWalker) size(v any, depth int) (int, error) {
	if depth > maxValueDepth {
		return 0, errTooDeep
	}
	switch x := v.(type) {
	case nil:
		return 1, nil
	case string:
		return w.check(len(x) + 1)
	case *exec.Value:
		if x == nil || !x.Val.IsValid() || !x.Val.CanInterface() {
			return 1, nil
		}
		return w.size(x.Val.Interface(), depth)
	case *exec.Dict:
		if x == nil {
			return 1, nil
		}
		return w.size(x.Pairs, depth)
	case exec.Dict:
		return w.size(x.Pairs, depth)
	case *exec.Pair:
		if x == nil {
			return 1, nil
		}
		k, err := w.size(x.Key, depth)
		if err != nil {
			return 0, err
		}
		val, err := w.size(x.Value, depth)
		if err != nil {
			return 0, err
		}
		return w.check(k + val)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Map:
	default:
		return 1, nil // scalars, functions, and structs a template cannot mutate
	}
	id := valueID{rv.Kind(), rv.Pointer(), rv.Len()}
	if n, ok := w.seen[id]; ok {
		if n < 0 {
			return 0, errCycle
		}
		return n, nil
	}
	w.seen[id] = -1
	total := 2 // brackets
	add := func(x reflect.Value) error {
		if !x.CanInterface() {
			return nil
		}
		n, err := w.size(x.Interface(), depth+1)
		if err == nil {
			total, err = w.check(total + n + 2) // separator
		}
		return err
	}
	if rv.Kind() == reflect.Map {
		for it := rv.MapRange(); it.Next(); {
			if err := add(it.Key()); err != nil {
				return 0, err
			}
			if err := add(it.Value()); err != nil {
				return 0, err
			}
		}
	} else {
		for i := range rv.Len() {
			if err := add(rv.Index(i)); err != nil {
				return 0, err
			}
		}
	}
	w.seen[id] = total
	return total, nil
}

func (w *valueWalker) check(n int) (int, error) {
	if n > maxValueBytes {
		return 0, errTooBig
	}
	return n, nil
}

// guardMacro wraps gonja's macro so that each call counts against the render's depth limit.
func guardMacro(inner parser.ControlStructureParser) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := inner(p, args)
		if err != nil {
			return nil, err
		}
		m, ok := cs.(*controlStructures.MacroControlStructure)
		if !ok {
			return nil, fmt.Errorf("chat: gonja's macro parser returned %T", cs)
		}
		return &guardedMacro{m}, nil
	}
}

type guardedMacro struct {
	*controlStructures.MacroControlStructure
}

func (g *guardedMacro) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	if err := g.MacroControlStructure.Execute(r, tag); err != nil {
		return err
	}
	name := g.Name
	v, _ := r.Environment.Context.Get(name)
	macro, ok := v.(exec.Macro)
	st := stateOf(r)
	if !ok || st == nil {
		return fmt.Errorf("macro %s: cannot guard its recursion", name)
	}
	r.Environment.Context.Set(name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if st.macroDepth >= maxMacroDepth {
			return exec.AsValue(fmt.Errorf("macro %s: calls nested deeper than %d", name, maxMacroDepth))
		}
		st.macroDepth++
		defer func() { st.macroDepth-- }()
		return macro(params)
	}))
	return nil
}

// gonja's center and indent filters allocate whatever width they are given, so center(10**10)
// exhausts memory; a width beyond the output limit is refused instead.
func boundWidthFilter(name string, fn exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if err := checkWidth(name, params); err != nil {
			return exec.AsValue(err)
		}
		return fn(e, in, params)
	}
}

func checkWidth(name string, params *exec.VarArgs) error {
	widths := []*exec.Value{params.KwArgs["width"]}
	if len(params.Args) > 0 {
		widths = append(widths, params.Args[0])
	}
	for _, w := range widths {
		if w != nil && w.IsNumber() && w.Float() > maxOutputBytes {
			return fmt.Errorf("%s: width %s too large", name, w.String())
		}
	}
	return nil
}
