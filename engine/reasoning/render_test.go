package reasoning

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine/chat"
	"nibble/internal/testdata"
)

// TestQwen3TemplateSwitch renders Qwen3's own template with thinking on and off: off writes
// the empty think block, so the reply starts in the answer; on leaves the model to open it.
func TestQwen3TemplateSwitch(t *testing.T) {
	src, err := os.ReadFile("testdata/Qwen-Qwen3-0.6B.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chat.Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: "user", Content: "Hi"}}
	off, on := false, true
	for _, c := range []struct {
		enable *bool
		tail   string
	}{
		{nil, "<|im_start|>assistant\n"},
		{&on, "<|im_start|>assistant\n"},
		{&off, "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
	} {
		out, err := tpl.Render(msgs, chat.Vars{AddGenerationPrompt: true, EnableThinking: c.enable})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(out, "<|im_start|>user\nHi<|im_end|>\n"+c.tail) {
			t.Errorf("enable_thinking=%v: %q", c.enable, out)
		}
		if StartsInThink(out) {
			t.Errorf("enable_thinking=%v: the reply should not start inside a think block", c.enable)
		}
		got := Split(Think, out, "<think>\nr\n</think>\n\nAnswer")
		if got != (Part{"r", "Answer"}) {
			t.Errorf("enable_thinking=%v: %+v", c.enable, got)
		}
	}
}

func TestReasoningEffortReachesTemplate(t *testing.T) {
	tpl, err := chat.Parse("Reasoning: {{ reasoning_effort | default('medium') }}")
	if err != nil {
		t.Fatal(err)
	}
	for effort, want := range map[string]string{"": "Reasoning: medium", "low": "Reasoning: low", "high": "Reasoning: high"} {
		out, err := tpl.Render(nil, chat.Vars{ReasoningEffort: effort})
		if err != nil || out != want {
			t.Errorf("effort %q: %q, %v", effort, out, err)
		}
	}
}

// DeepSeek-R1's template opens the think block in the prompt: the reply starts inside it.
func TestDeepSeekR1OpensThinkInPrompt(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testdata.Dir(t), "templates", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chat.Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render([]chat.Message{{Role: "user", Content: "2+2?"}}, chat.Vars{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if Detect(string(src), "qwen2") != Think || !StartsInThink(out) {
		t.Fatalf("format %v, starts in think %v: prompt %q", Detect(string(src), "qwen2"), StartsInThink(out), out)
	}
	if got := Split(Think, out, "Two and two.\n</think>\n\nFour."); got != (Part{"Two and two.", "Four."}) {
		t.Fatalf("split %+v", got)
	}
}
