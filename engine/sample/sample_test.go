package sample

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var negInf = float32(math.Inf(-1))

func logitsOf(probs ...float64) []float32 {
	out := make([]float32, len(probs))
	for i, p := range probs {
		out[i] = float32(math.Log(p))
	}
	return out
}

func randomLogits(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * 6.4)
	}
	return out
}

// only returns Params with every stage off except those set by f.
func only(f func(p *Params)) Params {
	p := Params{Temperature: 1, TopP: 1, RepeatPenalty: 1}
	f(&p)
	return p
}

func TestDefaults(t *testing.T) {
	d := Defaults()
	want := Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64}
	if d != want {
		t.Errorf("Defaults() = %+v, want %+v", d, want)
	}
}

func TestGreedy(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		logits []float32
		want   int32
	}{
		{[]float32{1, 3, 2}, 1},
		{[]float32{5, 1, 5, 5}, 0},
		{[]float32{-1, -0.5, -0.5}, 1},
		{[]float32{nan, 2, nan, 3}, 3},
		{[]float32{negInf, negInf, -1e30}, 2},
		{[]float32{negInf, negInf}, 0},
		{[]float32{nan}, 0},
		{[]float32{1, float32(math.Inf(1)), float32(math.Inf(1))}, 1},
		{nil, -1},
	}
	for _, c := range cases {
		if got := Greedy(c.logits); got != c.want {
			t.Errorf("Greedy(%v) = %d, want %d", c.logits, got, c.want)
		}
	}
}

func TestTemperatureZeroIsGreedy(t *testing.T) {
	for _, temp := range []float32{0, -1} {
		p := Defaults()
		p.Temperature = temp
		s := New(p)
		for seed := range uint64(20) {
			logits := randomLogits(1000, seed)
			if got, want := s.Sample(logits, nil), Greedy(logits); got != want {
				t.Fatalf("temp %v: Sample = %d, Greedy = %d", temp, got, want)
			}
		}
	}
}

func TestTopK1IsGreedy(t *testing.T) {
	p := Defaults()
	p.TopK = 1
	s := New(p)
	for seed := range uint64(50) {
		logits := randomLogits(5000, seed)
		if seed%5 == 0 { // ties at the top: the lowest id wins, like Greedy
			logits[4000] = logits[Greedy(logits)]
		}
		if got, want := s.Sample(logits, nil), Greedy(logits); got != want {
			t.Fatalf("seed %d: top-k 1 sampled %d, greedy %d", seed, got, want)
		}
	}
}

func TestSeedDeterminism(t *testing.T) {
	logits := randomLogits(32000, 7)
	logits[10], logits[11], logits[12] = 20, 19.8, 19.5 // several plausible tokens
	run := func(seed uint64) []int32 {
		p := Defaults()
		p.Seed = seed
		s := New(p)
		var out []int32
		for range 200 {
			out = append(out, s.Sample(logits, nil))
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	if !slices.Equal(a, b) {
		t.Fatal("same seed gave different tokens")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds gave identical 200-token sequences")
	}
}

func TestTopKSelection(t *testing.T) {
	logits := randomLogits(20000, 3)
	logits[100] = logits[Greedy(logits)] // a tie at the top
	for _, k := range []int{1, 2, 5, 40, 1000} {
		s := New(only(func(p *Params) { p.TopK = k }))
		got, _ := s.distribution(logits, nil)
		want := make([]candidate, len(logits))
		for i, v := range logits {
			want[i] = candidate{int32(i), v}
		}
		slices.SortFunc(want, compareCandidates)
		if !slices.Equal(got, want[:k]) {
			t.Errorf("k=%d: top-k differs from a full sort", k)
		}
	}
}

func TestTopP(t *testing.T) {
	logits := logitsOf(0.5, 0.3, 0.15, 0.05)
	s := New(only(func(p *Params) { p.TopP = 0.75 }))
	cands, probs := s.distribution(logits, nil)
	// 0.5 < 0.75 ≤ 0.5+0.3: the first two stay, renormalized
	checkDist(t, cands, probs, map[int32]float64{0: 0.625, 1: 0.375})
	checkEmpirical(t, s, logits, nil, map[int32]float64{0: 0.625, 1: 0.375})

	// top-p renormalizes over what top-k kept: over {0.5, 0.3} the mass is {0.625, 0.375}
	s = New(only(func(p *Params) { p.TopK = 2; p.TopP = 0.6 }))
	cands, probs = s.distribution(logits, nil)
	checkDist(t, cands, probs, map[int32]float64{0: 1})
}

func TestMinP(t *testing.T) {
	logits := logitsOf(0.5, 0.3, 0.15, 0.05)
	// p ≥ 0.2·0.5 = 0.1 keeps three
	want := map[int32]float64{0: 0.5 / 0.95, 1: 0.3 / 0.95, 2: 0.15 / 0.95}
	s := New(only(func(p *Params) { p.MinP = 0.2 }))
	cands, probs := s.distribution(logits, nil)
	checkDist(t, cands, probs, want)
	checkEmpirical(t, s, logits, nil, want)

	// with top-k on the same result comes from the other selection path
	s = New(only(func(p *Params) { p.MinP = 0.2; p.TopK = 3 }))
	cands, probs = s.distribution(logits, nil)
	checkDist(t, cands, probs, want)
}

// Top-k off with min-p on collects only min-p's survivors but must give top-p the full
// normalizer: compare with the plain full sort.
func TestMinPTopPWithoutTopK(t *testing.T) {
	logits := randomLogits(50000, 11)
	for _, c := range []struct{ topP, minP float32 }{{0.9, 0.05}, {0.5, 0.01}, {0.99, 0.3}, {1, 0.1}} {
		s := New(only(func(p *Params) { p.TopP = c.topP; p.MinP = c.minP }))
		got, gotP := s.distribution(logits, nil)
		got = slices.Clone(got)
		gotP = slices.Clone(gotP)

		// reference: sort everything, top-p over the full softmax, then min-p
		all := make([]candidate, len(logits))
		for i, v := range logits {
			all[i] = candidate{int32(i), v}
		}
		slices.SortFunc(all, compareCandidates)
		ref := &Sampler{p: s.p}
		want := all
		if c.topP < 1 {
			want = ref.topP(all, 0)
		}
		want = minP(want, c.minP)
		if !slices.Equal(got, want) {
			t.Errorf("top-p %v min-p %v: %d candidates, reference %d", c.topP, c.minP, len(got), len(want))
			continue
		}
		wantP := ref.softmax(want, 1, 0)
		for i := range gotP {
			if math.Abs(float64(gotP[i]-wantP[i])) > 1e-6 {
				t.Errorf("prob %d: %v vs %v", i, gotP[i], wantP[i])
			}
		}
	}
}

func TestTemperature(t *testing.T) {
	logits := logitsOf(1, 2) // at T=0.5 the odds square: 1:4
	s := New(only(func(p *Params) { p.Temperature = 0.5 }))
	cands, probs := s.distribution(logits, nil)
	checkDist(t, cands, probs, map[int32]float64{0: 0.2, 1: 0.8})
	checkEmpirical(t, s, logits, nil, map[int32]float64{0: 0.2, 1: 0.8})

	s = New(only(func(p *Params) { p.Temperature = 2 })) // odds 1:√2
	cands, probs = s.distribution(logits, nil)
	r := math.Sqrt2
	checkDist(t, cands, probs, map[int32]float64{0: 1 / (1 + r), 1: r / (1 + r)})

	// temperature comes after the truncation: at T=100 min-p still cuts what it cut at T=1
	logits = logitsOf(0.5, 0.3, 0.15, 0.05)
	s = New(only(func(p *Params) { p.MinP = 0.2; p.Temperature = 100 }))
	cands, _ = s.distribution(logits, nil)
	if len(cands) != 3 {
		t.Errorf("min-p before temperature: %d candidates, want 3", len(cands))
	}
}

func TestRepetitionPenalty(t *testing.T) {
	logits := []float32{2, -2, 1, 0.5, 0}
	recent := []int32{0, 1, 1, 4, 99, -3} // out-of-vocabulary ids are ignored
	s := New(only(func(p *Params) {
		p.RepeatPenalty = 2
		p.FrequencyPenalty = 0.5
		p.PresencePenalty = 0.25
		p.RepeatLastN = -1
		p.Temperature = 1
	}))
	cands, _ := s.distribution(logits, recent)
	got := map[int32]float32{}
	for _, c := range cands {
		got[c.id] = c.logit
	}
	want := map[int32]float32{
		0: 2/2.0 - 0.5 - 0.25,    // positive: divided
		1: -2*2.0 - 2*0.5 - 0.25, // negative: multiplied; count 2
		2: 1, 3: 0.5,             // not recent
		4: 0*2.0 - 0.5 - 0.25, // zero counts as non-positive
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("token %d: logit %v, want %v", id, got[id], w)
		}
	}
	if !slices.Equal(logits, []float32{2, -2, 1, 0.5, 0}) {
		t.Errorf("Sample modified the logits: %v", logits)
	}

	// only the last RepeatLastN tokens count
	s = New(only(func(p *Params) { p.RepeatPenalty = 2; p.RepeatLastN = 1 }))
	cands, _ = s.distribution(logits, []int32{0, 2})
	for _, c := range cands {
		if w := map[int32]float32{0: 2, 2: 0.5}[c.id]; w != 0 && c.logit != w {
			t.Errorf("last_n=1: token %d logit %v, want %v", c.id, c.logit, w)
		}
	}

	// greedy decoding sees the penalty; penalties do not leak into the next call
	p := Defaults()
	p.Temperature = 0
	p.RepeatPenalty = 1.1
	s = New(p)
	if got := s.Sample([]float32{3, 2.9}, []int32{0}); got != 1 {
		t.Errorf("penalized greedy picked %d, want 1", got)
	}
	if got := s.Sample([]float32{3, 2.9}, nil); got != 0 {
		t.Errorf("after a penalized call, unpenalized greedy picked %d, want 0", got)
	}
}

// The penalized top-k (k+P heap) must equal penalizing everything and sorting.
func TestPenaltyWithTopK(t *testing.T) {
	logits := randomLogits(30000, 5)
	order := make([]int32, len(logits))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return compareCandidates(candidate{a, logits[a]}, candidate{b, logits[b]}) })
	recent := slices.Clone(order[:30]) // penalize the current best 30
	for _, repeat := range []float32{1.5, 0.5} {
		p := only(func(p *Params) { p.TopK = 20; p.RepeatPenalty = repeat; p.RepeatLastN = 64; p.FrequencyPenalty = 0.1 })
		s := New(p)
		got, _ := s.distribution(logits, recent)

		ref := make([]candidate, len(logits))
		for i, v := range logits {
			ref[i] = candidate{int32(i), v}
		}
		for _, id := range recent {
			l := ref[id].logit
			if l <= 0 {
				l *= repeat
			} else {
				l /= repeat
			}
			ref[id].logit = l - 0.1
		}
		slices.SortFunc(ref, compareCandidates)
		if !slices.Equal(got, ref[:20]) {
			t.Errorf("repeat %v: penalized top-k differs from the reference", repeat)
		}
	}
}

func TestInfAndNaN(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := [][]float32{
		{negInf, negInf, negInf},
		{negInf, 1, negInf, negInf},
		{nan, nan},
		{nan, 1, negInf, 2},
		{inf, 1, inf},
		{0, negInf},
	}
	for _, p := range []Params{Defaults(), only(func(*Params) {}), only(func(p *Params) { p.TopP = 0.5; p.MinP = 0.1 }),
		func() Params { p := Defaults(); p.RepeatPenalty = 1.3; p.PresencePenalty = 1; return p }()} {
		s := New(p)
		for _, logits := range cases {
			for range 20 {
				id := s.Sample(logits, []int32{0, 1})
				if id < 0 || int(id) >= len(logits) {
					t.Fatalf("Sample(%v) = %d", logits, id)
				}
			}
		}
	}
	// a single finite logit among -Inf is always chosen
	s := New(Defaults())
	for range 50 {
		if id := s.Sample([]float32{negInf, 1, negInf, negInf}, nil); id != 1 {
			t.Fatalf("picked %d, the only finite logit is 1", id)
		}
	}
	if id := New(Defaults()).Sample(nil, nil); id != -1 {
		t.Errorf("empty logits: %d", id)
	}
}

func TestNoAllocations(t *testing.T) {
	logits := randomLogits(128256, 9)
	recent := make([]int32, 64)
	for i := range recent {
		recent[i] = int32(i * 997)
	}
	full := Defaults()
	full.TopK = 0
	penal := Defaults()
	penal.RepeatPenalty = 1.1
	for name, p := range map[string]Params{"defaults": Defaults(), "topk0": full, "penalty": penal} {
		s := New(p)
		s.Sample(logits, recent) // warm the buffers
		if a := testing.AllocsPerRun(20, func() { s.Sample(logits, recent) }); a != 0 {
			t.Errorf("%s: %v allocations per Sample", name, a)
		}
	}
}

// checkDist compares an exact distribution with want (token → probability).
func checkDist(t *testing.T, cands []candidate, probs []float32, want map[int32]float64) {
	t.Helper()
	if len(want) == 1 && probs == nil && len(cands) == 1 {
		for id := range want {
			if cands[0].id != id {
				t.Errorf("deterministic choice %d, want %d", cands[0].id, id)
			}
		}
		return
	}
	if len(cands) != len(want) || len(probs) != len(cands) {
		t.Fatalf("%d candidates (%d probs), want %d", len(cands), len(probs), len(want))
	}
	for i, c := range cands {
		w, ok := want[c.id]
		if !ok || math.Abs(float64(probs[i])-w) > 1e-5 {
			t.Errorf("token %d: p=%v, want %v", c.id, probs[i], w)
		}
	}
}

// checkEmpirical draws many tokens and checks the frequencies with a chi-square bound. The
// sampler is seeded, so the test is deterministic; the bound (df ≤ 3, p ≈ 1e-4) is loose.
func checkEmpirical(t *testing.T, s *Sampler, logits []float32, recent []int32, want map[int32]float64) {
	t.Helper()
	const draws = 20000
	counts := map[int32]int{}
	for range draws {
		counts[s.Sample(logits, recent)]++
	}
	chi2 := 0.0
	for id, n := range counts {
		if _, ok := want[id]; !ok {
			t.Fatalf("token %d drawn %d times but should have been removed", id, n)
		}
	}
	for id, w := range want {
		e := w * draws
		d := float64(counts[id]) - e
		chi2 += d * d / e
	}
	if chi2 > 21 {
		t.Errorf("chi-square %.1f for %d draws: counts %v, want %v", chi2, draws, counts, want)
	}
}

func BenchmarkSample(b *testing.B) {
	logits := randomLogits(128256, 1)
	recent := make([]int32, 64)
	for i := range recent {
		recent[i] = int32(i * 1999)
	}
	bench := func(name string, p Params) {
		b.Run(name, func(b *testing.B) {
			s := New(p)
			b.ReportAllocs()
			for b.Loop() {
				s.Sample(logits, recent)
			}
		})
	}
	bench("defaults", Defaults())
	pen := Defaults()
	pen.RepeatPenalty = 1.1
	bench("defaults+penalty", pen)
	noK := Defaults()
	noK.TopK = 0
	bench("topk0_minp", noK)
	greedy := Defaults()
	greedy.Temperature = 0
	bench("greedy", greedy)
}

// A min-p above 1 (or any setting that filters every token) must still leave the most likely
// token, with or without top-k and top-p.
func TestMinPFiltersEverythingKeepsBest(t *testing.T) {
	logits := logitsOf(0.1, 0.6, 0.3)
	for _, p := range []Params{
		only(func(p *Params) { p.MinP = 2 }),
		only(func(p *Params) { p.MinP = 2; p.TopP = 0.5 }),
		only(func(p *Params) { p.MinP = 2; p.TopK = 2 }),
		only(func(p *Params) { p.MinP = float32(math.Inf(1)) }),
		only(func(p *Params) { p.MinP = float32(math.NaN()) }),
	} {
		s := New(p)
		for range 20 {
			if id := s.Sample(logits, nil); id != 1 {
				t.Fatalf("%+v: Sample = %d, want the most likely token 1", p, id)
			}
		}
	}
}

// Out-of-range settings must neither panic nor return an id outside the vocabulary.
func TestOutOfRangeParams(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	logits := [][]float32{logitsOf(0.1, 0.6, 0.3), {nan, 1, negInf, 2}, {negInf, negInf}, {nan}, {inf, nan, 3}}
	for _, p := range []Params{
		{Temperature: -1, TopK: -5, TopP: 0, MinP: 3},
		{Temperature: nan, TopK: 1 << 40, TopP: 2, MinP: -1},
		{Temperature: inf, TopP: nan, MinP: inf, RepeatPenalty: -2, RepeatLastN: -7},
		{Temperature: 1, TopP: -1, MinP: 1, RepeatPenalty: nan, FrequencyPenalty: inf, PresencePenalty: -inf, RepeatLastN: -1},
		{Temperature: 0.5, TopK: 1, RepeatPenalty: inf, FrequencyPenalty: nan, RepeatLastN: 3},
		{Temperature: 0, RepeatPenalty: 1.1, FrequencyPenalty: inf, PresencePenalty: -inf, RepeatLastN: -1},
	} {
		s := New(p)
		for _, l := range logits {
			for range 10 {
				if id := s.Sample(l, []int32{0, 1, 2, -3, 99}); id < 0 || int(id) >= len(l) {
					t.Fatalf("%+v: Sample(%v) = %d", p, l, id)
				}
			}
		}
	}
}

// argmax is the reference for greedy sampling: the largest logit, the lowest id on ties, NaN
// counting as -Inf, id 0 when none is above -Inf.
func argmax(logits []float32) int32 {
	best, bestV := 0, math.Inf(-1)
	for i, v := range logits {
		if float64(v) > bestV {
			best, bestV = i, float64(v)
		}
	}
	return int32(best)
}

// FuzzSample checks that Sample never panics and always returns an id in range, whatever the
// logits and settings, and that temperature 0 without penalties returns the argmax. The logits
// are the little-endian float32s of data; recent tokens are the bytes of hist.
func FuzzSample(f *testing.F) {
	f.Fuzz(func(t *testing.T, data, hist []byte, temp float32, topK int, topP, minP, repeat, freq, presence float32, lastN int, seed uint64) {
		n := len(data) / 4
		if n > 4096 {
			n = 4096
		}
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		recent := make([]int32, len(hist))
		for i, b := range hist {
			recent[i] = int32(int8(b)) // negative ids too: they must be ignored
		}
		p := Params{Temperature: temp, TopK: topK, TopP: topP, MinP: minP, RepeatPenalty: repeat,
			FrequencyPenalty: freq, PresencePenalty: presence, RepeatLastN: lastN, Seed: seed}
		s := New(p)
		id := s.Sample(logits, recent)
		if n == 0 {
			if id != -1 {
				t.Fatalf("empty logits: %d, want -1", id)
			}
			return
		}
		if id < 0 || int(id) >= n {
			t.Fatalf("%+v: Sample(%v) = %d, out of range", p, logits, id)
		}
		if temp == 0 {
			if id := s.Sample(logits, nil); id != argmax(logits) {
				t.Fatalf("%+v: temperature 0: Sample(%v) = %d, want argmax %d", p, logits, id, argmax(logits))
			}
		}
	})
}
