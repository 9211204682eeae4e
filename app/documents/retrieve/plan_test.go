package retrieve

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"nibble/app/documents"
	"nibble/app/documents/extract"
	"nibble/app/documents/internal/doctest"
)

// countBytes4 is a stand-in tokenizer: a token per 4 bytes.
func countBytes4(s string) int { return (len(s) + 3) / 4 }

// countWords counts words and punctuation, like a word-level tokenizer:
// counts do not add up exactly when texts are joined.
func countWords(s string) int {
	n := 0
	in := false
	for _, r := range s {
		switch {
		case r == ' ' || r == '\n' || r == '\t':
			in = false
		case r < 128 && (r < '0' || r > 'z'):
			n++
			in = false
		default:
			if !in {
				n++
			}
			in = true
		}
	}
	return n
}

func TestPlanWholeIsStable(t *testing.T) {
	doc := mustExtract(t, "guide.md", []byte("# Guide\n\nThe server listens on port 8080.\n\n## Backups\n\nBackups run nightly at 02:00.\n"))
	plan := func(q string) *Plan {
		p, err := PlanContext(PlanRequest{Documents: []*documents.Document{doc}, Question: q, Count: countBytes4, ContextTokens: 8192, ReserveTokens: 1024})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := plan("Which port does the server use?"), plan("When do backups run?")
	if !a.Whole || !a.Documents[0].Whole || a.Documents[0].Status != "fits whole in 8K context" {
		t.Fatalf("plan %+v", a.Documents)
	}
	if a.Messages.System != b.Messages.System {
		t.Error("the system message (documents) differs between questions: no prefix reuse")
	}
	if !strings.HasSuffix(a.Messages.User, "Which port does the server use?") || a.Messages.User == b.Messages.User {
		t.Errorf("user messages %q %q", a.Messages.User, b.Messages.User)
	}
	if !strings.Contains(a.Messages.System, doc.Text) {
		t.Error("the document is not in the prompt byte for byte")
	}
	if c := a.Citations[0]; c.Number != 1 || !c.Whole || c.Label != "whole document, lines 1–7" {
		t.Errorf("citation %+v", c)
	}
	if !strings.Contains(a.Messages.System, `<source id="1" document="guide.md" location="whole document, lines 1–7">`) {
		t.Errorf("system message:\n%s", a.Messages.System)
	}
	if a.PromptTokens+a.ReserveTokens > a.ContextTokens {
		t.Errorf("prompt %d tokens", a.PromptTokens)
	}
}

// TestPlanRetrievesPlantedFact: a fact buried in the middle of 2 MB of
// filler is among the passages chosen for a question about it.
func TestPlanRetrievesPlantedFact(t *testing.T) {
	filler := doctest.FillerText(2<<20, 7)
	mid := strings.Index(filler[len(filler)/2:], "\n\n") + len(filler)/2 + 2
	text := filler[:mid] + "The vault code is 7421. " + filler[mid:]
	doc := mustExtract(t, "archive.txt", []byte(text))
	factLine := doc.LineAt(strings.Index(doc.Text, "The vault code"))

	for _, counter := range []struct {
		name  string
		count TokenCounter
	}{{"bytes/4", countBytes4}, {"words", countWords}} {
		start := time.Now()
		plan, err := PlanContext(PlanRequest{
			Documents: []*documents.Document{doc}, Question: "What is the vault code?",
			Count: counter.count, ContextTokens: 8192, ReserveTokens: 1024,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: planned in %v", counter.name, time.Since(start))
		dp := plan.Documents[0]
		if plan.Whole || dp.Whole || dp.Used == 0 || dp.Used >= dp.Sections {
			t.Fatalf("%s: plan %+v", counter.name, dp)
		}
		if !strings.Contains(plan.Messages.System, "The vault code is 7421.") {
			t.Errorf("%s: the planted fact is not in the prompt", counter.name)
		}
		want := fmt.Sprintf("too large: answering from the most relevant parts (%d of %d sections)", dp.Used, dp.Sections)
		if dp.Status != want {
			t.Errorf("%s: status %q", counter.name, dp.Status)
		}
		found := false
		for _, c := range plan.Citations {
			if c.FirstLine <= factLine && factLine <= c.LastLine {
				found = true
				if !strings.HasPrefix(c.Label, "line") || !strings.Contains(plan.Messages.System, c.Label) {
					t.Errorf("%s: label %q", counter.name, c.Label)
				}
				// The first source is the best: the fact's passage comes
				// first in rank but sources are in document order.
			}
			if c.Start >= c.End || !utf8.ValidString(doc.Text[c.Start:c.End]) {
				t.Errorf("%s: bad range %+v", counter.name, c)
			}
		}
		if !found {
			t.Errorf("%s: no citation covers line %d: %+v", counter.name, factLine, plan.Citations)
		}
		if plan.PromptTokens+plan.ReserveTokens > plan.ContextTokens {
			t.Errorf("%s: prompt of %d tokens over the budget", counter.name, plan.PromptTokens)
		}
		if got := counter.count(plan.Messages.System) + counter.count(plan.Messages.User) + defaultOverhead; got != plan.PromptTokens {
			t.Errorf("%s: PromptTokens %d, recount %d", counter.name, plan.PromptTokens, got)
		}
		for i := 1; i < len(plan.Citations); i++ {
			if plan.Citations[i].Start < plan.Citations[i-1].End {
				t.Errorf("%s: sources overlap or are out of order: %+v %+v", counter.name, plan.Citations[i-1], plan.Citations[i])
			}
		}
	}
}

func TestPlanSeveralDocuments(t *testing.T) {
	small := mustExtract(t, "note.txt", []byte("Meeting moved to Thursday.\n"))
	big := mustExtract(t, "log.txt", []byte(doctest.FillerText(200<<10, 3)+"The deploy key rotates every 90 days.\n\n"+doctest.FillerText(200<<10, 4)))
	p, err := PlanContext(PlanRequest{
		Documents: []*documents.Document{small, big}, Question: "How often does the deploy key rotate?",
		Count: countBytes4, ContextTokens: 4096, ReserveTokens: 512,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Whole || !p.Documents[0].Whole || p.Documents[1].Whole {
		t.Fatalf("plan %+v", p.Documents)
	}
	if p.Documents[0].Status != "fits whole in 4K context" || !strings.HasPrefix(p.Documents[1].Status, "too large: answering from the most relevant parts (") {
		t.Errorf("statuses %q %q", p.Documents[0].Status, p.Documents[1].Status)
	}
	if !strings.Contains(p.Messages.System, "Meeting moved to Thursday.") || !strings.Contains(p.Messages.System, "rotates every 90 days") {
		t.Error("missing text")
	}
	if p.Citations[0].Name != "note.txt" || p.Citations[0].Number != 1 || p.Citations[1].Number != 2 {
		t.Errorf("citations %+v", p.Citations)
	}
	for _, dp := range p.Documents {
		if !strings.Contains(p.Messages.System, "- "+dp.Name+": "+dp.Status) {
			t.Errorf("status line of %s missing", dp.Name)
		}
	}
}

func TestPlanPDFCitesPages(t *testing.T) {
	var pages []string
	for i := 1; i <= 40; i++ {
		lines := []string{fmt.Sprintf("Chapter %d", i)}
		for j := 0; j < 30; j++ {
			lines = append(lines, fmt.Sprintf("Line %d of chapter %d talks about rivers and lanterns.", j, i))
		}
		if i == 17 {
			lines = append(lines, "The reactor coolant temperature limit is 315 degrees.")
		}
		pages = append(pages, doctest.TextPage(lines...))
	}
	p, root := doctest.SimplePDF(pages...)
	doc := mustExtract(t, "manual.pdf", p.Bytes(fmt.Sprintf("/Root %d 0 R", root)))
	plan, err := PlanContext(PlanRequest{Documents: []*documents.Document{doc}, Question: "What is the coolant temperature limit?", Count: countBytes4, ContextTokens: 2048, ReserveTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range plan.Citations {
		if c.FirstPage <= 17 && 17 <= c.LastPage {
			found = true
			if c.Label != "page 17" && !strings.HasPrefix(c.Label, "pages ") {
				t.Errorf("label %q", c.Label)
			}
		}
	}
	if !found || !strings.Contains(plan.Messages.System, "315 degrees") {
		t.Errorf("page 17 not cited: %+v", plan.Citations)
	}
}

func TestPlanNothingToSearch(t *testing.T) {
	doc := mustExtract(t, "book.txt", []byte(doctest.FillerText(100<<10, 5)))
	p, err := PlanContext(PlanRequest{Documents: []*documents.Document{doc}, Question: "Summarize it, please.", Count: countBytes4, ContextTokens: 4096, ReserveTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	dp := p.Documents[0]
	if dp.Used < 2 || !strings.Contains(dp.Status, "evenly spaced") {
		t.Fatalf("plan %+v", dp)
	}
	// Spread: the first and last sections are both in.
	lastLine := doc.LineAt(len(strings.TrimRight(doc.Text, "\n")) - 1)
	if p.Citations[0].FirstLine != 1 || p.Citations[len(p.Citations)-1].LastLine != lastLine {
		t.Errorf("citations %+v (of %d lines)", p.Citations, doc.Lines())
	}
}

func TestPlanErrors(t *testing.T) {
	doc := documents.NewDocument("a.txt", documents.KindText, "text")
	for name, req := range map[string]PlanRequest{
		"no counter":       {Documents: []*documents.Document{doc}, ContextTokens: 100},
		"no documents":     {Count: countBytes4, ContextTokens: 100},
		"nil document":     {Documents: []*documents.Document{nil}, Count: countBytes4, ContextTokens: 100},
		"no context":       {Documents: []*documents.Document{doc}, Count: countBytes4},
		"reserve too big":  {Documents: []*documents.Document{doc}, Count: countBytes4, ContextTokens: 100, ReserveTokens: 100},
		"question too big": {Documents: []*documents.Document{doc}, Count: countBytes4, ContextTokens: 600, ReserveTokens: 100, Question: strings.Repeat("why ", 1000)},
	} {
		if _, err := PlanContext(req); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestChunkDocument(t *testing.T) {
	md := "# Intro\n\nShort intro.\n\n## Install\n\n" + strings.Repeat("Run the installer and wait. ", 200) +
		"\n\n```\n# not a heading\ncode\n```\n\n" + strings.Repeat("More words about installing. ", 10) + "\n\n## Use\n\nOpen the app.\n"
	doc := documents.NewDocument("guide.md", documents.KindMarkdown, md)
	chunks, err := ChunkDocument(doc, countBytes4, 100, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 10 {
		t.Fatalf("%d chunks", len(chunks))
	}
	covered := 0
	for i, c := range chunks {
		if c.Index != i || c.Start < 0 || c.End > len(md) || c.Start >= c.End {
			t.Fatalf("chunk %d: %+v", i, c)
		}
		if c.Tokens > 100+10 {
			t.Errorf("chunk %d: %d tokens", i, c.Tokens)
		}
		if c.Start > covered && strings.TrimSpace(md[covered:c.Start]) != "" {
			t.Errorf("text %q not in any chunk", md[covered:c.Start])
		}
		if c.End > covered {
			covered = c.End
		}
	}
	if strings.TrimSpace(md[covered:]) != "" {
		t.Errorf("tail %q not in any chunk", md[covered:])
	}
	last := chunks[len(chunks)-1]
	if last.Heading != "Use" || !strings.HasPrefix(md[last.Start:], "## Use") {
		t.Errorf("last chunk %+v %q", last, md[last.Start:last.End])
	}
	for _, c := range chunks {
		if c.Heading == "not a heading" {
			t.Error("a comment in a code fence was taken for a heading")
		}
	}
	if _, err := ChunkDocument(doc, countBytes4, 10, 10); err == nil {
		t.Error("overlap >= target: no error")
	}
}

func TestSearchTermsAndBM25(t *testing.T) {
	got := strings.Join(searchTerms("What is the Vault's CODE? It's 7421, naïve 東京"), " ")
	if got != "vault code 7421 naïve 東 京" {
		t.Errorf("terms %q", got)
	}
	ix := newBM25([]string{
		"rivers and lanterns and rivers",
		"the vault code is kept in the vault",
		"a code of conduct",
	})
	s := ix.scores(searchTerms("vault code"))
	if !(s[1] > s[2] && s[2] > s[0] && s[0] == 0) {
		t.Errorf("scores %v", s)
	}
}

func TestContextLabel(t *testing.T) {
	for n, want := range map[int]string{8192: "8K", 131072: "128K", 4000: "4K", 1536: "1.5K", 900: "900"} {
		if got := contextLabel(n); got != want {
			t.Errorf("contextLabel(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestBuildPromptEscapes(t *testing.T) {
	doc := documents.NewDocument(`we"ird<name>.txt`, documents.KindText, "before </source> after")
	p, err := PlanContext(PlanRequest{Documents: []*documents.Document{doc}, Count: countBytes4, ContextTokens: 1000, ReserveTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(p.Messages.System, "</source>") != 1 || !strings.Contains(p.Messages.System, `document="we'ird‹name›.txt"`) {
		t.Errorf("system:\n%s", p.Messages.System)
	}
}

func mustExtract(t *testing.T, name string, data []byte) *documents.Document {
	t.Helper()
	doc, err := extract.Bytes(name, data, documents.Limits{})
	if err != nil {
		t.Fatalf("Extract(%s): %v", name, err)
	}
	return doc
}
