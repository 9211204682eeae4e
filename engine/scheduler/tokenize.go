package scheduler

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"nibble/engine"
	"nibble/engine/reasoning"
)

// Tokenizing a long text costs seconds and many times its size in memory,
// before any queue limit applies. Submit therefore refuses by byte length
// what no tokenization could fit in the context, tokenizes at most
// Config.Tokenizers requests at once, and hands a long text's memory back
// afterwards.

// bigText is the text size after which Submit returns the tokenizer's
// memory to the system (a GC and a scavenge cost less than the text's
// tokenization did).
const bigText = 1 << 20

// tokenGate bounds concurrent tokenization; peak records the most
// tokenizations that ran at once (tests).
type tokenGate struct {
	slots     chan struct{}
	now, peak atomic.Int32
}

func newTokenGate(n int) *tokenGate { return &tokenGate{slots: make(chan struct{}, n)} }

// enter waits for a free tokenizer; it fails when ctx ends first.
func (g *tokenGate) enter(ctx context.Context) error {
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	n := g.now.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return nil
}

func (g *tokenGate) leave() {
	g.now.Add(-1)
	<-g.slots
}

// maxTokenBytes is the most input bytes one token of m's vocabulary can
// stand for: its longest piece text (a piece's text is at least as long as
// the input it matches: SentencePiece writes a space as "▁", three bytes,
// byte-level BPE a byte as one or two), and at least 4, a whole UTF-8
// character, which is what an unknown token stands for.
func maxTokenBytes(m *engine.Model) int {
	longest := 4
	for id := range m.Tok.VocabSize() {
		longest = max(longest, len(m.Tok.TokenText(int32(id))))
	}
	return longest
}

// refuseByLength is the error for a text too long for any tokenization to
// fit in the context (every token stands for at most maxPiece bytes), or
// nil when it might fit.
func refuseByLength(text, maxPiece, ctx int) error {
	if minTokens := (text + maxPiece - 1) / maxPiece; minTokens > ctx {
		return fmt.Errorf("%w: the prompt's %d bytes make at least %d tokens, but the context budget is %d; raise the context budget or shorten the input",
			engine.ErrContextFull, text, minTokens, ctx)
	}
	return nil
}

// maxPiece is maxTokenBytes of the loaded model, computed once.
func (l *loaded) maxPiece() int {
	l.maxPieceOnce.Do(func() { l.maxPieceBytes = maxTokenBytes(l.m) })
	return l.maxPieceBytes
}

// encodeBounded is encode within the gate, refusing by its length first a
// text that cannot fit (the prompt, or a chat's rendered text: a template
// may leave part of a message out, so the messages' own length would not
// do).
func (s *Scheduler) encodeBounded(ctx context.Context, l *loaded, r Request) ([]int32, reasoning.Splitter, error) {
	maxPiece, long := l.maxPiece(), false
	check := func(text int) error {
		long = text >= bigText
		return refuseByLength(text, maxPiece, l.opts.Ctx)
	}
	if len(r.Messages) == 0 {
		if err := check(len(r.Prompt)); err != nil {
			return nil, nil, err // before waiting for a tokenizer
		}
	}
	if err := s.tokenizers.enter(ctx); err != nil {
		return nil, nil, err
	}
	defer s.tokenizers.leave()
	ids, split, err := l.encode(r, check)
	if long {
		debug.FreeOSMemory() // the tokenizer's scratch for a long text
	}
	return ids, split, err
}
