package chat

import (
	"slices"
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

// No built-in format drops a message: whatever the shape of the conversation, every
// message's text reaches the prompt once, in the conversation's order (a format without a
// system role merges a system prompt into the next user turn, or gives it a turn of its own).
func TestFallbackKeepsEveryMessage(t *testing.T) {
	sys := func(c string) Message { return Message{"system", c} }
	user := func(c string) Message { return Message{"user", c} }
	asst := func(c string) Message { return Message{"assistant", c} }
	shapes := map[string][]Message{
		"system only":               {sys("S1")},
		"two systems":               {sys("S1"), sys("S2"), user("U1")},
		"two systems only":          {sys("S1"), sys("S2")},
		"system after turns":        {user("U1"), asst("A1"), sys("S1"), user("U2")},
		"system last":               {user("U1"), asst("A1"), sys("S1")},
		"system after user":         {sys("S1"), user("U1"), sys("S2")},
		"system before assistant":   {sys("S1"), user("U1"), sys("S2"), asst("A1"), user("U2")},
		"system then assistant":     {sys("S1"), asst("A1"), user("U1")},
		"systems around every turn": {sys("S1"), user("U1"), sys("S2"), asst("A1"), sys("S3"), user("U2"), sys("S4")},
		"plain":                     {sys("S1"), user("U1"), asst("A1"), user("U2")},
	}
	names := make([]string, 0, len(fallbackSources))
	for name := range fallbackSources {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for shape, msgs := range shapes {
			for _, gen := range []bool{true, false} {
				v := goldenVars
				v.AddGenerationPrompt = gen
				// Distinct texts, none a part of another or of a format's markup.
				conv := make([]Message, len(msgs))
				for i, m := range msgs {
					conv[i] = Message{m.Role, "msg-" + m.Content + "-text"}
				}
				got, err := fallbackCache[name].Render(conv, v)
				if err != nil {
					t.Errorf("%s, %s: %v", name, shape, err)
					continue
				}
				pos := make([]int, len(conv))
				for i, m := range conv {
					if n := strings.Count(got, m.Content); n != 1 {
						t.Errorf("%s, %s (generation prompt %v): %q appears %d times in %q", name, shape, gen, m.Content, n, got)
					}
					pos[i] = strings.Index(got, m.Content)
				}
				// Turns keep their order; a system prompt comes before the next user turn's text
				// (a format without a system role may carry it past an assistant turn into it).
				last := -1
				for i, m := range conv {
					if m.Role != "system" {
						if pos[i] < last {
							t.Errorf("%s, %s (generation prompt %v): %q out of order in %q", name, shape, gen, m.Content, got)
						}
						last = pos[i]
						continue
					}
					for j := i + 1; j < len(conv); j++ {
						if conv[j].Role == "user" {
							if pos[i] > pos[j] {
								t.Errorf("%s, %s (generation prompt %v): %q after the next user turn in %q", name, shape, gen, m.Content, got)
							}
							break
						}
					}
				}
			}
		}
	}
}

// Where a system prompt lands in the formats without a system role.
func TestFallbackPlacesLaterSystemPrompts(t *testing.T) {
	conv := []Message{{"system", "A"}, {"system", "B"}, {"user", "Hi"}, {"assistant", "Yo"}, {"system", "C"}, {"user", "Go"}}
	want := map[string]string{
		"llama2":  "<s>[INST] <<SYS>>\nA\n\nB\n<</SYS>>\n\nHi [/INST] Yo </s><s>[INST] <<SYS>>\nC\n<</SYS>>\n\nGo [/INST]",
		"mistral": "<s>[INST] A\n\nB\n\nHi [/INST]Yo</s>[INST] C\n\nGo [/INST]",
		"gemma": "<s><start_of_turn>user\nA\n\nB\n\nHi<end_of_turn>\n<start_of_turn>model\nYo<end_of_turn>\n" +
			"<start_of_turn>user\nC\n\nGo<end_of_turn>\n<start_of_turn>model\n",
	}
	for name, w := range want {
		got, err := fallbackCache[name].Render(conv, goldenVars)
		if err != nil || got != w {
			t.Errorf("%s:\n got %q, %v\nwant %q", name, got, err, w)
		}
	}
	only := map[string]string{
		"llama2":  "<s>[INST] <<SYS>>\nA\n<</SYS>>\n\n [/INST]",
		"mistral": "<s>[INST] A [/INST]",
		"gemma":   "<s><start_of_turn>user\nA<end_of_turn>\n<start_of_turn>model\n",
	}
	for name, w := range only {
		got, err := fallbackCache[name].Render([]Message{{"system", "A"}}, goldenVars)
		if err != nil || got != w {
			t.Errorf("%s, system only:\n got %q, %v\nwant %q", name, got, err, w)
		}
	}
}
