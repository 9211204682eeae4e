package reasoning

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// pushAll feeds pieces one by one and flushes, joining what came out.
func pushAll(s Splitter, pieces []string) Part {
	var all Part
	for _, p := range pieces {
		got := s.Push(p)
		all.Reasoning += got.Reasoning
		all.Content += got.Content
	}
	got := s.Flush()
	all.Reasoning += got.Reasoning
	all.Content += got.Content
	return all
}

// everySplit yields text cut in two at every byte, and byte by byte.
func everySplit(text string) [][]string {
	out := [][]string{{text}}
	for i := 1; i < len(text); i++ {
		out = append(out, []string{text[:i], text[i:]})
	}
	var bytes []string
	for i := range len(text) {
		bytes = append(bytes, text[i:i+1])
	}
	return append(out, bytes)
}

func TestThinkSplit(t *testing.T) {
	cases := []struct {
		name, prompt, reply string
		want                Part
	}{
		{"qwen3 thinking", "<|im_start|>assistant\n", "<think>\nThe user greets me.\n</think>\n\nHello!",
			Part{"The user greets me.", "Hello!"}},
		{"no think block", "<|im_start|>assistant\n", "Hello <think> is text here",
			Part{"", "Hello <think> is text here"}},
		{"opened in the prompt", "<｜Assistant｜><think>\n", "Let me see.\n</think>\n\nFour.",
			Part{"Let me see.", "Four."}},
		{"thinking off", "<|im_start|>assistant\n<think>\n\n</think>\n\n", "Hi there.",
			Part{"", "Hi there."}},
		{"cut while thinking", "", "<think>\nstill going  ", Part{"still going", ""}},
		{"empty block", "", "<think>\n\n</think>\n\nAnswer", Part{"", "Answer"}},
		{"partial open at the end", "", "  <thi", Part{"", "<thi"}},
		{"blank inside reasoning kept", "", "<think>a \n b</think>c", Part{"a \n b", "c"}},
		{"second think is answer", "", "<think>r</think>x<think>y</think>", Part{"r", "x<think>y</think>"}},
	}
	for _, c := range cases {
		for _, pieces := range everySplit(c.reply) {
			got := pushAll(New(Think, c.prompt), pieces)
			if got != c.want {
				t.Fatalf("%s, pieces %q: got %+v, want %+v", c.name, pieces, got, c.want)
			}
		}
	}
}

// TestThinkStreamsLive checks that reasoning comes out as it is written, not at </think>.
func TestThinkStreamsLive(t *testing.T) {
	s := New(Think, "")
	if got := s.Push("<think>\nFirst"); got.Reasoning != "First" {
		t.Fatalf("first piece: %+v", got)
	}
	if got := s.Push(" second </"); got.Reasoning != " second" {
		t.Fatalf("a partial </think> and the blank before it are held: %+v", got)
	}
	if got := s.Push("think>\n\nAns"); got.Reasoning != "" || got.Content != "Ans" {
		t.Fatalf("answer: %+v", got)
	}
}

func TestStartsInThink(t *testing.T) {
	for prompt, want := range map[string]bool{
		"<｜Assistant｜><think>\n":                        true,
		"assistant\n<think>\n\n</think>\n\n":            false,
		"<think>old</think>user<|im_start|>assistant\n": false,
		"he wrote <think> and more":                     false,
		"":                                              false,
		"prev<think>\nx\n</think>\n\nnext<think>\n   \n\t": true,
	} {
		if got := StartsInThink(prompt); got != want {
			t.Errorf("StartsInThink(%q) = %v, want %v", prompt, got, want)
		}
	}
}

const gptOSSPrompt = "<|start|>system<|message|>You are ChatGPT.\nReasoning: medium<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant"

func TestHarmonySplit(t *testing.T) {
	cases := []struct {
		name, prompt, reply string
		want                Part
	}{
		{"analysis then final", gptOSSPrompt,
			"<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello!",
			Part{"User says hi.", "Hello!"}},
		{"no final channel", gptOSSPrompt,
			"<|channel|>analysis<|message|>Thinking only.<|end|>", Part{"Thinking only.", ""}},
		{"commentary preamble then final", gptOSSPrompt,
			"<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>final<|message|>Done.",
			Part{"a", "Checking.\n\nDone."}},
		{"tool call is not the answer", gptOSSPrompt,
			"<|channel|>analysis<|message|>need weather<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>",
			Part{"need weather\n\n{\"city\":\"Oslo\"}", ""}},
		{"recipient in the role part", gptOSSPrompt,
			"<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>",
			Part{"{}", ""}},
		{"final with return marker", gptOSSPrompt,
			"<|channel|>final<|message|>Just this.<|return|>", Part{"", "Just this."}},
		{"not harmony at all", gptOSSPrompt, "Plain answer.", Part{"", "Plain answer."}},
		{"prompt already on the final channel", "<|start|>assistant<|channel|>final<|message|>",
			"Straight answer", Part{"", "Straight answer"}},
		{"prompt without markup", "", "<|channel|>analysis<|message|>r<|end|>", Part{"r", ""}},
		{"missing end marker", gptOSSPrompt,
			"<|channel|>analysis<|message|>r<|start|>assistant<|channel|>final<|message|>c", Part{"r", "c"}},
		{"partial marker held at the end", gptOSSPrompt,
			"<|channel|>final<|message|>ends with <|e", Part{"", "ends with <|e"}},
	}
	for _, c := range cases {
		for _, pieces := range everySplit(c.reply) {
			got := pushAll(New(Harmony, c.prompt), pieces)
			if got != c.want {
				t.Fatalf("%s, pieces %q: got %+v, want %+v", c.name, pieces, got, c.want)
			}
		}
	}
}

func TestHarmonyStreamsLive(t *testing.T) {
	s := New(Harmony, gptOSSPrompt)
	if got := s.Push("<|channel|>analysis<|message|>Hmm"); got.Reasoning != "Hmm" {
		t.Fatalf("reasoning should stream: %+v", got)
	}
	if got := s.Push(" ok<|en"); got.Reasoning != " ok" {
		t.Fatalf("a partial <|end|> is held: %+v", got)
	}
	if got := s.Push("d|><|start|>assistant<|channel|>final<|message|>Hi"); got != (Part{"", "Hi"}) {
		t.Fatalf("answer: %+v", got)
	}
}

func TestDetectAndControl(t *testing.T) {
	qwen3, err := os.ReadFile("testdata/Qwen-Qwen3-0.6B.jinja")
	if err != nil {
		t.Fatal(err)
	}
	if f := Detect(string(qwen3), "qwen3"); f != Think {
		t.Errorf("Qwen3's template: %v, want think", f)
	}
	if c := ControlOf(string(qwen3)); c != EnableThinking {
		t.Errorf("Qwen3's control: %v", c)
	}
	harmony := "{{- '<|start|>assistant<|channel|>analysis<|message|>' }}Reasoning: {{ reasoning_effort }}"
	if f, c := Detect(harmony, ""), ControlOf(harmony); f != Harmony || c != ReasoningEffort {
		t.Errorf("a harmony template: %v %v", f, c)
	}
	if f := Detect("", "gpt-oss"); f != Harmony {
		t.Errorf("gpt-oss with no template: %v", f)
	}
	if f := Detect("{{ messages }}", "llama"); f != None {
		t.Errorf("llama: %v", f)
	}
	if got := Split(None, "", "<think>x</think>y"); got.Content != "<think>x</think>y" {
		t.Errorf("None keeps everything as the answer: %+v", got)
	}
	if !ValidEffort("high") || ValidEffort("") || ValidEffort("max") {
		t.Error("ValidEffort")
	}
}

// FuzzSplitters checks that the split does not depend on where the stream is cut, that
// no more text comes out than went in, and that a reply with no <think> is all answer.
func FuzzSplitters(f *testing.F) {
	f.Add("<think>\nabc\n</think>\n\nanswer", uint8(3), false)
	f.Add("<|channel|>analysis<|message|>r<|end|><|start|>assistant<|channel|>final<|message|>c", uint8(5), true)
	f.Add("</think><think></think>", uint8(1), false)
	f.Add("<|start|><|channel|><|message|><|end|>", uint8(2), true)
	f.Add("héllo <|e", uint8(4), true)
	f.Fuzz(func(t *testing.T, reply string, step uint8, harmony bool) {
		if !utf8.ValidString(reply) {
			return
		}
		format, prompt := Think, "<|im_start|>assistant\n"
		if harmony {
			format, prompt = Harmony, gptOSSPrompt
		}
		whole := Split(format, prompt, reply)
		n := int(step%16) + 1
		var pieces []string
		for rest := reply; rest != ""; {
			k := min(n, len(rest))
			pieces = append(pieces, rest[:k])
			rest = rest[k:]
		}
		cut := pushAll(New(format, prompt), pieces)
		if cut != whole {
			t.Fatalf("pieces of %d bytes give %+v, whole gives %+v", n, cut, whole)
		}
		if len(whole.Reasoning)+len(whole.Content) > len(reply)+2*strings.Count(reply, "<|") {
			t.Fatalf("more text out than in: %+v from %q", whole, reply)
		}
		if !harmony && !strings.Contains(reply, thinkOpen) && strings.TrimLeft(reply, blank) != whole.Content {
			t.Fatalf("a reply without <think> is all answer: %+v from %q", whole, reply)
		}
	})
}
