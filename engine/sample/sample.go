// Package sample picks the next token from logits the way llama.cpp's common sampler chain does:
// penalties → top-k → top-p → min-p → temperature → dist, or greedy when the temperature is ≤ 0.
//
// As in llama.cpp, top-k, top-p and min-p see the logits before temperature scaling; top-p
// renormalizes over what top-k kept. The random stream is math/rand/v2's PCG, so a seed
// reproduces our own runs, not llama.cpp's (which uses mt19937).
package sample

import (
	"math"
	"math/rand/v2"
)

// Params are the sampling settings (llama.cpp's names: temp, top_k, top_p, min_p,
// repeat_penalty, repeat_last_n, frequency_penalty, presence_penalty, seed).
type Params struct {
	Temperature      float32 // ≤ 0: greedy
	TopK             int     // ≤ 0: off
	TopP             float32 // ≥ 1: off
	MinP             float32 // ≤ 0: off; ≥ 1 keeps only the most likely tokens
	RepeatPenalty    float32 // 1: off; ≤ 0 is treated as off
	RepeatLastN      int     // how many of the recent tokens are penalized; 0: none, -1: all
	FrequencyPenalty float32 // subtracted count times
	PresencePenalty  float32 // subtracted once when the token occurs
	Seed             uint64
}

// Defaults are llama.cpp's common_params_sampling defaults. llama.cpp draws a random seed by
// default; here the seed is 0 unless the caller sets one.
func Defaults() Params {
	return Params{
		Temperature:   0.8,
		TopK:          40,
		TopP:          0.95,
		MinP:          0.05,
		RepeatPenalty: 1.0,
		RepeatLastN:   64,
	}
}

type candidate struct {
	id    int32
	logit float32
}

// Sampler holds the parameters, the random state and reusable buffers; it is not safe for
// concurrent use.
type Sampler struct {
	p   Params
	rng *rand.Rand

	cands    []candidate // selection buffer: top-k heap or the whole vocabulary
	probs    []float32
	fullNorm float32 // see allSorted; 0 when the candidates are the whole set

	// penalties: count per token id (len = vocab), the ids touched, their penalized logits
	counts  []int32
	penIDs  []int32
	penVals []float32
}

// New returns a sampler seeded with p.Seed.
func New(p Params) *Sampler {
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))}
}

// Greedy returns the id of the largest logit, the lowest id on ties; NaN counts as -Inf. It
// returns -1 for empty logits.
func Greedy(logits []float32) int32 {
	if len(logits) == 0 {
		return -1
	}
	best := 0
	bestV := float32(math.Inf(-1))
	for i, v := range logits {
		if v > bestV {
			best, bestV = i, v
		}
	}
	return int32(best)
}

// Sample draws the next token. logits is not modified; recent are the latest tokens of the
// context (prompt and generated), oldest first, for the penalties; ids outside the vocabulary
// are ignored. It returns -1 only for empty logits.
func (s *Sampler) Sample(logits []float32, recent []int32) int32 {
	if len(logits) == 0 {
		return -1
	}
	cands, probs := s.distribution(logits, recent)
	if probs == nil {
		return cands[0].id
	}
	u := s.rng.Float64()
	var cum float64
	for i, p := range probs {
		cum += float64(p)
		if u < cum {
			return cands[i].id
		}
	}
	// rounding left u above the last cumulative sum: take the last token with mass
	for i := len(probs) - 1; i > 0; i-- {
		if probs[i] > 0 {
			return cands[i].id
		}
	}
	return cands[0].id
}

// distribution runs the chain up to the final draw: the surviving candidates and their
// probabilities, or probs nil when the choice is cands[0] (greedy, a single survivor, or no
// finite maximum to normalize against). logits must not be empty.
func (s *Sampler) distribution(logits []float32, recent []int32) ([]candidate, []float32) {
	penalized := s.preparePenalties(logits, recent)
	defer s.clearPenalties()

	if s.p.Temperature <= 0 {
		if !penalized {
			id := Greedy(logits)
			s.cands = append(s.cands[:0], candidate{id, logits[id]})
			return s.cands, nil
		}
		return s.topK(logits, 1), nil
	}
	cands := s.truncate(logits)
	if len(cands) == 1 || math.IsInf(float64(cands[0].logit), 0) {
		return cands[:1], nil
	}
	return cands, s.softmax(cands, s.p.Temperature, 0)
}

// truncate applies top-k, top-p and min-p and returns the surviving candidates sorted by
// descending logit (ties: lower id first), with penalties applied.
func (s *Sampler) truncate(logits []float32) []candidate {
	n := len(logits)
	k := s.p.TopK
	var cands []candidate
	if k > 0 && k < n {
		cands = s.topK(logits, k)
	} else {
		cands = s.allSorted(logits)
	}
	if s.p.TopP < 1 {
		cands = s.topP(cands, s.fullNorm)
	}
	if s.p.MinP > 0 {
		cands = minP(cands, s.p.MinP)
	}
	return cands
}

// softmax returns exp((l - max)/temp) normalized (the same as scaling the logits first), in float32 as llama.cpp computes it. A
// non-zero norm is the normalizer to use instead of the candidates' own sum (when cands is a
// prefix of a larger sorted set).
func (s *Sampler) softmax(cands []candidate, temp, norm float32) []float32 {
	s.probs = s.probs[:0]
	maxL := cands[0].logit
	var sum float32
	for _, c := range cands {
		p := expf((c.logit - maxL) / temp)
		s.probs = append(s.probs, p)
		sum += p
	}
	if norm != 0 {
		sum = norm
	}
	for i := range s.probs {
		s.probs[i] /= sum
	}
	return s.probs
}

func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// topP keeps the shortest prefix whose probability mass (softmax over the candidates at
// temperature 1, or over norm's larger set) reaches TopP.
func (s *Sampler) topP(cands []candidate, norm float32) []candidate {
	if len(cands) <= 1 || math.IsInf(float64(cands[0].logit), 0) {
		return cands
	}
	probs := s.softmax(cands, 1, norm)
	var cum float32
	for i, p := range probs {
		cum += p
		if cum >= s.p.TopP {
			return cands[:i+1]
		}
	}
	return cands
}

// minP keeps the candidates with p ≥ minP·p_max, i.e. logit ≥ max + ln(minP); cands is sorted.
func minP(cands []candidate, p float32) []candidate {
	if len(cands) <= 1 {
		return cands
	}
	minLogit := cands[0].logit + float32(math.Log(float64(p)))
	i := 1
	for i < len(cands) && cands[i].logit >= minLogit {
		i++
	}
	return cands[:i]
}
