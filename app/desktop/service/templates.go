package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"nibble/app/settings"
	"nibble/engine"
	"nibble/engine/chat"
	"nibble/engine/gguf"
	"nibble/engine/tokenizer"
)

// Prompt template modes: what the user chose for a model file
// (PromptTemplateInfo.Mode, PromptTemplateRequest.Mode).
const (
	// TemplateModel: the file's own template, or the built-in one chosen
	// for a file that has none that parses.
	TemplateModel  = "model"
	TemplateCustom = settings.PromptTemplateCustom
	TemplateNone   = settings.PromptTemplateNone
)

// Where the template in use comes from (PromptTemplateInfo.Source).
const (
	TemplateFromFile    = "file"    // the file's tokenizer.chat_template
	TemplateFromBuiltin = "builtin" // a built-in format (PromptTemplateInfo.Format)
	TemplateFromUser    = "custom"  // the user's template
	TemplateFromNone    = "none"    // no template: plain completion
)

// PromptTemplateInfo is the chat template of one model file: the one in
// use, where it comes from, and what the file itself offers.
type PromptTemplateInfo struct {
	Path string `json:"path"`
	// Mode is what the user chose: model, custom or none.
	Mode string `json:"mode"`
	// Source is where the template in use comes from: file, builtin,
	// custom or none.
	Source string `json:"source"`
	// Format names the built-in format in use (Source builtin), or the
	// one the file would fall back to.
	Format string `json:"format,omitempty"`
	// Template is the Jinja text in use (for none, the template that
	// defines plain completion).
	Template string `json:"template"`
	// FileTemplate is the file's own tokenizer.chat_template ("" when it
	// has none); FileProblem says why it is not used when it does not
	// parse.
	FileTemplate string `json:"fileTemplate,omitempty"`
	FileProblem  string `json:"fileProblem,omitempty"`
	// ModelTemplate is what mode "model" uses: the file's own, or the
	// built-in one (Format).
	ModelTemplate string `json:"modelTemplate"`
	// Custom is the user's saved template ("" when none is saved).
	Custom string `json:"custom,omitempty"`
	// Problem says why the saved choice cannot be used (a custom template
	// that no longer parses); the model's own is used meanwhile.
	Problem string `json:"problem,omitempty"`
	// Loaded: the file is the loaded model, so a change applies to the
	// next reply.
	Loaded bool `json:"loaded"`
	// Sample is the conversation Preview renders.
	Sample  []Message       `json:"sample"`
	Preview TemplatePreview `json:"preview"`
}

// PromptTemplateRequest asks to preview or save a template for the model
// file Path: Mode model (the file's own or built-in; saving it clears the
// user's choice), custom (Source, a Jinja chat template) or none.
type PromptTemplateRequest struct {
	Path   string `json:"path"`
	Mode   string `json:"mode"`
	Source string `json:"source,omitempty"`
}

// TemplatePreview is the sample conversation rendered and tokenized as
// the model would be given it, or why it cannot be.
type TemplatePreview struct {
	// Parts are the prompt in order: text, and the special (control)
	// tokens, BOS included where the tokenizer adds it.
	Parts  []PromptPart `json:"parts"`
	Text   string       `json:"text"`   // the parts joined
	Tokens int          `json:"tokens"` // the prompt's length in tokens
	// Error says why the template cannot be used; Parts are empty then.
	Error *TemplateProblem `json:"error,omitempty"`
}

// PromptPart is a run of plain text, or one special token's text.
type PromptPart struct {
	Text    string `json:"text"`
	Special bool   `json:"special,omitempty"`
}

// TemplateProblem is a template that does not parse or render: the
// message and, when known, where (line and column from 1; 0 unknown).
type TemplateProblem struct {
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
}

// LastPrompt is the prompt of the last local chat request: its token ids
// and their text, special tokens written out.
type LastPrompt struct {
	Path string  `json:"path"`
	IDs  []int32 `json:"ids"`
	Text string  `json:"text"`
}

// sampleConversation is what a preview renders: a system prompt and two
// user turns around an answer, as a conversation with documents has.
var sampleConversation = []Message{
	{Role: "system", Content: "You are a helpful assistant."},
	{Role: "user", Content: "What is the capital of France?"},
	{Role: "assistant", Content: "The capital of France is Paris."},
	{Role: "user", Content: "And of Italy?"},
}

// promptTemplates shows and keeps the chat template of each model file
// (settings.PromptTemplates, by path), previews templates on a sample
// conversation, and hands the choice to the scheduler.
type promptTemplates struct {
	env
	engine localEngine

	mu    sync.Mutex     // guards facts
	facts *templateFacts // the last file read, for previews as the user types
}

// templateFacts is what a file's header says about its prompts.
type templateFacts struct {
	path       string
	size       int64
	mod        time.Time
	tok        *tokenizer.Tokenizer
	own        *chat.Template // the file's own template, or the built-in one
	fileSource string         // tokenizer.chat_template
	problem    error          // why the file's own is not used
}

// factsOf reads the header of the model file at path (the whole vocabulary
// too: the tokenizer makes the preview), keeping the last file's.
func (p *promptTemplates) factsOf(path string) (*templateFacts, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", filepath.Base(path), problemOf(err))
	}
	p.mu.Lock()
	f := p.facts
	p.mu.Unlock()
	if f != nil && f.path == path && f.size == st.Size() && f.mod.Equal(st.ModTime()) {
		return f, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", filepath.Base(path), problemOf(err))
	}
	defer fh.Close()
	file, err := gguf.ReadHeader(fh, st.Size(), gguf.HeaderOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %s", filepath.Base(path), problemOf(err))
	}
	tok, err := tokenizer.FromGGUF(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	f = &templateFacts{path: path, size: st.Size(), mod: st.ModTime(), tok: tok}
	f.fileSource, _ = file.String("tokenizer.chat_template")
	f.own, f.problem = chat.ForModelOrFallback(f.fileSource, file.Arch(), func(s string) bool { _, ok := tok.TokenID(s); return ok })
	p.mu.Lock()
	p.facts = f
	p.mu.Unlock()
	return f, nil
}

// pathOf is the model file a request names ("": the loaded model).
func (p *promptTemplates) pathOf(path string) (string, error) {
	if path == "" {
		info, ok := p.engine.engine().Info()
		if !ok {
			return "", errors.New("no model is loaded")
		}
		return info.Path, nil
	}
	return cleanPath(path)
}

// chosen is the template the settings choose for the file at path instead
// of its own (nil: none chosen, or a saved one that no longer parses,
// with why).
func (p *promptTemplates) chosen(path string) (*chat.Template, error) {
	saved, ok := p.store.Get().PromptTemplates[filepath.Clean(path)]
	switch {
	case !ok:
		return nil, nil
	case saved.Mode == TemplateNone:
		return chat.None(), nil
	}
	t, err := chat.ParseCustom(saved.Source)
	if err != nil {
		return nil, fmt.Errorf("your template for this model does not parse (%s); the model's own is used", chat.Explain(err))
	}
	return t, nil
}

// templateFor is the template loads of path use instead of the file's own
// (nil: the file's own): the loader hands it to the scheduler.
func (p *promptTemplates) templateFor(path string) *chat.Template {
	t, _ := p.chosen(path)
	return t
}

// info describes the template of the model file at path ("": the loaded
// model).
func (p *promptTemplates) info(path string) (PromptTemplateInfo, error) {
	path, err := p.pathOf(path)
	if err != nil {
		return PromptTemplateInfo{}, fmt.Errorf("prompt template: %w", err)
	}
	f, err := p.factsOf(path)
	if err != nil {
		return PromptTemplateInfo{}, fmt.Errorf("prompt template: %w", err)
	}
	in := PromptTemplateInfo{Path: path, Mode: TemplateModel, FileTemplate: f.fileSource, ModelTemplate: f.own.Source(),
		Sample: sampleConversation}
	if f.problem != nil {
		in.FileProblem = f.problem.Error()
	}
	if f.own.Name() != "gguf" {
		in.Format = f.own.Name()
	}
	saved, hasSaved := p.store.Get().PromptTemplates[path]
	if hasSaved {
		in.Mode, in.Custom = saved.Mode, saved.Source
	}
	use, problem := p.chosen(path)
	if problem != nil {
		in.Problem = problem.Error()
	}
	switch {
	case use == nil && f.own.Name() == "gguf":
		in.Source, use = TemplateFromFile, f.own
	case use == nil:
		in.Source, use = TemplateFromBuiltin, f.own
	case use.Name() == chat.NoneName:
		in.Source = TemplateFromNone
	default:
		in.Source = TemplateFromUser
	}
	in.Template = use.Source()
	in.Preview = previewOf(f.tok, use)
	if loaded, ok := p.engine.engine().Info(); ok {
		in.Loaded = filepath.Clean(loaded.Path) == path
	}
	return in, nil
}

// templateOf is the template req asks for, or the problem with it.
func (p *promptTemplates) templateOf(req PromptTemplateRequest, f *templateFacts) (*chat.Template, *TemplateProblem, error) {
	switch req.Mode {
	case TemplateModel, "":
		return f.own, nil, nil
	case TemplateNone:
		return chat.None(), nil, nil
	case TemplateCustom:
		if strings.TrimSpace(req.Source) == "" {
			return nil, &TemplateProblem{Message: "the template is empty"}, nil
		}
		t, err := chat.ParseCustom(req.Source)
		if err != nil {
			return nil, problemOfTemplate(err), nil
		}
		return t, nil, nil
	}
	return nil, nil, fmt.Errorf("prompt template: mode %q is not one of model, custom, none", req.Mode)
}

// preview renders the sample conversation with the template req asks for.
// A template that fails is not an error here: the preview carries it.
func (p *promptTemplates) preview(req PromptTemplateRequest) (TemplatePreview, error) {
	path, err := p.pathOf(req.Path)
	if err != nil {
		return TemplatePreview{}, fmt.Errorf("preview template: %w", err)
	}
	f, err := p.factsOf(path)
	if err != nil {
		return TemplatePreview{}, fmt.Errorf("preview template: %w", err)
	}
	t, problem, err := p.templateOf(req, f)
	switch {
	case err != nil:
		return TemplatePreview{}, err
	case problem != nil:
		return TemplatePreview{Parts: []PromptPart{}, Error: problem}, nil
	}
	return previewOf(f.tok, t), nil
}

// save keeps req's choice for its file and applies it to the loaded model
// at once (mode model clears the user's choice). A custom template must
// parse and render the sample conversation to be saved.
func (p *promptTemplates) save(req PromptTemplateRequest) (PromptTemplateInfo, error) {
	if req.Mode == TemplateModel || req.Mode == "" {
		return p.clear(req.Path)
	}
	path, err := p.pathOf(req.Path)
	if err != nil {
		return PromptTemplateInfo{}, fmt.Errorf("save template: %w", err)
	}
	f, err := p.factsOf(path)
	if err != nil {
		return PromptTemplateInfo{}, fmt.Errorf("save template: %w", err)
	}
	t, problem, err := p.templateOf(req, f)
	if err != nil {
		return PromptTemplateInfo{}, err
	}
	if problem == nil {
		problem = previewOf(f.tok, t).Error
	}
	if problem != nil {
		return PromptTemplateInfo{}, fmt.Errorf("the template was not saved: %s", problemText(problem))
	}
	keep := settings.PromptTemplate{Mode: req.Mode}
	if req.Mode == TemplateCustom {
		keep.Source = req.Source
	}
	if err := p.store.Update(func(c *settings.Settings) error {
		if c.PromptTemplates == nil {
			c.PromptTemplates = map[string]settings.PromptTemplate{}
		}
		c.PromptTemplates[path] = keep
		return nil
	}); err != nil {
		return PromptTemplateInfo{}, fmt.Errorf("save template: %w", err)
	}
	if p.engine.engine().SetTemplate(path, t) {
		p.statusChanged() // the model's info names its template
	}
	return p.info(path)
}

// clear forgets the user's template for the file at path: its own (or
// the built-in one) is used again, at once if it is loaded.
func (p *promptTemplates) clear(path string) (PromptTemplateInfo, error) {
	path, err := p.pathOf(path)
	if err != nil {
		return PromptTemplateInfo{}, fmt.Errorf("clear template: %w", err)
	}
	if err := p.store.Update(func(c *settings.Settings) error {
		delete(c.PromptTemplates, path)
		return nil
	}); err != nil {
		return PromptTemplateInfo{}, fmt.Errorf("clear template: %w", err)
	}
	if p.engine.engine().SetTemplate(path, nil) {
		p.statusChanged()
	}
	return p.info(path)
}

// lastPrompt is the prompt of the last request the local model was given.
func (p *promptTemplates) lastPrompt() (LastPrompt, error) {
	sched := p.engine.engine()
	info, ok := sched.Info()
	if !ok {
		return LastPrompt{}, errors.New("last prompt: no model is loaded")
	}
	ids := sched.LastPrompt()
	if ids == nil {
		ids = []int32{}
	}
	f, err := p.factsOf(info.Path)
	if err != nil {
		return LastPrompt{}, fmt.Errorf("last prompt: %w", err)
	}
	var b strings.Builder
	for _, part := range promptParts(f.tok, ids) {
		b.WriteString(part.Text)
	}
	return LastPrompt{Path: info.Path, IDs: ids, Text: b.String()}, nil
}

// previewOf renders and tokenizes the sample conversation with t as the
// engine does for a chat.
func previewOf(tok *tokenizer.Tokenizer, t *chat.Template) TemplatePreview {
	msgs := make([]chat.Message, len(sampleConversation))
	for i, m := range sampleConversation {
		msgs[i] = chat.Message{Role: m.Role, Content: m.Content}
	}
	ids, err := engine.ChatPrompt{Tok: tok, Template: t}.Encode(msgs)
	if err != nil {
		return TemplatePreview{Parts: []PromptPart{}, Error: problemOfTemplate(err)}
	}
	pv := TemplatePreview{Parts: promptParts(tok, ids), Tokens: len(ids)}
	for _, part := range pv.Parts {
		pv.Text += part.Text
		if !part.Special && strings.TrimSpace(part.Text) != "" {
			return pv
		}
	}
	return TemplatePreview{Parts: []PromptPart{}, Error: &TemplateProblem{
		Message: "the template renders the conversation as no text at all: print the messages (for example {{ message.content }} in a loop over messages)"}}
}

// promptParts splits a prompt into runs of text and special tokens.
func promptParts(tok *tokenizer.Tokenizer, ids []int32) []PromptPart {
	parts := []PromptPart{}
	var run []int32
	first := true
	flush := func() {
		if len(run) == 0 {
			return
		}
		var text string
		if first {
			// Decode drops the space a SentencePiece tokenizer puts before
			// the prompt's text, which the template did not write.
			text, first = tok.Decode(run), false
		} else {
			var b []byte
			for _, id := range run {
				b = append(b, tok.Piece(id)...)
			}
			text = string(b)
		}
		parts = append(parts, PromptPart{Text: text})
		run = run[:0]
	}
	for _, id := range ids {
		if tok.IsControl(id) {
			flush()
			parts = append(parts, PromptPart{Text: tok.TokenText(id), Special: true})
			continue
		}
		run = append(run, id)
	}
	flush()
	return parts
}

func problemOfTemplate(err error) *TemplateProblem {
	p := chat.Explain(err)
	return &TemplateProblem{Message: p.Message, Line: p.Line, Column: p.Column}
}

// problemText is a TemplateProblem in one line, with its place.
func problemText(p *TemplateProblem) string {
	return chat.Problem{Message: p.Message, Line: p.Line, Column: p.Column}.String()
}
