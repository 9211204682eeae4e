package service

import (
	"errors"
	"testing"
	"time"

	"nibble/engine"
	"nibble/engine/scheduler"
)

// Every final event comes from finalOf: from a result, its figures in
// the window's units and an error only when the reply failed; without
// one, a cancellation carrying the text the window was sent.
func TestFinalOf(t *testing.T) {
	r := &scheduler.Result{FinishReason: "error", Err: errors.New("out of memory"),
		Stats:            engine.Stats{Text: "Hi", PromptTokens: 5, ReusedTokens: 2, PrefillTokens: 3, GenTokens: 4},
		TimeToFirstToken: 1500 * time.Microsecond,
		PrefillTokPerSec: 10, DecodeTokPerSec: 20}
	want := Final{ID: "r1", FinishReason: "error", Error: "out of memory", Text: "Hi", PromptTokens: 5, ReusedTokens: 2,
		PrefillTokens: 3, GenTokens: 4, TTFTMs: 1.5, PrefillTokPerSec: 10, DecodeTokPerSec: 20}
	if got := finalOf("r1", r, "Hi there"); got != want {
		t.Fatalf("from a result:\n got %+v\nwant %+v", got, want)
	}
	r.FinishReason, r.Err = "cancelled", errors.New("context canceled")
	if got := finalOf("r1", r, ""); got.Error != "" || got.FinishReason != "cancelled" {
		t.Fatalf("a cancelled result: %+v, want no error shown", got)
	}
	if got, want := finalOf("r2", nil, "so far"), (Final{ID: "r2", FinishReason: "cancelled", Text: "so far"}); got != want {
		t.Fatalf("without a result: %+v, want %+v", got, want)
	}
}
