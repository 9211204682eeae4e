package server

import (
	"encoding/json"
	"strings"
	"testing"

	"nibble/engine"
	"nibble/engine/scheduler"
	"nibble/internal/testmodel"
)

// thinkerServer serves the scripted reasoning model (Qwen3's template).
func thinkerServer(t *testing.T) (*scheduler.Scheduler, string) {
	t.Helper()
	s := scheduler.New(scheduler.Config{Threads: 2})
	t.Cleanup(func() { s.Close() })
	if _, err := s.Load(testmodel.Thinker(t, t.TempDir(), "thinker.gguf"), engine.Options{Ctx: 1024}); err != nil {
		t.Fatal(err)
	}
	_, ts := serve(t, s, Config{})
	return s, ts.URL
}

func TestReasoningContent(t *testing.T) {
	_, url := thinkerServer(t)
	body := `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":64}`
	msg := post(t, url+"/v1/chat/completions", body).json(t)["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != testmodel.ThinkerAnswer || msg["reasoning_content"] != testmodel.ThinkerReasoning {
		t.Fatalf("message %v: want content %q and reasoning_content %q", msg, testmodel.ThinkerAnswer, testmodel.ThinkerReasoning)
	}

	_, events := postStream(t, url+"/v1/chat/completions", strings.Replace(body, `{"messages"`, `{"stream":true,"messages"`, 1))
	var content, reasoning strings.Builder
	reasoningChunks := 0
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta map[string]any `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatal(err)
		}
		d := c.Choices[0].Delta
		if s, ok := d["content"].(string); ok {
			content.WriteString(s)
		}
		if s, ok := d["reasoning_content"].(string); ok {
			reasoning.WriteString(s)
			reasoningChunks++
			if _, both := d["content"]; both {
				t.Errorf("a reasoning chunk carries content too: %s", ev)
			}
		}
	}
	if content.String() != testmodel.ThinkerAnswer || reasoning.String() != testmodel.ThinkerReasoning {
		t.Fatalf("streamed content %q, reasoning %q", content.String(), reasoning.String())
	}
	if reasoningChunks < 3 {
		t.Errorf("the reasoning came in %d chunks: it should stream as it is written", reasoningChunks)
	}
}

func TestThinkingFields(t *testing.T) {
	s, url := thinkerServer(t)
	prompt := func(extra string) []int32 {
		t.Helper()
		res := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":1`+extra+`}`)
		if res.status != 200 {
			t.Fatalf("%s: %d %s", extra, res.status, res.body)
		}
		return s.LastPrompt()
	}
	on := prompt("")
	off := prompt(`,"chat_template_kwargs":{"enable_thinking":false}`)
	if len(off) <= len(on) {
		t.Errorf("enable_thinking false: the prompt should gain the empty think block (%d tokens, %d with thinking on)", len(off), len(on))
	}
	if got := prompt(`,"chat_template_kwargs":{"enable_thinking":true},"reasoning_effort":"low"`); len(got) != len(on) {
		t.Errorf("enable_thinking true and an effort Qwen3's template does not read: %d tokens, want %d", len(got), len(on))
	}
	for _, c := range []struct{ extra, param string }{
		{`,"reasoning_effort":"extreme"`, "reasoning_effort"},
		{`,"chat_template_kwargs":{"enable_thinking":"no"}`, "chat_template_kwargs.enable_thinking"},
		{`,"reasoning_effort":"low","chat_template_kwargs":{"reasoning_effort":"high"}`, "reasoning_effort"},
	} {
		res := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}]`+c.extra+`}`)
		if _, _, param, _ := res.errorOf(t); res.status != 400 || param != c.param {
			t.Errorf("%s: status %d, param %q", c.extra, res.status, param)
		}
	}
}
