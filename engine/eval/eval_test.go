package eval

import (
	"math"
	"strings"
	"testing"

	"nibble/engine"
	"nibble/engine/kv"
	"nibble/engine/kvprobe"
)

func TestParseKVModes(t *testing.T) {
	modes, err := ParseKVModes("f16, Q8,q4,q4-rot,q8_0-rot,q4-plain,Q8-PLAIN")
	if err != nil {
		t.Fatal(err)
	}
	want := []KVMode{{"f16", kv.F16, kv.RotateAuto}, {"q8", kv.Q8, kv.RotateAuto}, {"q4", kv.Q4, kv.RotateAuto},
		{"q4-rot", kv.Q4, kv.RotateOn}, {"q8-rot", kv.Q8, kv.RotateOn}, {"q4-plain", kv.Q4, kv.RotateOff}, {"q8-plain", kv.Q8, kv.RotateOff}}
	if len(modes) != len(want) {
		t.Fatalf("got %v, want %v", modes, want)
	}
	for i := range want {
		if modes[i] != want[i] {
			t.Errorf("mode %d: got %+v, want %+v", i, modes[i], want[i])
		}
	}
	for i, rotated := range []bool{false, false, true, true, true, false, false} {
		if got := modes[i].Rotate.Rotates(modes[i].Type); got != rotated {
			t.Errorf("%s rotates: %v, want %v", modes[i].Name, got, rotated)
		}
	}
	o := modes[5].Apply(engine.Options{Ctx: 100, KV: kv.F16, KVRotate: kv.RotateOn})
	if o.KV != kv.Q4 || o.KVRotate != kv.RotateOff || o.Ctx != 100 {
		t.Errorf("q4-plain applied: %+v", o)
	}
	for _, bad := range []string{"", "f16,", "q3", "f16-rot", "f16-plain", "q4,q4_0", "q4-rot,Q4-ROT", "q4-rotated", "q4-plain-rot", "q4-rot-plain"} {
		if _, err := ParseKVModes(bad); err == nil {
			t.Errorf("ParseKVModes(%q) accepted", bad)
		}
	}
}

func TestParseEviction(t *testing.T) {
	for in, want := range map[string]Eviction{
		"h2o:1024":   {Policy: "h2o", Budget: 1024},
		"window:25%": {Policy: "window", Budget: 25, Percent: true},
		"H2O:1":      {Policy: "h2o", Budget: 1},
	} {
		got, err := ParseEviction(in)
		if err != nil || got != want {
			t.Errorf("ParseEviction(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if s := (Eviction{Policy: "window", Budget: 25, Percent: true}).String(); s != "window:25%" {
		t.Errorf("String: %q", s)
	}
	for _, bad := range []string{"h2o", "lru:100", "h2o:0", "h2o:-5", "window:100%", "window:0%", "h2o:1.5", "h2o:", "window:abc"} {
		if _, err := ParseEviction(bad); err == nil {
			t.Errorf("ParseEviction(%q) accepted", bad)
		}
	}
}

func TestRankMargin(t *testing.T) {
	logits := []float32{1, 5, 3, 5.5, -2}
	for _, c := range []struct {
		target int32
		rank   int
		margin float32
	}{
		{3, 1, 0.5},  // the best: beats 5 by 0.5
		{1, 2, -0.5}, // 5.5 beats it
		{2, 3, -2.5},
		{4, 5, -7.5},
	} {
		rank, margin := RankMargin(logits, c.target)
		if rank != c.rank || margin != c.margin {
			t.Errorf("target %d: rank %d margin %g, want %d %g", c.target, rank, margin, c.rank, c.margin)
		}
	}
	// A tie for the top: rank 1 (nothing is strictly larger), margin 0.
	if rank, margin := RankMargin([]float32{2, 2, 0}, 1); rank != 1 || margin != 0 {
		t.Errorf("tie: rank %d margin %g", rank, margin)
	}
}

// The chunking arithmetic of llama-perplexity, by hand: 5000 tokens at
// -c 1024 give ⌊5000/1024⌋ = 4 chunks; positions 512…1022 are scored, 511
// per chunk, 2044 in all.
func TestPlanChunks(t *testing.T) {
	p, err := PlanChunks(5000, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if p != (Chunking{Tokens: 5000, Ctx: 1024, Chunks: 4, First: 512, ScoredPerChunk: 511}) || p.Scored() != 2044 {
		t.Errorf("5000 tokens at 1024: %+v, scored %d", p, p.Scored())
	}
	// An odd chunk: first = ⌊1023/2⌋ = 511, positions 511…1021 scored.
	if p, _ := PlanChunks(4096, 1023); p.Chunks != 4 || p.First != 511 || p.ScoredPerChunk != 511 {
		t.Errorf("4096 tokens at 1023: %+v", p)
	}
	if p, err := PlanChunks(2048, 1024); err != nil || p.Chunks != 2 {
		t.Errorf("exactly two chunks: %+v, %v", p, err)
	}
	if _, err := PlanChunks(2047, 1024); err == nil || !strings.Contains(err.Error(), "2048") {
		t.Errorf("2047 tokens at 1024: %v, want an error asking for 2048", err)
	}
	if _, err := PlanChunks(100, 2); err == nil {
		t.Error("a chunk of 2 accepted")
	}
	tokens := []int32{1, 10, 11, 12, 13, 14, 15, 16, 17}
	p, _ = PlanChunks(len(tokens), 4)
	if c := p.Chunk(tokens, 1, 1, true); c[0] != 1 || c[1] != 14 || len(c) != 4 {
		t.Errorf("chunk 1 with BOS: %v, want [1 14 15 16]", c)
	}
	if c := p.Chunk(tokens, 1, 1, false); c[0] != 13 {
		t.Errorf("chunk 1 without BOS: %v, want [13 14 15 16]", c)
	}
	if tokens[4] != 13 {
		t.Error("Chunk modified the token stream")
	}
}

// llama-perplexity's figures by hand: NLLs 1, 2, 3 have mean 2, so
// PPL = e² = 7.389056; E[v²] − E[v]² = 14/3 − 4 = 2/3, and the ± is
// sqrt((2/3)/2)·e² = 4.266065.
func TestNLLPerplexity(t *testing.T) {
	var a NLL
	for _, v := range []float64{1, 2, 3} {
		a.Add(v)
	}
	ppl, se := a.Perplexity()
	if math.Abs(ppl-7.389056) > 1e-5 || math.Abs(se-4.266065) > 1e-5 {
		t.Errorf("ppl %g ± %g, want 7.389056 ± 4.266065", ppl, se)
	}
	if ppl, _ := (NLL{}).Perplexity(); !math.IsNaN(ppl) {
		t.Errorf("no tokens: %g, want NaN", ppl)
	}
}

func TestTokenNLL(t *testing.T) {
	logits := []float32{0.5, -1, 3, 2.25, 0}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v))
	}
	for target := range logits {
		want := math.Log(sum) - float64(logits[target])
		if got := TokenNLL(logits, int32(target)); math.Abs(got-want) > 1e-5 {
			t.Errorf("target %d: %g, want %g", target, got, want)
		}
	}
}

func TestSummarizeNeedle(t *testing.T) {
	res := []NeedleResult{
		{Ctx: 2048, Depth: 0.5, Correct: true, Margin: 3, Rank: 1},
		{Ctx: 1024, Depth: 0.9, Correct: false, Margin: -1.5, Rank: 2},
		{Ctx: 1024, Depth: 0.1, Correct: true, Margin: 2, Rank: 1},
		{Ctx: 1024, Depth: 0.9, Correct: true, Margin: 0.25, Rank: 1},
		{Ctx: 2048, Depth: 0.5, Correct: false, Margin: -4, Rank: 7},
	}
	s := SummarizeNeedle(res)
	wantCells := []NeedleCell{
		{Ctx: 1024, Depth: 0.1, Correct: 1, Total: 1, MinMargin: 2, WorstRank: 1},
		{Ctx: 1024, Depth: 0.9, Correct: 1, Total: 2, MinMargin: -1.5, WorstRank: 2},
		{Ctx: 2048, Depth: 0.5, Correct: 1, Total: 2, MinMargin: -4, WorstRank: 7},
	}
	if len(s.Cells) != len(wantCells) {
		t.Fatalf("cells %+v", s.Cells)
	}
	for i := range wantCells {
		if s.Cells[i] != wantCells[i] {
			t.Errorf("cell %d: %+v, want %+v", i, s.Cells[i], wantCells[i])
		}
	}
	if len(s.ByCtx) != 2 || s.ByCtx[0] != (NeedleCell{Ctx: 1024, Depth: -1, Correct: 2, Total: 3, MinMargin: -1.5, WorstRank: 2}) ||
		s.ByCtx[1] != (NeedleCell{Ctx: 2048, Depth: -1, Correct: 1, Total: 2, MinMargin: -4, WorstRank: 7}) {
		t.Errorf("by ctx: %+v", s.ByCtx)
	}
	if s.Overall.Correct != 3 || s.Overall.Total != 5 || s.Overall.Accuracy() != 0.6 || s.Overall.MinMargin != -4 {
		t.Errorf("overall: %+v", s.Overall)
	}
}

func TestParseNeedleCases(t *testing.T) {
	good := `{"prompt": "Document:\nx\nAnswer:", "answer": "1234-56", "ctx": 1024, "depth": 0.5}

{"prompt": "p", "answer": "7", "ctx": 2048, "depth": 0.1, "ctx_tokens": 9, "distractors": ["a"]}
`
	cases, err := ParseNeedleCases(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 || cases[0].Line != 1 || cases[1].Line != 3 || cases[1].CtxTokens != 9 || cases[0].Answer != "1234-56" {
		t.Errorf("cases: %+v", cases)
	}
	for _, bad := range []string{
		"",
		`{"prompt": "p", "answer": "1", "ctx": 1024, "depth": 0.5}` + "\n{not json}",
		`{"answer": "1", "ctx": 1024, "depth": 0.5}`,
		`{"prompt": "p", "answer": " ", "ctx": 1024, "depth": 0.5}`,
		`{"prompt": "p", "answer": "1", "depth": 0.5}`,
		`{"prompt": "p", "answer": "1", "ctx": 1024, "depth": 1.5}`,
	} {
		if _, err := ParseNeedleCases(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	_, err = ParseNeedleCases(strings.NewReader(`{"prompt": "p", "answer": "1", "ctx": 1024, "depth": 0.5}` + "\n{not json}"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad second line: %v, want it named", err)
	}
}

func TestCheckThresholds(t *testing.T) {
	types := map[kv.Type]*kvprobe.Quality{
		kv.Q4: {Top1Agreement: 0.961, GreedyForced: 23, GreedyTotal: 24},
		kv.Q8: {Top1Agreement: 0.998, GreedyForced: 24, GreedyTotal: 24},
	}
	checks := CheckThresholds(types, TrainedModelThresholds)
	want := []struct {
		kv, metric, value string
		pass              bool
	}{
		{"q4", "top1", "96.10%", false},
		{"q4", "forced", "23/24", true},
		{"q8", "top1", "99.80%", true},
	}
	if len(checks) != len(want) {
		t.Fatalf("checks %+v", checks)
	}
	for i, w := range want {
		c := checks[i]
		if c.KV != w.kv || c.Metric != w.metric || c.Value != w.value || c.Pass != w.pass {
			t.Errorf("check %d: %+v, want %+v", i, c, w)
		}
	}
	types[kv.Q4].GreedyForced = 22
	if c := CheckThresholds(types, TrainedModelThresholds)[1]; c.Pass || c.Want != "≥ 23/24" {
		t.Errorf("22/24: %+v, want a failure against ≥ 23/24", c)
	}
	if c := CheckThresholds(map[kv.Type]*kvprobe.Quality{}, TrainedModelThresholds)[0]; c.Pass || c.Value != "not measured" {
		t.Errorf("nothing measured: %+v", c)
	}
}
