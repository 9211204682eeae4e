package service

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/app/settings"
	"nibble/internal/testdata"
)

// attach attaches text as a document called name and waits until it is
// read; it returns the document as Documents describes it.
func attach(t *testing.T, s *Service, name, text string) DocumentInfo {
	t.Helper()
	info, err := s.AttachDocumentData(name, base64.StdEncoding.EncodeToString([]byte(text)))
	if err != nil {
		t.Fatal(err)
	}
	return waitRead(t, s, info.ID)
}

// waitRead waits until document id is read (or failed to be).
func waitRead(t *testing.T, s *Service, id string) DocumentInfo {
	t.Helper()
	var got DocumentInfo
	waitFor(t, "document "+id+" to be read", func() bool {
		l, err := s.Documents([]string{id})
		if err != nil {
			t.Fatal(err)
		}
		got = l[0]
		return got.State != DocReading
	})
	return got
}

// filler is n lines of varied prose without the words of the questions.
func filler(n, from int) []string {
	subjects := []string{"The river", "A quiet street", "The old mill", "Our garden", "The harbour", "A long train"}
	verbs := []string{"wound past", "looked over", "stood beside", "ran along", "faced", "circled"}
	objects := []string{"the meadow", "a row of houses", "the chapel", "the northern hills", "a painted fence", "the market square"}
	lines := make([]string, n)
	for i := range lines {
		k := from + i
		lines[i] = fmt.Sprintf("%s %s %s in the year %d, and nobody minded.", subjects[k%6], verbs[(k/6)%6], objects[(k/36)%6], 1700+k%300)
	}
	return lines
}

func TestDocumentThatFitsIsReusedByTheFollowUp(t *testing.T) {
	s, rec := newService(t) // a 1024-token context
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(filler(24, 0), "\n") + "\n"
	info := attach(t, s, "notes.txt", doc)
	if info.State != DocReady || info.Kind != "text" || info.Lines != 24 || info.Tokens <= 100 {
		t.Fatalf("attached %+v", info)
	}
	if !info.Whole || !strings.HasPrefix(info.Fit, "fits whole in 1K context with ") {
		t.Fatalf("fit %q (whole %v), want it to fit whole in 1K", info.Fit, info.Whole)
	}
	// The chip names the KV cache as the header does.
	if label := s.Status().Model.KVLabel; label == "" || !strings.HasSuffix(info.Fit, " with "+label) {
		t.Fatalf("fit %q, want it to end with the header's %q", info.Fit, label)
	}

	ids := []string{info.ID}
	q1 := Message{Role: "user", Content: "Which year does the chapel appear in?"}
	r1, err := s.Send(SendRequest{Messages: []Message{q1}, MaxTokens: 6, Documents: ids})
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Documents) != 1 || !r1.Documents[0].Whole || len(r1.Sources) != 1 ||
		r1.Sources[0].Label != "whole document, lines 1–24" || r1.Sources[0].Document != "notes.txt" {
		t.Fatalf("first question: documents %+v, sources %+v", r1.Documents, r1.Sources)
	}
	f1 := rec.final(t)
	if f1.Error != "" || f1.PromptTokens < info.Tokens {
		t.Fatalf("first answer %+v: want no error and the %d document tokens in the prompt", f1, info.Tokens)
	}

	q2 := Message{Role: "user", Content: "And the harbour?"}
	msgs := []Message{q1, {Role: "assistant", Content: f1.Text}, q2}
	r2, err := s.Send(SendRequest{ConversationID: r1.ConversationID, Messages: msgs, MaxTokens: 6, Documents: ids})
	if err != nil {
		t.Fatal(err)
	}
	f2 := rec.final(t)
	if f2.Error != "" {
		t.Fatal(f2.Error)
	}
	// The follow-up computes only its own tokens: the prompt less what the
	// cache held, which covers the whole document and the first turn.
	if f2.PrefillTokens != f2.PromptTokens-f2.ReusedTokens {
		t.Fatalf("follow-up prefilled %d tokens; prompt %d, reused %d", f2.PrefillTokens, f2.PromptTokens, f2.ReusedTokens)
	}
	if f2.ReusedTokens < f1.PromptTokens {
		t.Fatalf("follow-up reused %d tokens, less than the first prompt's %d (document %d tokens)", f2.ReusedTokens, f1.PromptTokens, info.Tokens)
	}
	count, _, err := s.docs.tokenCounter()
	if err != nil {
		t.Fatal(err)
	}
	// Its own tokens: the first answer again (its end-of-turn was never in
	// the cache), the question, and the template's markers around them.
	own := count(f1.Text) + count(q2.Content) + 16
	if f2.PrefillTokens > own {
		t.Fatalf("follow-up prefilled %d tokens, want at most %d (answer, question, markers)", f2.PrefillTokens, own)
	}
	if len(r2.Sources) != 1 || !r2.Documents[0].Whole {
		t.Fatalf("follow-up sources %+v", r2.Sources)
	}
	// The history keeps each answer's sources, and the questions as asked.
	conv, err := s.Conversation(r1.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(conv.Messages) != 4 || conv.Messages[0].Content != q1.Content || conv.Messages[1].Sources == nil ||
		conv.Messages[1].Sources[0].Label != "whole document, lines 1–24" || conv.Messages[1].Sources[0].Document != "notes.txt" ||
		len(conv.Messages[3].Sources) != 1 || conv.Messages[0].Sources != nil {
		t.Fatalf("kept conversation %+v", conv.Messages)
	}
}

// plantedDocument is lines of filler with a fact and two distractors
// planted; it returns the text and the fact's 1-based line.
func plantedDocument(lines int) (string, int) {
	l := filler(lines, 0)
	factLine := lines * 3 / 5
	l[lines/5] = "The access code for Camilo Mackey is 6281-14."
	l[factLine-1] = "The access code for Camila Mack is 6265-96."
	l[lines*4/5] = "The door code for Carla Mack is 6265-31."
	return strings.Join(l, "\n") + "\n", factLine
}

func TestDocumentTooLargeAnswersFromThePartWithTheFact(t *testing.T) {
	s, rec := newService(t) // a 1024-token context
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	text, factLine := plantedDocument(400)
	info := attach(t, s, "records.md", text)
	if info.State != DocReady || info.Whole || info.Fit != "too large: answering from the most relevant parts" {
		t.Fatalf("attached %+v, want it too large for 1K", info)
	}
	res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "What is the access code for Camila Mack?"}},
		MaxTokens: 4, Documents: []string{info.ID}})
	if err != nil {
		t.Fatal(err)
	}
	f := rec.final(t)
	if f.Error != "" || f.PromptTokens+4 > 1024 {
		t.Fatalf("answer %+v", f)
	}
	use := res.Documents[0]
	if use.Whole || use.Used == 0 || use.Used >= use.Sections || !strings.HasPrefix(use.Status, "too large: answering from the most relevant parts (") {
		t.Fatalf("document use %+v", use)
	}
	found := false
	for _, src := range res.Sources {
		if src.Whole || src.FirstLine == 0 || !strings.HasPrefix(src.Label, "line") {
			t.Errorf("source %+v", src)
		}
		if src.FirstLine <= factLine && factLine <= src.LastLine {
			found = true
		}
	}
	if !found {
		t.Fatalf("no source holds line %d with the fact: %+v", factLine, res.Sources)
	}
}

// TestTrainedModelAnswersFromRetrievedParts asks the small trained model
// (which answers by copying a planted fact) about a document four times
// its context: the chosen parts must hold the fact, among distractors
// whose words and digits are close, counted with a real tokenizer.
func TestTrainedModelAnswersFromRetrievedParts(t *testing.T) {
	path := filepath.Join(testdata.Dir(t), "trained", "nibble-docqa-29m-f16.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("skipping: the trained model is not there (%v)", err)
	}
	s, rec := newService(t)
	pinBudget(s, 8<<30)
	if err := s.store.Update(func(c *settings.Settings) error { c.Sampling.Temperature = 0; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadModel(LoadRequest{Path: path, Ctx: 1024, KV: "q4"}); err != nil {
		t.Fatal(err)
	}
	text, factLine := plantedDocument(300)
	info := attach(t, s, "codes.txt", text)
	if info.Whole || info.Tokens < 4096 {
		t.Fatalf("attached %+v, want over 4K tokens, too large for 1K", info)
	}
	res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "What is the access code for Camila Mack?"}},
		MaxTokens: 8, Documents: []string{info.ID}})
	if err != nil {
		t.Fatal(err)
	}
	f := rec.final(t)
	if f.Error != "" {
		t.Fatal(f.Error)
	}
	found := false
	for _, src := range res.Sources {
		found = found || (src.FirstLine <= factLine && factLine <= src.LastLine)
	}
	if !found {
		t.Fatalf("no source holds line %d with the fact: %+v", factLine, res.Sources)
	}
	// The model is no chat model, so its answer in the app's prompt is
	// logged, not judged. In the prompt it was trained on, the chosen
	// parts alone must give it the answer.
	t.Logf("sources %+v; answer in the app's prompt %q", res.Sources, f.Text)
	lines := strings.Split(text, "\n")
	var b strings.Builder
	b.WriteString("Document:\n")
	for _, src := range res.Sources {
		b.WriteString(strings.Join(lines[src.FirstLine-1:src.LastLine], "\n") + "\n")
	}
	b.WriteString("Question: What is the access code for Camila Mack?\nAnswer:")
	if _, err := s.Send(SendRequest{Prompt: b.String(), MaxTokens: 12}); err != nil {
		t.Fatal(err)
	}
	if got := rec.final(t); !strings.HasPrefix(strings.TrimSpace(got.Text), "6265-96") {
		t.Fatalf("from the chosen parts the model answered %q, want 6265-96", got.Text)
	}
}

func TestDocumentErrorsAreClear(t *testing.T) {
	s, _ := newService(t)
	// No model yet: the documents are read, and say a model decides the fit.
	ok := attach(t, s, "a.txt", "short text\n")
	if ok.State != DocReady || ok.Fit != "load a model to see whether it fits" || ok.Tokens != 0 {
		t.Fatalf("without a model: %+v", ok)
	}
	png := attach(t, s, "photo.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	if png.State != DocError || !strings.Contains(png.Error, "not a text document") || !strings.Contains(png.Error, "photo.png") {
		t.Fatalf("png: %+v", png)
	}
	if err := s.store.Update(func(c *settings.Settings) error { c.DocumentMaxBytes = 1 << 20; return nil }); err != nil {
		t.Fatal(err)
	}
	big := attach(t, s, "big.txt", strings.Repeat("x", 2<<20))
	if big.State != DocError || !strings.Contains(big.Error, "over the 1 MiB limit for documents") {
		t.Fatalf("too large: %+v", big)
	}
	dir := t.TempDir()
	bigFile := filepath.Join(dir, "big.md")
	writeFile(t, bigFile, []byte(strings.Repeat("y\n", 1<<20)))
	fromPath, err := s.AttachDocumentFile(bigFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := waitRead(t, s, fromPath.ID); got.State != DocError || !strings.Contains(got.Error, "big.md: the file is 2 MiB, over the 1 MiB limit") {
		t.Fatalf("too large from a path: %+v", got)
	}
	missing, err := s.AttachDocumentFile(filepath.Join(dir, "gone.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := waitRead(t, s, missing.ID); got.State != DocError || !strings.Contains(got.Error, "gone.txt") {
		t.Fatalf("missing file: %+v", got)
	}
	if _, err := s.AttachDocumentFile("relative.txt"); err == nil {
		t.Fatal("a relative path was accepted")
	}
	bad, err := s.AttachDocumentData("x.txt", "not base64!")
	if err != nil {
		t.Fatal(err)
	}
	if got := waitRead(t, s, bad.ID); got.State != DocError || !strings.Contains(got.Error, "base64") {
		t.Fatalf("bad base64: %+v", got)
	}

	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	q := []Message{{Role: "user", Content: "What does it say?"}}
	if _, err := s.Send(SendRequest{Messages: q, Documents: []string{png.ID}}); err == nil || !strings.Contains(err.Error(), "could not be read") {
		t.Fatalf("Send with a failed document: %v", err)
	}
	s.RemoveDocument(ok.ID)
	if _, err := s.Send(SendRequest{Messages: q, Documents: []string{ok.ID}}); err == nil || !strings.Contains(err.Error(), "not attached") {
		t.Fatalf("Send with a removed document: %v", err)
	}
	if _, err := s.Documents([]string{ok.ID}); err == nil {
		t.Fatal("Documents of a removed document succeeded")
	}
}

func TestSeveralDocumentsAtOnce(t *testing.T) {
	s, rec := newService(t) // a 1024-token context
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	small := attach(t, s, "todo.txt", "Buy milk.\nCall the plumber.\nWater the ferns.\n")
	text, factLine := plantedDocument(400)
	big := attach(t, s, "records.txt", text)
	ids := []string{small.ID, big.ID}
	l, err := s.Documents(ids)
	if err != nil {
		t.Fatal(err)
	}
	if !l[0].Whole || l[1].Whole || !strings.HasPrefix(l[0].Fit, "fits whole") || !strings.HasPrefix(l[1].Fit, "too large") {
		t.Fatalf("together: %+v / %+v", l[0], l[1])
	}
	res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "What is the access code for Camila Mack?"}},
		MaxTokens: 4, Documents: ids})
	if err != nil {
		t.Fatal(err)
	}
	if f := rec.final(t); f.Error != "" {
		t.Fatal(f.Error)
	}
	if len(res.Documents) != 2 || !res.Documents[0].Whole || res.Documents[1].Whole || res.Documents[0].DocumentID != small.ID {
		t.Fatalf("document uses %+v", res.Documents)
	}
	wholeSmall, fact := false, false
	for _, src := range res.Sources {
		switch src.DocumentID {
		case small.ID:
			wholeSmall = src.Whole && src.Label == "whole document, lines 1–3"
		case big.ID:
			fact = fact || (src.FirstLine <= factLine && factLine <= src.LastLine)
		}
	}
	if !wholeSmall || !fact {
		t.Fatalf("sources %+v: want todo.txt whole and the part of records.txt with line %d", res.Sources, factLine)
	}
}

// A document removed while it is read (a new chat) is not counted to the
// end, and its text does not stay in the memo of token counts.
func TestDocumentRemovedWhileReadIsForgotten(t *testing.T) {
	s, _ := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(filler(30_000, 0), "\n") // about 2 MB: many pieces to count
	info, err := s.AttachDocumentData("long.txt", base64.StdEncoding.EncodeToString([]byte(text)))
	if err != nil {
		t.Fatal(err)
	}
	s.RemoveDocument(info.ID)
	s.docs.work.Wait()
	s.docs.countMu.Lock()
	defer s.docs.countMu.Unlock()
	for k := range s.docs.counts {
		if len(k) > countPiece {
			t.Fatalf("the memo of counts keeps %d bytes of text of a removed document", len(k))
		}
	}
}
