package eval

import (
	"context"
	"fmt"
	"math"
	"time"

	"nibble/engine"
	"nibble/engine/fastmath"
	"nibble/engine/sample"
)

// Chunking is llama.cpp's llama-perplexity plan for a token stream (its
// perplexity(), without --ppl-stride): the text is tokenized once with BOS
// first; it is cut into Chunks = ⌊Tokens/Ctx⌋ non-overlapping chunks of
// Ctx tokens (the tail is dropped); each chunk runs from an empty cache
// with its first token replaced by BOS; and only the logits at positions
// First = Ctx/2 … Ctx−2 are scored, each against the chunk's next token, so
// every scored token has at least Ctx/2 tokens of context. That is
// ScoredPerChunk = Ctx − First − 1 tokens per chunk.
type Chunking struct {
	Tokens         int `json:"tokens"` // the tokenized text, BOS included
	Ctx            int `json:"ctx"`
	Chunks         int `json:"chunks"`
	First          int `json:"first"`
	ScoredPerChunk int `json:"scored_per_chunk"`
}

// PlanChunks plans n tokens in chunks of ctx. As llama-perplexity does, it
// refuses a text shorter than two chunks.
func PlanChunks(n, ctx int) (Chunking, error) {
	if ctx < 4 {
		return Chunking{}, fmt.Errorf("perplexity: a chunk of %d tokens is too short (at least 4)", ctx)
	}
	if n < 2*ctx {
		return Chunking{}, fmt.Errorf("perplexity: the text has %d tokens; a context of %d needs at least %d", n, ctx, 2*ctx)
	}
	first := ctx / 2
	return Chunking{Tokens: n, Ctx: ctx, Chunks: n / ctx, First: first, ScoredPerChunk: ctx - first - 1}, nil
}

// Scored is the number of tokens the whole plan scores.
func (c Chunking) Scored() int { return c.Chunks * c.ScoredPerChunk }

// Chunk returns a copy of chunk i of tokens with its first token replaced
// by bos when addBOS is set (llama-perplexity does so for models that add
// BOS; the replaced token is never scored).
func (c Chunking) Chunk(tokens []int32, i int, bos int32, addBOS bool) []int32 {
	chunk := append([]int32(nil), tokens[i*c.Ctx:(i+1)*c.Ctx]...)
	if addBOS {
		chunk[0] = bos
	}
	return chunk
}

// NLL is a running sum of negative log-likelihoods.
type NLL struct {
	Sum, SumSq float64
	Count      int
}

// Add counts one token's negative log-likelihood.
func (a *NLL) Add(v float64) {
	a.Sum += v
	a.SumSq += v * v
	a.Count++
}

// Perplexity is exp(mean NLL) and its standard error as llama-perplexity
// prints it ("PPL = x +/- e"): the standard error of the mean NLL,
// sqrt((E[v²] − E[v]²)/(Count−1)), times the perplexity.
func (a NLL) Perplexity() (ppl, stderr float64) {
	if a.Count == 0 {
		return math.NaN(), math.NaN()
	}
	mean := a.Sum / float64(a.Count)
	ppl = math.Exp(mean)
	if variance := a.SumSq/float64(a.Count) - mean*mean; variance > 0 && a.Count > 1 {
		stderr = math.Sqrt(variance/float64(a.Count-1)) * ppl
	}
	return ppl, stderr
}

// TokenNLL is −log softmax(logits)[target], computed as llama.cpp does:
// the maximum subtracted, float32 exponentials summed in float64.
func TokenNLL(logits []float32, target int32) float64 {
	maxLogit := logits[0]
	for _, v := range logits[1:] {
		maxLogit = max(maxLogit, v)
	}
	const log2e = 1.4426950408889634
	var sum float64
	for _, v := range logits {
		sum += float64(fastmath.Exp2((v - maxLogit) * log2e))
	}
	return float64(maxLogit) + math.Log(sum) - float64(logits[target])
}

// ScoreChunk runs chunk from an empty cache on s, in batches of the
// session's prefill batch, and calls each with every scored position p
// (first ≤ p ≤ len(chunk)−2) and the logits that predict chunk[p+1]. A
// batch with no scored position computes only its last row's logits.
func ScoreChunk(ctx context.Context, s *engine.Session, chunk []int32, first int, each func(p int, logits []float32)) error {
	if len(chunk) > s.Opts.Ctx {
		return fmt.Errorf("a chunk of %d tokens exceeds the context of %d", len(chunk), s.Opts.Ctx)
	}
	s.Reset()
	batch := s.Opts.Batch
	for pos := 0; pos < len(chunk); pos += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := min(len(chunk), pos+batch)
		if end-1 < first {
			if err := s.State.Forward(chunk[pos:end], pos, s.Logits()); err != nil {
				return err
			}
			continue
		}
		err := s.State.ForwardAll(chunk[pos:end], pos, func(row int, logits []float32) {
			if p := pos + row; p >= first && p+1 < len(chunk) {
				each(p, logits)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// PerplexityResult is one KV mode's figures over a whole plan.
type PerplexityResult struct {
	Mode string `json:"kv"`
	// Rotated is whether the session's cache stored K rotated (the mode
	// resolved: q4 rotates unless the backend cannot).
	Rotated    bool    `json:"rotated"`
	Perplexity float64 `json:"perplexity"`
	StdErr     float64 `json:"stderr"` // ± as llama-perplexity prints it
	MeanNLL    float64 `json:"mean_nll"`
	Scored     int     `json:"scored_tokens"`
	// Top1Correct is the share of scored positions whose argmax is the
	// text's next token.
	Top1Correct float64 `json:"top1_correct"`
	// Top1Agreement is the share of scored positions whose argmax equals the
	// reference run's (f16); nil for the reference itself.
	Top1Agreement *float64 `json:"top1_agreement_f16,omitempty"`
	Seconds       float64  `json:"seconds"` // wall time of the run
}

// RunPerplexity scores every chunk of tokens under plan on s. ref, when
// not nil, holds the reference run's argmax at every scored position (in
// plan order) for Top1Agreement; the run's own argmaxes are returned for
// use as a reference. progress, when set, is called after each chunk.
func RunPerplexity(ctx context.Context, s *engine.Session, mode string, tokens []int32, plan Chunking, ref []int32, progress func(done int)) (PerplexityResult, []int32, error) {
	res := PerplexityResult{Mode: mode, Rotated: s.Opts.KVRotated}
	start := time.Now()
	if ref != nil && len(ref) != plan.Scored() {
		return res, nil, fmt.Errorf("perplexity: %d reference argmaxes for %d scored tokens", len(ref), plan.Scored())
	}
	tok := s.M.Tok
	var nll NLL
	argmax := make([]int32, 0, plan.Scored())
	correct, agree := 0, 0
	for i := 0; i < plan.Chunks; i++ {
		chunk := plan.Chunk(tokens, i, tok.BOS(), tok.AddBOS())
		err := ScoreChunk(ctx, s, chunk, plan.First, func(p int, logits []float32) {
			next := chunk[p+1]
			nll.Add(TokenNLL(logits, next))
			top := sample.Greedy(logits)
			if top == next {
				correct++
			}
			if ref != nil && len(argmax) < len(ref) && top == ref[len(argmax)] {
				agree++
			}
			argmax = append(argmax, top)
		})
		if err != nil {
			return res, nil, fmt.Errorf("perplexity (%s), chunk %d: %w", mode, i+1, err)
		}
		if progress != nil {
			progress(i + 1)
		}
	}
	if len(argmax) != plan.Scored() {
		return res, nil, fmt.Errorf("perplexity (%s): scored %d tokens, the plan has %d", mode, len(argmax), plan.Scored())
	}
	res.Seconds = time.Since(start).Seconds()
	res.Perplexity, res.StdErr = nll.Perplexity()
	res.MeanNLL = nll.Sum / float64(nll.Count)
	res.Scored = nll.Count
	res.Top1Correct = float64(correct) / float64(nll.Count)
	if ref != nil {
		a := float64(agree) / float64(nll.Count)
		res.Top1Agreement = &a
	}
	return res, argmax, nil
}
