package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"nibble/engine/chat"
	"nibble/engine/tokenizer"
)

// ErrControlText is returned by EncodeChat when a message holds the text of a
// control token (or its role does) and the chat template makes it impossible
// to tell where that text lands in the prompt: tokenizing it anyway could let
// a user or a document end a turn or open a new one.
var ErrControlText = errors.New("special-token text in a message cannot be kept as plain text")

// EncodeChat renders a conversation with the model's chat template and
// tokenizes it. Only the template's own markup becomes control tokens: the
// text of every message's content is tokenized as plain text, so a user or a
// document that writes "<|im_end|>" or "</s>" cannot close a turn. BOS is
// added only when the model wants it and the template did not already write
// it.
func (m *Model) EncodeChat(msgs []chat.Message) ([]int32, error) {
	return m.Prompt().Encode(msgs)
}

// ChatPrompt renders conversations with a chat template and tokenizes them
// with a model's tokenizer: the model's own template (Model.Prompt), or
// another one chosen for the model, such as the user's (chat.ParseCustom)
// or none (chat.None).
type ChatPrompt struct {
	Tok      *tokenizer.Tokenizer
	Template *chat.Template
	// EnableThinking and ReasoningEffort are passed to the template as
	// enable_thinking and reasoning_effort (chat.Vars) when set.
	EnableThinking  *bool
	ReasoningEffort string
	// CheckText, when set, sees the rendered text before it is tokenized
	// (EncodeRendered); its error is returned instead of tokenizing, so a
	// text too long for the context is refused by its length first.
	CheckText func(text string) error
}

// Prompt is the model's tokenizer with its own template.
func (m *Model) Prompt() ChatPrompt { return ChatPrompt{Tok: m.Tok, Template: m.Template} }

// Encode is EncodeChat with p's template: only the template's markup
// becomes control tokens, and BOS is added when the tokenizer asks for it
// and the template did not write it.
func (p ChatPrompt) Encode(msgs []chat.Message) ([]int32, error) {
	return p.encodeChat(msgs, false)
}

// EncodeRendered is Encode that also returns the rendered prompt text,
// whose end says how the reply begins (inside a think block, on a
// harmony channel: package reasoning).
func (p ChatPrompt) EncodeRendered(msgs []chat.Message) ([]int32, string, error) {
	text, plain, err := p.renderChat(msgs, false)
	if err != nil {
		return nil, "", err
	}
	if p.CheckText != nil {
		if err := p.CheckText(text); err != nil {
			return nil, "", err
		}
	}
	return p.tokenize(text, plain), text, nil
}

// The model's prompt, for the tests of the rendering's internals.
func (m *Model) encodeChat(msgs []chat.Message, force bool) ([]int32, error) {
	return m.Prompt().encodeChat(msgs, force)
}
func (m *Model) tokenText(id int32) string { return m.Prompt().tokenText(id) }
func (m *Model) chatVars() chat.Vars       { return m.Prompt().chatVars() }
func (m *Model) renderChat(msgs []chat.Message, force bool) (string, []tokenizer.Span, error) {
	return m.Prompt().renderChat(msgs, force)
}
func (m *Model) placeholderSpans(msgs []chat.Message, vars chat.Vars, plain string) ([]tokenizer.Span, bool) {
	return m.Prompt().placeholderSpans(msgs, vars, plain)
}

func (p ChatPrompt) encodeChat(msgs []chat.Message, force bool) ([]int32, error) {
	text, plain, err := p.renderChat(msgs, force)
	if err != nil {
		return nil, err
	}
	return p.tokenize(text, plain), nil
}

// tokenize tokenizes a rendered prompt, plain spans as plain text, and adds
// BOS when the tokenizer asks for it and the template did not write it.
func (p ChatPrompt) tokenize(text string, plain []tokenizer.Span) []int32 {
	ids := p.Tok.EncodeSpans(text, false, plain)
	if p.Tok.AddBOS() && !(len(ids) > 0 && ids[0] == p.Tok.BOS()) {
		ids = append([]int32{p.Tok.BOS()}, ids...)
	}
	return ids
}

// EncodePrompt tokenizes raw text for completion, with BOS/EOS as the model
// asks and special-token text kept as plain text.
func (m *Model) EncodePrompt(text string) []int32 { return m.Tok.Encode(text, true, false) }

func (p ChatPrompt) tokenText(id int32) string {
	if id < 0 || int(id) >= p.Tok.VocabSize() {
		return ""
	}
	return string(p.Tok.Piece(id))
}

// Noncharacters never occur in real text (Unicode reserves them for internal
// use), so they can mark where message content lands in a render. They are
// removed from messages first.
const (
	markOpen  = '\uFDD0'
	markClose = '\uFDD1'
	markDigit = '\uFDE0' // markDigit+d is hex digit d of a placeholder's index
)

func isMark(r rune) bool { return r >= 0xFDD0 && r <= 0xFDEF }

func stripMarks(s string) string {
	if !strings.ContainsFunc(s, isMark) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isMark(r) {
			return -1
		}
		return r
	}, s)
}

// chatVars are the render variables of EncodeChat, with one clock for every
// render of a call so that strftime_now cannot make the renders differ.
func (p ChatPrompt) chatVars() chat.Vars {
	now := time.Now()
	return chat.Vars{
		BOS: p.tokenText(p.Tok.BOS()), EOS: p.tokenText(p.Tok.EOS()),
		AddGenerationPrompt: true,
		EnableThinking:      p.EnableThinking,
		ReasoningEffort:     p.ReasoningEffort,
		Now:                 func() time.Time { return now },
	}
}

// renderChat renders msgs and returns the byte spans of the text that came
// from message contents, to be tokenized as plain text. When no content could
// form a control token the spans are not needed and nil is returned, unless
// force asks for them (tests compare both ways).
func (p ChatPrompt) renderChat(msgs []chat.Message, force bool) (string, []tokenizer.Span, error) {
	vars := p.chatVars()
	clean := make([]chat.Message, len(msgs))
	risky := false
	for i, msg := range msgs {
		// Roles are markup for the template (Phi-3 writes <|{{ role }}|>), so
		// they cannot be kept plain; one holding a control token is refused.
		if c := p.Tok.ControlSpans(msg.Role); len(c) > 0 {
			return "", nil, fmt.Errorf("%w: message %d has role %q", ErrControlText, i, msg.Role)
		}
		clean[i] = chat.Message{Role: stripMarks(msg.Role), Content: stripMarks(msg.Content)}
		if len(p.Tok.ControlSpans(clean[i].Content)) > 0 || p.Tok.ControlEdge(clean[i].Content) {
			risky = true
		}
	}
	text, err := p.Template.Render(clean, vars)
	if err != nil || !(risky || force) {
		return text, nil, err
	}
	if spans, ok := wrappedSpans(p.Template, clean, vars, text); ok {
		return text, spans, nil
	}
	if spans, ok := p.placeholderSpans(clean, vars, text); ok {
		return text, spans, nil
	}
	return "", nil, fmt.Errorf("%w: chat template %s transforms message content in a way that hides where it goes",
		ErrControlText, p.Template.Name())
}

// wrappedSpans renders again with every non-empty content between markOpen
// and markClose, then lines the result up with plain, the render of the bare
// contents: the text between the marks must be the markup of plain, and each
// content must sit in plain as it is or trimmed (templates often "| trim" it,
// which the marks block). Empty contents are left bare since templates test
// them for truth. It fails when the template inspects content more than that.
func wrappedSpans(tpl *chat.Template, msgs []chat.Message, vars chat.Vars, plain string) ([]tokenizer.Span, bool) {
	wrapped := make([]chat.Message, len(msgs))
	for i, msg := range msgs {
		wrapped[i] = msg
		if msg.Content != "" {
			wrapped[i].Content = string(markOpen) + msg.Content + string(markClose)
		}
	}
	out, err := tpl.Render(wrapped, vars)
	if err != nil {
		return nil, false
	}
	// Split into markup[0] content[0] markup[1] ... content[n-1] markup[n].
	var markup, content []string
	rest := out
	for {
		i := strings.IndexFunc(rest, isMark)
		if i < 0 {
			markup = append(markup, rest)
			break
		}
		r, size := utf8.DecodeRuneInString(rest[i:])
		if r != markOpen {
			return nil, false
		}
		markup = append(markup, rest[:i])
		rest = rest[i+size:]
		j := strings.IndexFunc(rest, isMark)
		if j < 0 {
			return nil, false
		}
		if r, size = utf8.DecodeRuneInString(rest[j:]); r != markClose {
			return nil, false
		}
		content = append(content, rest[:j])
		rest = rest[j+size:]
	}
	var spans []tokenizer.Span
	pos := 0
	for i, c := range content {
		if !strings.HasPrefix(plain[pos:], markup[i]) {
			return nil, false
		}
		pos += len(markup[i])
		found := false
		for _, cand := range trimmedForms(c) {
			if strings.HasPrefix(plain[pos:], cand) && strings.HasPrefix(plain[pos+len(cand):], markup[i+1]) {
				spans = append(spans, tokenizer.Span{Start: pos, End: pos + len(cand)})
				pos += len(cand)
				found = true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return spans, plain[pos:] == markup[len(markup)-1]
}

// trimmedForms lists s as a template may print it: as is, then stripped of
// whitespace at both ends, the start or the end (Python's str.strip also
// strips the separators U+001C..U+001F).
func trimmedForms(s string) []string {
	forms := []string{s}
	for _, space := range []func(rune) bool{unicode.IsSpace, isPySpace} {
		for _, f := range []string{
			strings.TrimFunc(s, space), strings.TrimLeftFunc(s, space), strings.TrimRightFunc(s, space),
		} {
			if !containsString(forms, f) {
				forms = append(forms, f)
			}
		}
	}
	return forms
}

func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// placeholderSpans is the fallback for templates that inspect content (say,
// DeepSeek R1's content.split('</think>')): only the control-token texts in
// the contents are swapped for placeholders of noncharacters, which such
// inspection leaves alone; the render must then give plain back once they are
// swapped back, and their places are the spans. Content that merely ends in a
// partial control token is not protected here.
func (p ChatPrompt) placeholderSpans(msgs []chat.Message, vars chat.Vars, plain string) ([]tokenizer.Span, bool) {
	var texts []string // by placeholder index
	defused := make([]chat.Message, len(msgs))
	for i, msg := range msgs {
		defused[i] = msg
		ctl := p.Tok.ControlSpans(msg.Content)
		if len(ctl) == 0 {
			continue
		}
		var b strings.Builder
		last := 0
		for _, s := range ctl {
			b.WriteString(msg.Content[last:s.Start])
			writePlaceholder(&b, len(texts))
			texts = append(texts, msg.Content[s.Start:s.End])
			last = s.End
		}
		b.WriteString(msg.Content[last:])
		defused[i].Content = b.String()
		if len(p.Tok.ControlSpans(defused[i].Content)) > 0 {
			return nil, false
		}
	}
	if len(texts) == 0 {
		return nil, true
	}
	out, err := p.Template.Render(defused, vars)
	if err != nil {
		return nil, false
	}
	var b strings.Builder
	var spans []tokenizer.Span
	for rest := out; rest != ""; {
		i := strings.IndexFunc(rest, isMark)
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		idx, n, ok := readPlaceholder(rest[i:])
		if !ok || idx >= len(texts) {
			return nil, false
		}
		spans = append(spans, tokenizer.Span{Start: b.Len(), End: b.Len() + len(texts[idx])})
		b.WriteString(texts[idx])
		rest = rest[i+n:]
	}
	return spans, b.String() == plain
}

// writePlaceholder writes markOpen, idx in hex digits of noncharacters, and
// markClose.
func writePlaceholder(b *strings.Builder, idx int) {
	b.WriteRune(markOpen)
	for _, d := range fmt.Sprintf("%x", idx) {
		v := d - '0'
		if d >= 'a' {
			v = d - 'a' + 10
		}
		b.WriteRune(markDigit + v)
	}
	b.WriteRune(markClose)
}

// readPlaceholder parses a placeholder at the start of s, returning its index
// and length in bytes.
func readPlaceholder(s string) (idx, n int, ok bool) {
	r, size := utf8.DecodeRuneInString(s)
	if r != markOpen {
		return 0, 0, false
	}
	n = size
	digits := 0
	for {
		r, size = utf8.DecodeRuneInString(s[n:])
		n += size
		switch {
		case r == markClose && digits > 0:
			return idx, n, true
		case r >= markDigit && r < markDigit+16 && digits < 8:
			idx = idx<<4 | int(r-markDigit)
			digits++
		default:
			return 0, 0, false
		}
	}
}
