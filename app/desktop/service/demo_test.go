package service

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nibble/app/settings"
	"nibble/engine/scheduler"
	"nibble/internal/testdata"
)

// The bundled document Q&A demo: asked about its sample document through
// the app's document path, the prompt's token ids are exactly those of the
// format the model was trained on ("Document:\n…\nQuestion: …\nAnswer:"),
// for a follow-up too, and the model answers with the planted fact, the
// newline ending its turn.
func TestDemoModelGetsItsTrainingFormat(t *testing.T) {
	root := testdata.RepoRoot(t)
	model := filepath.Join(root, "app", "desktop", "demo", "nibble-docqa-demo.gguf")
	doc, err := os.ReadFile(filepath.Join(root, "app", "desktop", "demo", "sample-document.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s, rec := newService(t)
	pinBudget(s, 8<<30)
	if err := s.store.Update(func(c *settings.Settings) error {
		c.Sampling.Temperature = 0
		c.SystemPrompt = "Answer briefly." // not part of the training format: the template leaves it out
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadModel(LoadRequest{Path: model, Ctx: 2048, KV: "q8"}); err != nil {
		t.Fatal(err)
	}
	info := attach(t, s, "sample-document.txt", string(doc))
	if !info.Whole {
		t.Fatalf("the sample document does not fit whole: %+v", info)
	}
	sched := s.loader.engine()
	// idsOf is the token ids the chat would send for req.
	idsOf := func(req SendRequest) []int32 {
		t.Helper()
		withDocs, _, err := s.docs.withDocuments(req)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.chat.request(withDocs)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := sched.Tokenize(r)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	plain := func(text string) []int32 {
		t.Helper()
		ids, err := sched.Tokenize(scheduler.Request{Prompt: text})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	training := "Document:\n" + strings.TrimSpace(string(doc)) + "\nQuestion: What is the access code for Camila Mack?\nAnswer:"
	q1 := []Message{{Role: "user", Content: "What is the access code for Camila Mack?"}}
	if got, want := idsOf(SendRequest{Messages: q1, Documents: []string{info.ID}}), plain(training); !slices.Equal(got, want) {
		t.Fatalf("the app's prompt is %d tokens, the training format %d; they differ from token %d",
			len(got), len(want), firstDifference(got, want))
	}

	res, err := s.Send(SendRequest{Messages: q1, Documents: []string{info.ID}})
	if err != nil {
		t.Fatal(err)
	}
	f := rec.final(t)
	if f.Error != "" || strings.TrimSpace(f.Text) != "6265-96" || f.FinishReason != "stop" {
		t.Fatalf("answer %q (%s, %s), want 6265-96 ended by the newline", f.Text, f.FinishReason, f.Error)
	}
	if len(res.Sources) != 1 || res.Sources[0].Document != "sample-document.txt" || !res.Sources[0].Whole {
		t.Fatalf("sources %+v, want the whole sample document", res.Sources)
	}

	// A follow-up: the earlier turn becomes a Question/Answer pair, as in
	// the training documents that held several questions.
	q2 := append(q1, Message{Role: "assistant", Content: f.Text},
		Message{Role: "user", Content: "What is the phone extension for Simon Holland?"})
	follow := training + " 6265-96\nQuestion: What is the phone extension for Simon Holland?\nAnswer:"
	if got, want := idsOf(SendRequest{Messages: q2, Documents: []string{info.ID}}), plain(follow); !slices.Equal(got, want) {
		t.Fatalf("the follow-up's prompt is %d tokens, the training format %d; they differ from token %d",
			len(got), len(want), firstDifference(got, want))
	}
	if _, err := s.Send(SendRequest{Messages: q2, Documents: []string{info.ID}}); err != nil {
		t.Fatal(err)
	}
	if f := rec.final(t); strings.TrimSpace(f.Text) != "4900" {
		t.Fatalf("follow-up answer %q (%s), want 4900", f.Text, f.Error)
	}
}

func firstDifference(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
