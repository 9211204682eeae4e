package eval

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/kv"
	"nibble/engine/sample"
	"nibble/internal/testdata"
)

// trainedModel loads the small trained document-Q&A model, or skips.
func trainedModel(t *testing.T) (*engine.Model, string) {
	t.Helper()
	dir := filepath.Join(testdata.Dir(t), "trained")
	path := filepath.Join(dir, "nibble-docqa-29m-f16.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("skipping: the trained model is not at %s", path)
	}
	b := cpu.New(0)
	t.Cleanup(func() { b.Close() })
	m, err := engine.LoadModel(path, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, dir
}

func newSession(t *testing.T, m *engine.Model, o engine.Options) *engine.Session {
	t.Helper()
	s, err := engine.NewSession(m, m.Backend, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// filler is the start of the held-out generated prose, cut at a sentence.
func filler(t *testing.T, dir string, n int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "heldout_generated.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b[:n])
	return text[:strings.LastIndex(text, ".")+1]
}

// needleCase plants fact in a short document and asks for name's code.
func needleCase(doc, fact, name, answer string) NeedleCase {
	half := strings.Index(doc[len(doc)/2:], ". ") + len(doc)/2 + 2
	prompt := "Document:\n" + doc[:half] + fact + " " + doc[half:] + "\nQuestion: What is the access code for " + name + "?\nAnswer:"
	return NeedleCase{Prompt: prompt, Answer: answer, Ctx: 512, Depth: 0.5}
}

// Two planted facts are found; a case file whose answer is not in the
// document counts as a miss, with a negative margin; the shortcut greedy
// decoding takes gives what plain greedy generation gives.
func TestNeedleTrained(t *testing.T) {
	m, dir := trainedModel(t)
	doc := filler(t, dir, 1200)
	cases := []NeedleCase{
		needleCase(doc, "The access code for Camila Mack is 6265-96.", "Camila Mack", "6265-96"),
		needleCase(doc, "The access code for Ada Zeller is 1394-91.", "Ada Zeller", "1394-91"),
		needleCase(doc, "The access code for Camila Mack is 6265-96.", "Camila Mack", "1111-11"),
	}
	s := newSession(t, m, engine.Options{Ctx: 512, KV: kv.F16})
	var results []NeedleResult
	for i, c := range cases {
		c.Line = i + 1
		toks, err := TokenizeNeedle(m.Tok, c)
		if err != nil {
			t.Fatal(err)
		}
		var pieces strings.Builder
		for _, id := range toks.Answer {
			pieces.Write(m.Tok.Piece(id))
		}
		if pieces.String() != " "+c.Answer {
			t.Fatalf("answer tokens spell %q", pieces.String())
		}
		r, err := RunNeedle(context.Background(), s, c, toks)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("case %d: %q correct %v rank %d margin %.3f (token %d) margins %v", i+1, r.Output, r.Correct, r.Rank, r.Margin, r.MarginToken, r.TokenMargins)
		if len(r.TokenRanks) != len(toks.Answer) || len(r.TokenMargins) != len(toks.Answer) {
			t.Fatalf("case %d: %d ranks, %d margins for %d answer tokens", i+1, len(r.TokenRanks), len(r.TokenMargins), len(toks.Answer))
		}
		for j, mg := range r.TokenMargins {
			if mg < r.Margin || r.TokenRanks[j] > r.Rank || (mg > 0) != (r.TokenRanks[j] == 1) {
				t.Errorf("case %d token %d: margin %g rank %d against the case's %g, %d", i+1, j, mg, r.TokenRanks[j], r.Margin, r.Rank)
			}
		}
		if r.TokenMargins[r.MarginToken] != r.Margin {
			t.Errorf("case %d: margin token %d has margin %g, not %g", i+1, r.MarginToken, r.TokenMargins[r.MarginToken], r.Margin)
		}
		// Plain greedy generation from an empty cache gives the same line.
		s.Reset()
		st, err := s.Generate(context.Background(), toks.Prompt, engine.GenParams{MaxTokens: MaxAnswerTokens, Sample: sample.Params{Temperature: 0}, Stop: []string{"\n"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.Text != r.Output {
			t.Errorf("case %d: RunNeedle's greedy line %q, plain greedy %q", i+1, r.Output, st.Text)
		}
		results = append(results, r)
	}
	for i, want := range []bool{true, true, false} {
		if results[i].Correct != want {
			t.Errorf("case %d: correct %v, want %v (output %q)", i+1, results[i].Correct, want, results[i].Output)
		}
	}
	if r := results[0]; r.Rank != 1 || r.Margin <= 0 {
		t.Errorf("a found fact: rank %d margin %g, want 1 and positive", r.Rank, r.Margin)
	}
	if r := results[2]; r.Rank < 2 || r.Margin >= 0 || strings.TrimSpace(r.Output) != "6265-96" {
		t.Errorf("an answer not in the document: rank %d margin %g output %q; want rank > 1, a negative margin, the planted code", r.Rank, r.Margin, r.Output)
	}
	if sum := SummarizeNeedle(results); sum.Overall.Correct != 2 || sum.Overall.Total != 3 || len(sum.Cells) != 1 {
		t.Errorf("summary %+v", sum)
	}
}

// ScoreChunk scores exactly positions first…len−2, across batch
// boundaries, with the logits a single full-chunk batch gives.
func TestScoreChunkTrained(t *testing.T) {
	m, dir := trainedModel(t)
	tokens := m.Tok.Encode(filler(t, dir, 2000), true, false)
	const n = 64
	if len(tokens) < 2*n {
		t.Fatalf("only %d tokens", len(tokens))
	}
	plan, err := PlanChunks(len(tokens), n)
	if err != nil {
		t.Fatal(err)
	}
	chunk := plan.Chunk(tokens, 1, m.Tok.BOS(), m.Tok.AddBOS())
	collect := func(batch int) map[int][]float32 {
		s := newSession(t, m, engine.Options{Ctx: n, Batch: batch, KV: kv.F16})
		got := map[int][]float32{}
		var order []int
		err := ScoreChunk(context.Background(), s, chunk, plan.First, func(p int, l []float32) {
			got[p] = append([]float32(nil), l...)
			order = append(order, p)
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(order) != plan.ScoredPerChunk || order[0] != 32 || order[len(order)-1] != 62 {
			t.Fatalf("batch %d: scored positions %v, want 32…62 (%d)", batch, order, plan.ScoredPerChunk)
		}
		for i := 1; i < len(order); i++ {
			if order[i] != order[i-1]+1 {
				t.Fatalf("batch %d: positions out of order: %v", batch, order)
			}
		}
		return got
	}
	whole, split := collect(n), collect(10)
	for p, l := range whole {
		diff := 0.0
		for j := range l {
			diff = max(diff, math.Abs(float64(l[j]-split[p][j])))
		}
		if diff > 0.05 {
			t.Errorf("position %d: logits differ by %g between batch 64 and batch 10", p, diff)
		}
	}
}

// Scored-token counts follow the plan; f16 against its own argmaxes agrees
// fully and reproduces its perplexity; q4 is measured against f16.
func TestRunPerplexityTrained(t *testing.T) {
	m, dir := trainedModel(t)
	tokens := m.Tok.Encode(filler(t, dir, 3000), true, false)
	plan, err := PlanChunks(len(tokens), 64)
	if err != nil {
		t.Fatal(err)
	}
	plan.Chunks = 3
	ctx := context.Background()
	f16 := newSession(t, m, engine.Options{Ctx: 64, KV: kv.F16})
	chunksDone := 0
	ref, argmax, err := RunPerplexity(ctx, f16, "f16", tokens, plan, nil, func(done int) { chunksDone = done })
	if err != nil {
		t.Fatal(err)
	}
	if ref.Scored != 3*31 || len(argmax) != 3*31 || chunksDone != 3 || ref.Top1Agreement != nil {
		t.Fatalf("f16: %+v, %d argmaxes, %d chunks reported; want 93 scored tokens over 3 chunks", ref, len(argmax), chunksDone)
	}
	if !(ref.Perplexity > 1 && ref.Perplexity < 1000) || ref.StdErr <= 0 || math.Abs(math.Log(ref.Perplexity)-ref.MeanNLL) > 1e-9 {
		t.Errorf("f16: %+v", ref)
	}
	again, _, err := RunPerplexity(ctx, f16, "f16", tokens, plan, argmax, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *again.Top1Agreement != 1 || again.Perplexity != ref.Perplexity {
		t.Errorf("f16 again: %+v, want full agreement and perplexity %g", again, ref.Perplexity)
	}
	// In batches of 16 the scored rows read the quantized cache (a single
	// batch would attend in float over its own rows only).
	q4 := newSession(t, m, engine.Options{Ctx: 64, Batch: 16, KV: kv.Q4})
	res, _, err := RunPerplexity(ctx, q4, "q4", tokens, plan, argmax, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("f16 %.4f ± %.4f, q4 %.4f, top-1 vs f16 %.3f", ref.Perplexity, ref.StdErr, res.Perplexity, *res.Top1Agreement)
	if res.Scored != ref.Scored || *res.Top1Agreement < 0.5 || res.Perplexity == ref.Perplexity || math.Abs(res.Perplexity/ref.Perplexity-1) > 0.2 {
		t.Errorf("q4: %+v", res)
	}
	if _, _, err := RunPerplexity(ctx, q4, "q4", tokens, plan, argmax[:5], nil); err == nil {
		t.Error("a reference of the wrong length accepted")
	}
}
