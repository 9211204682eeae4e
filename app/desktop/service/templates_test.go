package service

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nibble/app/desktop/demo"
	"nibble/engine/synth"
)

// The demo model's file has no chat template: it gets the built-in Llama 2
// one, and the info and preview say so.
func TestPromptTemplateInfoShowsWhereItComesFrom(t *testing.T) {
	s, _ := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	in, err := s.PromptTemplate("")
	if err != nil {
		t.Fatal(err)
	}
	if in.Mode != TemplateModel || in.Source != TemplateFromBuiltin || in.Format != "llama2" || !in.Loaded ||
		in.FileTemplate != "" || in.Template == "" || in.Template != in.ModelTemplate {
		t.Fatalf("info %+v", in)
	}
	pv := in.Preview
	if pv.Error != nil || pv.Tokens == 0 || !strings.Contains(pv.Text, "[INST] <<SYS>>\nYou are a helpful assistant.") {
		t.Fatalf("preview %+v", pv)
	}
	if pv.Parts[0].Text != "<s>" || !pv.Parts[0].Special {
		t.Fatalf("the preview does not start with BOS as a special token: %+v", pv.Parts[:2])
	}
	if len(in.Sample) != 4 || in.Sample[0].Role != "system" || in.Sample[3].Role != "user" {
		t.Fatalf("sample %+v", in.Sample)
	}
	if _, err := s.PromptTemplate(filepath.Join(t.TempDir(), "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing file: %v", err)
	}
}

func TestPreviewShowsTemplateErrorsWithTheirPlace(t *testing.T) {
	s, _ := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source     string
		line, col  int
		msgContain string
	}{
		{"{% for m in messages %}\n{{ m.content }}\n", 2, 0, "endfor"},
		{"Hello\n{% if messages %}{{ messages[0].content }}{% endif %}\n{{ messages | nosuchfilter }}", 3, 0, "nosuchfilter"},
		{"{{ raise_exception('only user turns') }}", 0, 0, "only user turns"},
		{"   ", 0, 0, "empty"},
		{"{% for m in messages %}{% endfor %}\n", 0, 0, "no text"},
	} {
		pv, err := s.PreviewPromptTemplate(PromptTemplateRequest{Mode: TemplateCustom, Source: c.source})
		if err != nil {
			t.Fatalf("%q: %v", c.source, err)
		}
		if pv.Error == nil || len(pv.Parts) != 0 {
			t.Fatalf("%q: preview %+v, want an error", c.source, pv)
		}
		if pv.Error.Line != c.line || (c.col > 0 && pv.Error.Column != c.col) || !strings.Contains(pv.Error.Message, c.msgContain) {
			t.Errorf("%q: %+v, want line %d and %q", c.source, *pv.Error, c.line, c.msgContain)
		}
		// Saving it is refused with the same problem, and nothing is kept.
		_, err = s.SavePromptTemplate(PromptTemplateRequest{Mode: TemplateCustom, Source: c.source})
		if err == nil || !strings.Contains(err.Error(), c.msgContain) {
			t.Errorf("%q: save: %v", c.source, err)
		}
		if c.line > 0 && !strings.Contains(err.Error(), "line ") {
			t.Errorf("%q: save error %q does not say where", c.source, err)
		}
	}
	if n := len(s.store.Get().PromptTemplates); n != 0 {
		t.Fatalf("%d templates kept after refusals", n)
	}
	if _, err := s.PreviewPromptTemplate(PromptTemplateRequest{Mode: "jinja"}); err == nil {
		t.Fatal("an unknown mode previewed")
	}
	pv, err := s.PreviewPromptTemplate(PromptTemplateRequest{Mode: TemplateNone})
	if err != nil || pv.Error != nil {
		t.Fatal(pv, err)
	}
	want := "<s>You are a helpful assistant.\n\nWhat is the capital of France?\n\nThe capital of France is Paris.\n\nAnd of Italy?"
	if pv.Text != want {
		t.Fatalf("none renders %q, want %q", pv.Text, want)
	}
}

// An override is kept per file in the settings, changes the next chat's
// prompt token ids at once (the model stays loaded), survives a reload,
// and clearing it gives the built-in template's ids back.
func TestTemplateOverrideChangesThePromptIDs(t *testing.T) {
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	path := s.Status().Model.Path
	f, err := s.tmpl.factsOf(path)
	if err != nil {
		t.Fatal(err)
	}
	send := func() []int32 {
		t.Helper()
		if _, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "Hello there"}}, MaxTokens: 2}); err != nil {
			t.Fatal(err)
		}
		rec.final(t)
		last, err := s.LastPrompt()
		if err != nil || last.Path != path {
			t.Fatal(last, err)
		}
		return last.IDs
	}
	last := func() []int32 { l, _ := s.LastPrompt(); return l.IDs }
	builtin := send()
	if want := f.tok.Encode("[INST] Hello there [/INST]", true, false); !slices.Equal(builtin, want) {
		t.Fatalf("llama2 ids %v, want %v", builtin, want)
	}

	// Jinja drops the template's last newline, as transformers does.
	custom := "{% for m in messages %}### {{ m.role }}:\n{{ m.content }}\n{% endfor %}### assistant:\n"
	in, err := s.SavePromptTemplate(PromptTemplateRequest{Mode: TemplateCustom, Source: custom})
	if err != nil {
		t.Fatal(err)
	}
	if in.Mode != TemplateCustom || in.Source != TemplateFromUser || in.Custom != custom || in.Template != custom ||
		!strings.Contains(in.Preview.Text, "### system:\nYou are a helpful assistant.\n") {
		t.Fatalf("after saving: %+v", in)
	}
	if got := s.store.Get().PromptTemplates[path]; got.Mode != TemplateCustom || got.Source != custom {
		t.Fatalf("settings keep %+v", got)
	}
	if st := s.Status(); st.Model.Template != "custom" {
		t.Fatalf("the model's template is %q", st.Model.Template)
	}
	if want := f.tok.Encode("### user:\nHello there\n### assistant:", true, false); !slices.Equal(send(), want) {
		t.Fatalf("custom ids %v, want %v", last(), want)
	}
	lp, _ := s.LastPrompt()
	if lp.Text != "<s>### user:\nHello there\n### assistant:" {
		t.Fatalf("last prompt text %q", lp.Text)
	}

	if _, err := s.SavePromptTemplate(PromptTemplateRequest{Mode: TemplateNone}); err != nil {
		t.Fatal(err)
	}
	if want := f.tok.Encode("Hello there", true, false); !slices.Equal(send(), want) {
		t.Fatalf("none ids, want %v", want)
	}
	if d := s.Diagnostics().TemplateStatus; !strings.HasPrefix(d, "none: plain completion") {
		t.Fatalf("Diagnostics says the template is %q", d)
	}
	// A window with older settings cannot undo it.
	old := s.Settings()
	old.PromptTemplates = nil
	if _, err := s.UpdateSettings(old); err != nil {
		t.Fatal(err)
	}
	if got := s.store.Get().PromptTemplates[path]; got.Mode != TemplateNone {
		t.Fatalf("UpdateSettings dropped the template: %+v", got)
	}

	// Loaded again after another model, it still has no template.
	other := filepath.Join(t.TempDir(), "other.gguf")
	o := demo.Options()
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 1, 64, 2, 1, 128
	if err := synth.Generate(other, o); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadModel(LoadRequest{Path: other}); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st.Model.Template != "llama2" {
		t.Fatalf("another file got template %q", st.Model.Template)
	}
	if _, err := s.LoadModel(LoadRequest{Path: path}); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st.Model.Template != "none" {
		t.Fatalf("reloaded with template %q, want none", st.Model.Template)
	}
	if want := f.tok.Encode("Hello there", true, false); !slices.Equal(send(), want) {
		t.Fatalf("none ids after a reload, want %v", want)
	}

	in, err = s.ClearPromptTemplate(path)
	if err != nil || in.Mode != TemplateModel || in.Source != TemplateFromBuiltin {
		t.Fatal(in, err)
	}
	if _, ok := s.store.Get().PromptTemplates[path]; ok {
		t.Fatal("the cleared template is still kept")
	}
	if got := send(); !slices.Equal(got, builtin) {
		t.Fatalf("cleared: ids %v, want the built-in template's %v", got, builtin)
	}
}
