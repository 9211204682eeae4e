package scheduler

import (
	"context"
	"strings"
	"testing"

	"nibble/engine"
	"nibble/engine/chat"
	"nibble/engine/sample"
	"nibble/internal/testmodel"
)

func scriptedThinker(t *testing.T) string {
	return testmodel.Thinker(t, t.TempDir(), "thinker.gguf")
}

func TestReasoningSplitFromAnswer(t *testing.T) {
	s := New(Config{Threads: 2})
	t.Cleanup(func() { s.Close() })
	info, err := s.Load(scriptedThinker(t), engine.Options{Ctx: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if info.Reasoning != "think" || info.ThinkingControl != "enable_thinking" {
		t.Fatalf("ModelInfo: reasoning %q, control %q", info.Reasoning, info.ThinkingControl)
	}
	msgs := []chat.Message{{Role: "user", Content: "Hi"}}
	for _, temp := range []float32{0, 0.8} {
		ch, err := s.Submit(context.Background(), Request{Messages: msgs,
			Params: engine.GenParams{MaxTokens: 32, Sample: sample.Params{Temperature: temp, Seed: 7}}})
		if err != nil {
			t.Fatal(err)
		}
		var answer, thinking strings.Builder
		var res *Result
		firstAnswer := -1
		n := 0
		for e := range ch {
			switch e.Kind {
			case Delta:
				n++
				if e.Text != "" && firstAnswer < 0 {
					firstAnswer = n
				}
				if e.Reasoning != "" && firstAnswer >= 0 {
					t.Errorf("reasoning after the answer began: %q", e.Reasoning)
				}
				answer.WriteString(e.Text)
				thinking.WriteString(e.Reasoning)
			case Final:
				res = e.Result
			}
		}
		if res == nil || res.Err != nil || res.FinishReason != engine.StopString {
			t.Fatalf("temperature %g: %+v", temp, res)
		}
		if answer.String() != testmodel.ThinkerAnswer || thinking.String() != testmodel.ThinkerReasoning {
			t.Fatalf("temperature %g: answer %q, thinking %q", temp, answer.String(), thinking.String())
		}
		if res.Text != answer.String() || res.Reasoning != thinking.String() {
			t.Fatalf("the result's text %q and reasoning %q differ from the stream's", res.Text, res.Reasoning)
		}
		if res.GenTokens != len(testmodel.ThinkerPieces) {
			t.Errorf("%d tokens generated, want %d (thinking counts)", res.GenTokens, len(testmodel.ThinkerPieces))
		}
	}
}

func TestEnableThinkingReachesTheTemplate(t *testing.T) {
	s := New(Config{Threads: 2})
	t.Cleanup(func() { s.Close() })
	if _, err := s.Load(scriptedThinker(t), engine.Options{Ctx: 1024}); err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: "user", Content: "Hi"}}
	on, err := s.Tokenize(Request{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	off := false
	offIDs, err := s.Tokenize(Request{Messages: msgs, EnableThinking: &off})
	if err != nil {
		t.Fatal(err)
	}
	if len(offIDs) <= len(on) {
		t.Fatalf("thinking off should add the empty think block to the prompt: %d tokens, on %d", len(offIDs), len(on))
	}
}

// A plain completion is not split, even on a reasoning model.
func TestCompletionNotSplit(t *testing.T) {
	s := New(Config{Threads: 2})
	t.Cleanup(func() { s.Close() })
	if _, err := s.Load(scriptedThinker(t), engine.Options{Ctx: 1024}); err != nil {
		t.Fatal(err)
	}
	res := ask(t, s, Request{Prompt: "Hi\n", Params: engine.GenParams{MaxTokens: 32}})
	if res.Reasoning != "" || !strings.HasPrefix(res.Text, "<think>") {
		t.Fatalf("completion: text %q, reasoning %q", res.Text, res.Reasoning)
	}
}
