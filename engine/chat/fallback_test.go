package chat

import (
	"strings"
	"testing"

	"nibble/engine/family"
)

// Every registered family names built-in formats, so a family added to the table without its
// chat format fails here rather than at a model's first chat.
func TestFamiliesNameBuiltinFormats(t *testing.T) {
	for _, f := range family.All() {
		for i, name := range []string{f.Chat.Template, f.Chat.InstTemplate} {
			if i == 1 && name == "" {
				continue // no [INST] variant
			}
			if fallbackCache[name] == nil {
				t.Errorf("family %s: chat format %q is not a built-in template", f.Name, name)
			}
		}
	}
}

func TestFallbackRule(t *testing.T) {
	cases := []struct {
		arch  string
		hints []string
		want  string
	}{
		{"llama", []string{HintLlama3}, "llama3"},
		{"llama", []string{HintInst}, "mistral"},
		{"llama", nil, "llama2"},
		{"qwen2", nil, "chatml"},
		{"qwen3", nil, "chatml"},
		{"llama", []string{HintChatML}, "chatml"}, // ChatML fine-tune of a Llama base
		{"gemma2", nil, "gemma"},
		{"gemma", nil, "gemma"},
		{"GEMMA3", nil, "gemma"},
		{"phi3", nil, "phi3"},
		{"phi3", []string{HintPhi3}, "phi3"},
		{"mistral", nil, "mistral"},
		{"falcon", nil, "chatml"},
		{"", nil, "chatml"},
		{"unknown", []string{HintGemma}, "gemma"},
		{"gemma4", nil, "gemma4"},
		{"gemma4", []string{HintGemma4, HintGemma}, "gemma4"},
	}
	for _, c := range cases {
		tpl := Fallback(c.arch, c.hints...)
		if tpl == nil || tpl.Name() != c.want {
			t.Errorf("Fallback(%q, %q) = %v, want %s", c.arch, c.hints, tpl, c.want)
		}
	}
}

// Each fallback renders the family's format; these strings are also what jinja2 renders from
// the same template text.
func TestFallbackRender(t *testing.T) {
	want := map[string]string{
		"chatml": "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n" +
			"<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n",
		"llama3": "<s><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
		"llama2":  "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHello [/INST] Hi there </s><s>[INST] How are you? [/INST]",
		"mistral": "<s>[INST] You are helpful.\n\nHello [/INST]Hi there</s>[INST] How are you? [/INST]",
		"gemma": "<s><start_of_turn>user\nYou are helpful.\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n" +
			"<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\n",
		"gemma4": "<s><|turn>system\nYou are helpful.<turn|>\n<|turn>user\nHello<turn|>\n<|turn>model\nHi there<turn|>\n" +
			"<|turn>user\nHow are you?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
		"phi3": "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n" +
			"<|user|>\nHow are you?<|end|>\n<|assistant|>\n", "harmony": "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n" +
			"Knowledge cutoff: 2024-06\nCurrent date: 2024-09-05\n\nReasoning: medium\n\n" +
			"# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>" +
			"<|start|>developer<|message|># Instructions\n\nYou are helpful.\n\n<|end|><|start|>user<|message|>Hello<|end|>" +
			"<|start|>assistant<|channel|>final<|message|>Hi there<|end|><|start|>user<|message|>How are you?<|end|><|start|>assistant",
	}
	if len(want) != len(fallbackSources) {
		t.Fatalf("test covers %d of %d fallbacks", len(want), len(fallbackSources))
	}
	for name, w := range want {
		got, err := fallbackCache[name].Render(goldenConversations["system"], goldenVars)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got != w {
			t.Errorf("%s:\n got %q\nwant %q", name, got, w)
		}
		// without a system message the first turn is the user's
		got, err = fallbackCache[name].Render(goldenConversations["nosystem"], goldenVars)
		if err != nil || strings.Contains(got, "You are helpful") || !strings.Contains(got, "Hello") {
			t.Errorf("%s without system: %q, %v", name, got, err)
		}
		// empty conversation must not fail
		if _, err := fallbackCache[name].Render(nil, goldenVars); err != nil {
			t.Errorf("%s with no messages: %v", name, err)
		}
	}
}

func TestForModel(t *testing.T) {
	tpl, err := ForModel("{{ messages[0].content }}!", "llama", nil)
	if err != nil || tpl.Name() != "gguf" {
		t.Fatalf("ForModel with source: %v, %v", tpl, err)
	}
	if out, _ := tpl.Render([]Message{{"user", "hi"}}, Vars{}); out != "hi!" {
		t.Errorf("rendered %q", out)
	}
	if _, err := ForModel("{% if %}", "llama", nil); err == nil {
		t.Error("bad source: want parse error")
	}
	vocab := map[string]bool{"<|start_header_id|>": true, "<|end_header_id|>": true}
	tpl, err = ForModel("", "llama", func(s string) bool { return vocab[s] })
	if err != nil || tpl.Name() != "llama3" {
		t.Errorf("llama3 vocab: got %v, %v", tpl, err)
	}
	tpl, err = ForModel("", "qwen2", nil)
	if err != nil || tpl.Name() != "chatml" {
		t.Errorf("qwen2: got %v, %v", tpl, err)
	}
}
