package retrieve

import (
	"strings"
	"testing"
	"unicode/utf8"

	"nibble/app/documents"
	"nibble/app/documents/internal/doctest"
)

// FuzzChunk chunks and plans arbitrary text: chunks are valid ranges on
// character boundaries within their token bound, cover every non-space
// byte, and a plan never goes over its context.
func FuzzChunk(f *testing.F) {
	f.Add("# Title\n\nSome text.\n\n## Part\n\nMore text here.", uint16(8), uint16(2), byte(1), "text?")
	f.Add(strings.Repeat("word ", 500), uint16(16), uint16(4), byte(0), "word")
	f.Add("日本語のテキスト。"+strings.Repeat("東京", 100), uint16(5), uint16(0), byte(2), "東京")
	f.Add("noSpacesAtAllInThisVeryLongWordThatGoesOnAndOn", uint16(1), uint16(0), byte(0), "")
	f.Fuzz(func(t *testing.T, text string, target, overlap uint16, kind byte, question string) {
		kinds := []documents.Kind{documents.KindText, documents.KindMarkdown, documents.KindCode, documents.KindHTML, documents.KindDOCX}
		doc := documents.NewDocument("fuzz", kinds[int(kind)%len(kinds)], text)
		count := TokenCounter(countBytes4)
		if kind&0x80 != 0 {
			count = countWords
		}
		tgt := int(target%512) + 1
		ov := int(overlap) % tgt
		chunks, err := ChunkDocument(doc, count, tgt, ov)
		if err != nil {
			t.Fatal(err)
		}
		covered := 0
		for i, c := range chunks {
			if c.Index != i || c.Start < 0 || c.End > len(doc.Text) || c.Start >= c.End {
				t.Fatalf("chunk %d: %+v of %d bytes", i, c, len(doc.Text))
			}
			s := doc.Text[c.Start:c.End]
			if !utf8.ValidString(s) {
				t.Fatalf("chunk %d cuts a character: %q", i, s)
			}
			if n := count(s); n > tgt+ov+2 && utf8.RuneCountInString(s) > 1 {
				t.Errorf("chunk %d: %d tokens, target %d overlap %d: %q", i, n, tgt, ov, s)
			}
			if c.Start > covered && strings.TrimSpace(doc.Text[covered:c.Start]) != "" {
				t.Fatalf("bytes %d..%d in no chunk: %q", covered, c.Start, doc.Text[covered:c.Start])
			}
			if c.End > covered {
				covered = c.End
			}
		}
		if strings.TrimSpace(doc.Text[covered:]) != "" {
			t.Fatalf("tail %q in no chunk", doc.Text[covered:])
		}
		ctx := 300 + int(target)%4000
		plan, err := PlanContext(PlanRequest{Documents: []*documents.Document{doc}, Question: question, Count: count, ContextTokens: ctx, ReserveTokens: 50, OverheadTokens: 10})
		if err != nil {
			return // e.g. a question too long for the context: an error, fine
		}
		if plan.PromptTokens+plan.ReserveTokens > plan.ContextTokens {
			t.Errorf("prompt of %d tokens + %d reserved > context %d", plan.PromptTokens, plan.ReserveTokens, plan.ContextTokens)
		}
		if !utf8.ValidString(plan.Messages.System) {
			t.Error("system message is not UTF-8")
		}
	})
}

// TestWriteFuzzSeeds writes seeds into testdata/fuzz when
// NIBBLE_WRITE_FUZZ_SEEDS=1, in the format go test -fuzz reads.
func TestWriteFuzzSeeds(t *testing.T) {
	doctest.SkipUnlessWritingSeeds(t)
	doctest.WriteFuzzSeed(t, "FuzzChunk", 0, "# A\n\npara one\n\n## B\n\n```\n# c\n```\npara two", uint16(6), uint16(1), byte(1), "para")
	doctest.WriteFuzzSeed(t, "FuzzChunk", 1, "line\n"+strings.Repeat("x", 300)+"\n\u00e9\u00e9\u00e9", uint16(3), uint16(0), byte(0x80), "")
}
