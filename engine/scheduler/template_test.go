package scheduler

import (
	"context"
	"slices"
	"testing"

	"nibble/engine"
	"nibble/engine/chat"
	"nibble/engine/kv"
)

// A template chosen for a file replaces its own in the prompt's token
// ids, at once while it is loaded and at its next load, and nil gives the
// file's own back.
func TestSetTemplateChangesThePromptIDs(t *testing.T) {
	const model = "tiny-qwen2-q4_0.gguf"
	s := newLoaded(t, Config{Slots: 1}, model, engine.Options{Ctx: 256, KV: kv.Q4})
	path := modelPath(t, model)
	req := Request{Messages: []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello there"}}, Params: greedy(2)}
	own, err := s.Tokenize(req)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info()
	if info.Template != "chatml" { // the fixture has none of its own
		t.Fatalf("the fixture's template is %q, want the built-in chatml", info.Template)
	}

	custom, err := chat.ParseCustom("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}[assistant]")
	if err != nil {
		t.Fatal(err)
	}
	if !s.SetTemplate(path, custom) {
		t.Fatal("SetTemplate says the loaded file is not loaded")
	}
	got, err := s.Tokenize(req)
	if err != nil {
		t.Fatal(err)
	}
	l := s.current()
	want := l.m.Tok.Encode("[system] Be brief.\n[user] Hello there\n[assistant]", true, false)
	if !slices.Equal(got, want) {
		t.Fatalf("custom template: ids %v, want %v", got, want)
	}
	if info, _ := s.Info(); info.Template != chat.CustomName {
		t.Fatalf("Info names template %q, want custom", info.Template)
	}
	// A submitted request runs with it, and LastPrompt shows its ids.
	ch, err := s.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	collect(t, ch)
	if last := s.LastPrompt(); !slices.Equal(last, want) {
		t.Fatalf("LastPrompt %v, want %v", last, want)
	}

	s.SetTemplate(path, chat.None())
	got, _ = s.Tokenize(req)
	if want := l.m.Tok.Encode("Be brief.\n\nHello there", true, false); !slices.Equal(got, want) {
		t.Fatalf("none: ids %v, want %v", got, want)
	}

	// The choice outlives an unload; clearing it gives the file's own back.
	if err := s.Unload(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(path, engine.Options{Ctx: 256, KV: kv.Q4}); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Info(); info.Template != chat.NoneName {
		t.Fatalf("after a reload Info names template %q, want none", info.Template)
	}
	s.SetTemplate(path, nil)
	if info, _ := s.Info(); info.Template != "chatml" {
		t.Fatalf("cleared: Info names template %q", info.Template)
	}
	if got, _ = s.Tokenize(req); !slices.Equal(got, own) {
		t.Fatalf("cleared: ids %v, want the file's own %v", got, own)
	}
	if s.SetTemplate("/elsewhere/other.gguf", chat.None()) {
		t.Fatal("SetTemplate of another file says it is loaded")
	}
	if got, _ = s.Tokenize(req); !slices.Equal(got, own) {
		t.Fatal("a template for another file changed the loaded one's prompt")
	}
}

// Changing the template while requests are tokenized and the model's info
// is read is safe (go test -race).
func TestSetTemplateWhileInUse(t *testing.T) {
	const model = "tiny-qwen2-q4_0.gguf"
	s := newLoaded(t, Config{Slots: 1}, model, engine.Options{Ctx: 256, KV: kv.Q4})
	path := modelPath(t, model)
	req := Request{Messages: []chat.Message{{Role: "user", Content: "Hello"}}, Params: greedy(1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if i%2 == 0 {
				s.SetTemplate(path, chat.None())
			} else {
				s.SetTemplate(path, nil)
			}
		}
	}()
	for range 50 {
		if _, err := s.Tokenize(req); err != nil {
			t.Fatal(err)
		}
		if info, _ := s.Info(); info.Template != "chatml" && info.Template != chat.NoneName {
			t.Fatalf("template %q", info.Template)
		}
	}
	<-done
	ask(t, s, req)
}
