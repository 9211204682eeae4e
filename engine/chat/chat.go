// Package chat renders a model's chat template (the GGUF key tokenizer.chat_template, a Jinja
// template written for Hugging Face transformers) into the prompt text the model was trained on.
//
// Rendering follows transformers' apply_chat_template: an ImmutableSandboxedEnvironment with
// trim_blocks and lstrip_blocks on, the loopcontrols and {% generation %} extensions, the
// globals raise_exception and strftime_now, a tojson filter that behaves like
// json.dumps(ensure_ascii=False), and the variables messages, tools (None), add_generation_prompt,
// bos_token and eos_token. The engine is gonja; where it differs from jinja2 in ways chat
// templates hit, this package patches it: string literals with Python escapes, lstrip_blocks,
// 'fmt' % args, str.strip/split/replace and friends, dict order and items(), tojson, range.
// Known remaining differences: None prints as "" (jinja2: "None") and a variable set to None
// tests as undefined (gonja has one nil for both); 2 ** 3 is 8.0; indexing a string is per
// byte (slicing is per character).
package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Message is one turn of a conversation. Role is "system", "user", "assistant" (or whatever the
// template understands, e.g. "tool").
type Message struct {
	Role, Content string
}

// Vars are the render-time variables besides the messages.
type Vars struct {
	BOS, EOS            string
	AddGenerationPrompt bool
	// EnableThinking, when set, is the template variable enable_thinking (Qwen3's templates
	// write an empty think block for false); nil leaves it undefined, the template's default.
	EnableThinking *bool
	// ReasoningEffort, when not empty, is the template variable reasoning_effort (gpt-oss:
	// "low", "medium" or "high").
	ReasoningEffort string
	// Now is the clock behind strftime_now; nil means time.Now. Tests inject a fixed time.
	Now func() time.Time
}

// Template is a parsed chat template. It is safe for concurrent use.
type Template struct {
	name   string
	source string
	tpl    *exec.Template
}

// TemplateError is returned by Render when the template itself calls raise_exception, e.g. the
// Gemma templates for a system message or Mistral's for roles that do not alternate.
type TemplateError struct {
	Msg string
}

func (e *TemplateError) Error() string { return "chat template raised: " + e.Msg }

// errInternal marks a panic inside gonja or our patches, recovered so that a hostile template
// cannot crash the app; the fuzz test treats it as a bug.
var errInternal = errors.New("internal error")

// maxOutputBytes bounds what one render may write; templates come from untrusted files and a
// prompt anywhere near this size could not be evaluated anyway.
const maxOutputBytes = 64 << 20

// Parse compiles a Jinja chat template.
func Parse(source string) (*Template, error) {
	return parseNamed("gguf", source)
}

func parseNamed(name, source string) (t *Template, err error) {
	// gonja panics on some malformed input; a bad template must be an error, not a crash.
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("parse chat template %s: %w: %v", name, errInternal, r)
		}
	}()
	tpl, err := compile(source)
	if err != nil {
		return nil, fmt.Errorf("parse chat template %s: %w", name, err)
	}
	return &Template{name: name, source: source, tpl: tpl}, nil
}

// ParseCustom compiles a template the user wrote for a model; its Name is "custom".
func ParseCustom(source string) (*Template, error) {
	return parseNamed(CustomName, source)
}

// CustomName is the Name of a template made by ParseCustom.
const CustomName = "custom"

// Name says where the template came from: "gguf" for Parse, "custom" for ParseCustom, "none"
// for None, or the name of a built-in fallback ("chatml", "llama3", "llama2", "mistral",
// "gemma", "phi3", "harmony").
func (t *Template) Name() string { return t.name }

// Source is the Jinja text the template was compiled from.
func (t *Template) Source() string { return t.source }

// Render applies the template to a conversation.
func (t *Template) Render(msgs []Message, v Vars) (out string, err error) {
	now := v.Now
	if now == nil {
		now = time.Now
	}
	st := &renderState{now: now}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", renderPanic(t.name, r)
		}
	}()

	messages := make([]any, len(msgs))
	for i, m := range msgs {
		messages[i] = newOrderedDict("role", m.Role, "content", m.Content)
	}
	data := map[string]any{
		"messages":              messages,
		"tools":                 nil,
		"add_generation_prompt": v.AddGenerationPrompt,
		"bos_token":             v.BOS,
		"eos_token":             v.EOS,
	}
	if v.EnableThinking != nil {
		data["enable_thinking"] = *v.EnableThinking
	}
	if v.ReasoningEffort != "" {
		data["reasoning_effort"] = v.ReasoningEffort
	}
	st.addGlobals(data)

	w := &limitedBuilder{limit: maxOutputBytes}
	execErr := t.tpl.Execute(w, exec.NewContext(data))
	if st.raised != nil {
		return "", st.raised
	}
	if execErr != nil {
		if w.overflow {
			return "", fmt.Errorf("render chat template %s: %w", t.name, errOutputTooLarge)
		}
		return "", fmt.Errorf("render chat template %s: %w", t.name, execErr)
	}
	return w.String(), nil
}

// gonjaOperatorPanics are the panics of gonja's operators on bad operands, where jinja2 raises
// (ZeroDivisionError for x % 0) or returns an empty string ('a' * -1): Go's % and
// strings.Repeat panic. They are the template's errors, not ours.
var gonjaOperatorPanics = []string{
	"integer divide by zero",        // 1 % 0
	"negative Repeat count",         // 'a' * -1
	"Repeat output length overflow", // 'ab' * 2^62
	"makeslice: len out of range",   // 'a' * 2^62
}

// renderPanic turns a panic recovered from Render into its error.
func renderPanic(name string, r any) error {
	msg := fmt.Sprint(r)
	for _, p := range gonjaOperatorPanics {
		if strings.Contains(msg, p) {
			return fmt.Errorf("render chat template %s: invalid operands: %s", name, msg)
		}
	}
	return fmt.Errorf("render chat template %s: %w: %v", name, errInternal, r)
}

var errOutputTooLarge = fmt.Errorf("output exceeds %d bytes", maxOutputBytes)

// limitedBuilder is a strings.Builder that refuses to grow past limit.
type limitedBuilder struct {
	strings.Builder
	limit    int
	overflow bool
}

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.limit {
		b.overflow = true
		return 0, errOutputTooLarge
	}
	return b.Builder.Write(p)
}

func (b *limitedBuilder) WriteString(s string) (int, error) {
	if b.Len()+len(s) > b.limit {
		b.overflow = true
		return 0, errOutputTooLarge
	}
	return b.Builder.WriteString(s)
}
