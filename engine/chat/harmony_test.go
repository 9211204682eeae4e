package chat

import (
	"os"
	"path/filepath"
	"testing"
)

type harmonyGolden struct {
	Conversation        string
	AddGenerationPrompt bool `json:"add_generation_prompt"`
	Out                 string
}

var harmonyConversations = map[string][]Message{
	"system":   goldenConversations["system"],
	"nosystem": goldenConversations["nosystem"],
	"answered": {{Role: "user", Content: "Hello"}, {Role: "assistant", Content: "Hi there"}},
}

// gpt-oss's own chat template (what its GGUFs carry) renders as jinja2 does
// (testdata/gen_harmony.py), with and without a generation prompt.
func TestHarmonyTemplateMatchesJinja2(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "openai-gpt-oss-120b.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := Parse(string(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	var golden []harmonyGolden
	loadJSON(t, filepath.Join("testdata", "harmony.golden.json"), &golden)
	if len(golden) != 2*len(harmonyConversations) {
		t.Fatalf("%d golden renders, want %d", len(golden), 2*len(harmonyConversations))
	}
	for _, g := range golden {
		v := Vars{BOS: "<|startoftext|>", EOS: "<|return|>", AddGenerationPrompt: g.AddGenerationPrompt, Now: fixedClock}
		out, err := tpl.Render(harmonyConversations[g.Conversation], v)
		if err != nil {
			t.Fatalf("%s gen=%v: %v", g.Conversation, g.AddGenerationPrompt, err)
		}
		if out != g.Out {
			t.Errorf("%s gen=%v:\n got: %q\nwant: %q", g.Conversation, g.AddGenerationPrompt, out, g.Out)
		}
	}
}

// Parenthesized conditionals (gonja parses "A if C else B" only at the top of a tag) render
// as jinja2 renders them (outputs from jinja2 3.1.6).
func TestInlineIfMatchesJinja2(t *testing.T) {
	for src, want := range map[string]string{
		"{{ (1 if true else 2) + 10 }}":                                              "11",
		"{{ ('a' if x is defined else 'b') ~ '!' }}":                                 "b!",
		"{{ ('a' if false else 'b' if true else 'c') }}":                             "b",
		"{{ [('x' if true else 'y'), 2] }}":                                          "['x', 2]",
		"{% macro f(v) %}<{{ v }}>{% endmacro %}{{ f(('p' if messages else 'q')) }}": "<p>",
		"[{{ ('yes' if false) }}]":                                                   "[]",
		"{{ ('a, b' if 'if' in 'gif' else 'no') }}":                                  "a, b",
		"{{ ((1 if true else 2) if false else (3 if false else 4)) }}":               "4",
		"{{ (messages|length if messages else 0) * 2 }}":                             "8",
		"{% if ('u' if messages[1].role == 'user' else '') %}user{% endif %}":        "user",
		"{% set notify = 5 %}{{ (notify if notify else 0) }}":                        "5",
	} {
		tpl, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: parse: %v", src, err)
		}
		out, err := tpl.Render(goldenConversations["system"], goldenVars)
		if err != nil || out != want {
			t.Errorf("%s: got %q, %v; want %q", src, out, err, want)
		}
	}
}

// The built-in harmony format renders plain conversations as gpt-oss's own template does; the
// vocabulary's <|channel|> or the gpt-oss architecture picks it.
func TestHarmonyFallbackMatchesTemplate(t *testing.T) {
	if got := fallbackName("unknown", []string{HintPhi3End, HintHarmony}); got != "harmony" {
		t.Fatalf("<|channel|> in the vocabulary picks %q, want harmony", got)
	}
	if got := fallbackName("gpt-oss", nil); got != "harmony" {
		t.Fatalf("arch gpt-oss picks %q, want harmony", got)
	}
	var golden []harmonyGolden
	loadJSON(t, filepath.Join("testdata", "harmony.golden.json"), &golden)
	tpl := fallbackCache["harmony"]
	for _, g := range golden {
		v := Vars{BOS: "<|startoftext|>", EOS: "<|return|>", AddGenerationPrompt: g.AddGenerationPrompt, Now: fixedClock}
		out, err := tpl.Render(harmonyConversations[g.Conversation], v)
		if err != nil {
			t.Fatalf("%s gen=%v: %v", g.Conversation, g.AddGenerationPrompt, err)
		}
		if out != g.Out {
			t.Errorf("%s gen=%v:\n got: %q\nwant: %q", g.Conversation, g.AddGenerationPrompt, out, g.Out)
		}
	}
}
