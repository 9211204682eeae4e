package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"nibble/engine"
	"nibble/engine/sample"
	"nibble/engine/tokenizer"
)

// NeedleCase is one line of a needle case file: a document with a planted
// fact, ending in a question and "Answer:". The expected continuation is
// " " + Answer and a newline.
type NeedleCase struct {
	Prompt      string   `json:"prompt"`
	Answer      string   `json:"answer"`
	CtxTokens   int      `json:"ctx_tokens"` // prompt length with llama.cpp's tokenizer, BOS included
	Ctx         int      `json:"ctx"`        // the context-length class: 1024, 2048, 4096, 8192
	Depth       float64  `json:"depth"`      // where the fact sits, 0 (start) to 1 (end)
	Question    string   `json:"question"`
	Needle      string   `json:"needle"`
	Distractors []string `json:"distractors"`
	Line        int      `json:"-"` // 1-based line in the file
}

// ReadNeedleCases loads a JSONL case file.
func ReadNeedleCases(path string) ([]NeedleCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("needle cases: %w", err)
	}
	defer f.Close()
	cases, err := ParseNeedleCases(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cases, nil
}

// ParseNeedleCases reads one case per line (blank lines are skipped). Each
// needs a prompt, an answer, a positive ctx and a depth in [0, 1].
func ParseNeedleCases(r io.Reader) ([]NeedleCase, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var cases []NeedleCase
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var c NeedleCase
		if err := json.Unmarshal([]byte(text), &c); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		c.Line = line
		switch {
		case c.Prompt == "":
			return nil, fmt.Errorf("line %d: no prompt", line)
		case strings.TrimSpace(c.Answer) == "":
			return nil, fmt.Errorf("line %d: no answer", line)
		case c.Ctx <= 0:
			return nil, fmt.Errorf("line %d: ctx must be a positive context length, got %d", line, c.Ctx)
		case c.Depth < 0 || c.Depth > 1:
			return nil, fmt.Errorf("line %d: depth must be between 0 and 1, got %g", line, c.Depth)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read cases: %w", err)
	}
	if len(cases) == 0 {
		return nil, errors.New("no cases")
	}
	return cases, nil
}

// NeedleTokens is a case tokenized once for every KV mode: the prompt (BOS
// first) and the answer's tokens as they continue it.
type NeedleTokens struct {
	Prompt, Answer []int32
}

// TokenizeNeedle encodes c's prompt as `nibble run` does and finds the
// tokens of " "+answer that follow it, by encoding the prompt with the
// expected continuation and checking that the prompt's tokens are kept.
func TokenizeNeedle(tok *tokenizer.Tokenizer, c NeedleCase) (NeedleTokens, error) {
	prompt := tok.Encode(c.Prompt, true, false)
	full := tok.Encode(c.Prompt+" "+strings.TrimSpace(c.Answer), true, false)
	if len(full) <= len(prompt) || !slices.Equal(full[:len(prompt)], prompt) {
		return NeedleTokens{}, fmt.Errorf("line %d: the answer does not tokenize as a continuation of the prompt", c.Line)
	}
	return NeedleTokens{Prompt: prompt, Answer: full[len(prompt):]}, nil
}

// RankMargin scores a target token in logits. Rank is 1 plus the number of
// tokens with a strictly larger logit (1: greedy picks it, ties aside).
// Margin is the target's logit minus the largest logit of any other token:
// positive, greedy picks the target by that much; negative, a wrong token
// beats it by that much.
func RankMargin(logits []float32, target int32) (rank int, margin float32) {
	want := logits[target]
	rank = 1
	bestOther := float32(0)
	first := true
	for i, v := range logits {
		if int32(i) == target {
			continue
		}
		if v > want {
			rank++
		}
		if first || v > bestOther {
			bestOther, first = v, false
		}
	}
	return rank, want - bestOther
}

// NeedleResult is one case run under one KV mode.
type NeedleResult struct {
	Line         int     `json:"line"`
	Ctx          int     `json:"ctx"`
	Depth        float64 `json:"depth"`
	PromptTokens int     `json:"prompt_tokens"`
	Answer       string  `json:"answer"`
	Output       string  `json:"output"` // greedy continuation up to its first newline
	Correct      bool    `json:"correct"`
	// Rank and Margin summarize the answer under teacher forcing: the worst
	// rank and the smallest margin (RankMargin) over the answer's tokens,
	// and MarginToken is the index of the token with that margin.
	Rank        int     `json:"rank"`
	Margin      float32 `json:"margin"`
	MarginToken int     `json:"margin_token"`
	// TokenRanks and TokenMargins are per answer token, in order.
	TokenRanks   []int     `json:"token_ranks"`
	TokenMargins []float32 `json:"token_margins"`
}

// MaxAnswerTokens bounds the greedy continuation, as the reference runs did
// (llama.cpp, 16 tokens).
const MaxAnswerTokens = 16

// RunNeedle runs one case on s: it prefills the prompt from an empty cache,
// scores the reference answer under teacher forcing (rank and margin of
// each answer token), and decodes greedily until a newline, an
// end-of-generation token or MaxAnswerTokens. The case is correct when the
// continuation, trimmed, starts with the answer.
func RunNeedle(ctx context.Context, s *engine.Session, c NeedleCase, toks NeedleTokens) (NeedleResult, error) {
	res := NeedleResult{Line: c.Line, Ctx: c.Ctx, Depth: c.Depth, PromptTokens: len(toks.Prompt), Answer: strings.TrimSpace(c.Answer)}
	if len(toks.Prompt) == 0 || len(toks.Answer) == 0 {
		return res, fmt.Errorf("line %d: empty prompt or answer tokens", c.Line)
	}
	if need := len(toks.Prompt) + max(len(toks.Answer), MaxAnswerTokens); need > s.Opts.Ctx {
		return res, fmt.Errorf("line %d: %d prompt tokens and %d for the answer exceed the context of %d", c.Line, len(toks.Prompt), need-len(toks.Prompt), s.Opts.Ctx)
	}
	s.Reset() // each case starts at position 0 (quantized caches keep the model's smoothing, calibrated once)
	if _, err := s.Prefill(ctx, toks.Prompt); err != nil {
		return res, fmt.Errorf("line %d: %w", c.Line, err)
	}
	// forced[i] are the logits that predict answer token i after the prompt
	// and the answer's first i tokens.
	forced := make([][]float32, len(toks.Answer))
	for i, a := range toks.Answer {
		forced[i] = slices.Clone(s.Logits())
		rank, margin := RankMargin(forced[i], a)
		res.TokenRanks = append(res.TokenRanks, rank)
		res.TokenMargins = append(res.TokenMargins, margin)
		if i == 0 || rank > res.Rank {
			res.Rank = rank
		}
		if i == 0 || margin < res.Margin {
			res.Margin, res.MarginToken = margin, i
		}
		if i+1 < len(toks.Answer) {
			if err := s.Step(a); err != nil {
				return res, fmt.Errorf("line %d: %w", c.Line, err)
			}
		}
	}
	out, err := greedyLine(ctx, s, toks, forced)
	if err != nil {
		return res, fmt.Errorf("line %d: %w", c.Line, err)
	}
	res.Output = out
	res.Correct = strings.HasPrefix(strings.TrimSpace(out), res.Answer)
	return res, nil
}

// greedyLine decodes greedily after the prompt up to the first newline. The
// cache holds the prompt and all but the last answer token; while greedy
// follows the answer, the teacher-forced logits already computed are the
// ones it would compute, so it steps the model only once it leaves them.
func greedyLine(ctx context.Context, s *engine.Session, toks NeedleTokens, forced [][]float32) (string, error) {
	tok := s.M.Tok
	dec := tok.NewStreamDecoder()
	var text strings.Builder
	onAnswer := true // the tokens chosen so far are the answer's first ones
	for n := 0; n < MaxAnswerTokens; n++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		logits := s.Logits()
		if onAnswer {
			logits = forced[n]
		}
		next := sample.Greedy(logits)
		if tok.IsEOG(next) {
			break
		}
		text.WriteString(dec.Push(next))
		if strings.Contains(text.String(), "\n") || n+1 == MaxAnswerTokens {
			break
		}
		if onAnswer {
			if next == toks.Answer[n] && n+1 < len(forced) {
				continue
			}
			// The cache holds the prompt and answer[:n] from here on.
			if err := rewind(ctx, s, toks, n); err != nil {
				return "", err
			}
			onAnswer = false
		}
		if err := s.Step(next); err != nil {
			return "", err
		}
	}
	text.WriteString(dec.Flush())
	line, _, _ := strings.Cut(text.String(), "\n")
	return line, nil
}

// rewind leaves the cache holding the prompt and the answer's first n
// tokens. A cache that evicted positions holds no prefix to cut back to,
// so it runs the same steps again from an empty cache: the prompt, then
// the answer tokens one at a time, as the teacher-forced pass did.
func rewind(ctx context.Context, s *engine.Session, toks NeedleTokens, n int) error {
	if !s.Evicted() {
		s.Truncate(len(toks.Prompt) + n)
		return nil
	}
	s.Reset()
	if _, err := s.Prefill(ctx, toks.Prompt); err != nil {
		return err
	}
	for _, a := range toks.Answer[:n] {
		if err := s.Step(a); err != nil {
			return err
		}
	}
	return nil
}

// NeedleCell is the accuracy of a group of results: one (context, depth)
// cell, one context length (Depth < 0), or all of them (Ctx 0).
type NeedleCell struct {
	Ctx       int     `json:"ctx,omitempty"`
	Depth     float64 `json:"depth"`
	Correct   int     `json:"correct"`
	Total     int     `json:"total"`
	MinMargin float32 `json:"min_margin"` // the smallest case margin in the group
	WorstRank int     `json:"worst_rank"`
}

// Accuracy is Correct/Total.
func (c NeedleCell) Accuracy() float64 {
	if c.Total == 0 {
		return 0
	}
	return float64(c.Correct) / float64(c.Total)
}

func (c *NeedleCell) add(r NeedleResult) {
	if c.Total == 0 || r.Margin < c.MinMargin {
		c.MinMargin = r.Margin
	}
	c.WorstRank = max(c.WorstRank, r.Rank)
	c.Total++
	if r.Correct {
		c.Correct++
	}
}

// NeedleSummary groups one mode's results.
type NeedleSummary struct {
	Cells   []NeedleCell `json:"cells"`   // per (ctx, depth), ctx then depth ascending
	ByCtx   []NeedleCell `json:"by_ctx"`  // per ctx, ascending; Depth is -1
	Overall NeedleCell   `json:"overall"` // Ctx 0, Depth -1
}

// SummarizeNeedle counts results per (ctx, depth) cell, per ctx and overall.
func SummarizeNeedle(results []NeedleResult) NeedleSummary {
	type key struct {
		ctx   int
		depth float64
	}
	cells := map[key]*NeedleCell{}
	ctxs := map[int]*NeedleCell{}
	sum := NeedleSummary{Overall: NeedleCell{Depth: -1}}
	for _, r := range results {
		k := key{r.Ctx, r.Depth}
		if cells[k] == nil {
			cells[k] = &NeedleCell{Ctx: r.Ctx, Depth: r.Depth}
		}
		if ctxs[r.Ctx] == nil {
			ctxs[r.Ctx] = &NeedleCell{Ctx: r.Ctx, Depth: -1}
		}
		cells[k].add(r)
		ctxs[r.Ctx].add(r)
		sum.Overall.add(r)
	}
	for _, c := range cells {
		sum.Cells = append(sum.Cells, *c)
	}
	for _, c := range ctxs {
		sum.ByCtx = append(sum.ByCtx, *c)
	}
	slices.SortFunc(sum.Cells, func(a, b NeedleCell) int {
		if a.Ctx != b.Ctx {
			return a.Ctx - b.Ctx
		}
		switch {
		case a.Depth < b.Depth:
			return -1
		case a.Depth > b.Depth:
			return 1
		}
		return 0
	})
	slices.SortFunc(sum.ByCtx, func(a, b NeedleCell) int { return a.Ctx - b.Ctx })
	return sum
}
