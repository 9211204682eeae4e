package chat

import (
	"errors"
	"fmt"
	"strings"

	"nibble/engine/family"
)

// Built-in templates for models whose GGUF carries no tokenizer.chat_template. Each reproduces
// the family's published format for plain system/user/assistant turns (no tools).
var fallbackSources = map[string]string{
	// ChatML (Qwen, many fine-tunes); llama.cpp's default when nothing else is known.
	"chatml": `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`,

	// Llama 3.x without the date header of the 3.1+ templates.
	"llama3": `{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>

{{ m.content | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}`,

	// Llama 2 chat: no system role; system prompts sit in <<SYS>> inside the next [INST] (the
	// first one's, for the usual leading system prompt). Consecutive ones are merged, and one
	// that no user turn follows gets an [INST] of its own: no message is dropped.
	"llama2": `{% set ns = namespace(sys='') %}
{% for m in messages %}
{% if m.role == 'system' %}{% set ns.sys = ns.sys ~ ('\n\n' if ns.sys else '') ~ (m.content | trim) %}
{% elif m.role == 'user' %}{{ bos_token }}[INST] {% if ns.sys %}<<SYS>>
{{ ns.sys }}
<</SYS>>

{% set ns.sys = '' %}{% endif %}{{ m.content | trim }} [/INST]{% elif m.role == 'assistant' %} {{ m.content | trim }} {{ eos_token }}{% endif %}
{% endfor %}
{% if ns.sys %}{{ bos_token }}[INST] <<SYS>>
{{ ns.sys }}
<</SYS>>

 [/INST]{% endif %}`,

	// Mistral Instruct v0.1-v0.3: no system role; a system prompt is prepended to the next user
	// turn (the first one, for a leading system prompt). Consecutive ones are merged, and one
	// that no user turn follows becomes an [INST] of its own: no message is dropped.
	"mistral": `{% set ns = namespace(sys='') %}
{{ bos_token }}{% for m in messages %}
{% if m.role == 'system' %}{% set ns.sys = ns.sys ~ ('\n\n' if ns.sys else '') ~ m.content %}
{% elif m.role == 'user' %}[INST] {% if ns.sys %}{{ ns.sys }}

{% set ns.sys = '' %}{% endif %}{{ m.content }} [/INST]{% elif m.role == 'assistant' %}{{ m.content }}{{ eos_token }}{% endif %}
{% endfor %}
{% if ns.sys %}[INST] {{ ns.sys }} [/INST]{% endif %}`,

	// Gemma: assistant is "model"; Gemma has no system role, so a system prompt opens the next
	// user turn (the first one for a leading system prompt, as the Gemma 3 template does)
	// instead of failing like Gemma 2's. Consecutive ones are merged, and one that no user turn
	// follows becomes a user turn of its own: no message is dropped.
	"gemma": `{% set ns = namespace(sys='') %}
{{ bos_token }}{% for m in messages %}
{% if m.role == 'system' %}{% set ns.sys = ns.sys ~ ('\n\n' if ns.sys else '') ~ (m.content | trim) %}
{% else %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}
{% if ns.sys and m.role == 'user' %}{{ ns.sys }}

{% set ns.sys = '' %}{% endif %}{{ m.content | trim }}<end_of_turn>
{% endif %}
{% endfor %}
{% if ns.sys %}<start_of_turn>user
{{ ns.sys }}<end_of_turn>
{% endif %}
{% if add_generation_prompt %}<start_of_turn>model
{% endif %}`,

	// gpt-oss's harmony format for plain turns, as its own template renders them: the system
	// header (identity, knowledge cutoff, date, reasoning effort medium, channels), a system
	// prompt as the developer's instructions, each answer on the final channel (the last one
	// closed with <|return|> when no generation prompt follows). Consecutive system prompts
	// make one developer message; a later one is a developer message in its place.
	"harmony": `<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: {{ strftime_now('%Y-%m-%d') }}

Reasoning: medium

# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>
{%- set ns = namespace(dev='') %}
{%- for m in messages %}{% if m.role in ['system', 'developer'] %}{% if m.content %}{% set ns.dev = ns.dev ~ ('\n\n' if ns.dev else '') ~ m.content %}{% endif %}{% else %}{% if ns.dev %}<|start|>developer<|message|># Instructions

{{ ns.dev }}

<|end|>{% set ns.dev = '' %}{% endif %}{% if m.role == 'assistant' %}<|start|>assistant<|channel|>final<|message|>{{ m.content }}{{ '<|return|>' if loop.last and not add_generation_prompt else '<|end|>' }}{% elif m.role == 'user' %}<|start|>user<|message|>{{ m.content }}<|end|>{% endif %}{% endif %}{% endfor %}
{%- if ns.dev %}<|start|>developer<|message|># Instructions

{{ ns.dev }}

<|end|>{% endif %}
{%- if add_generation_prompt %}<|start|>assistant{% endif %}`,
	// Gemma 4: turns between <|turn> and <turn|>, a system role of its own, and (thinking
	// off, as the Gemma 4 template renders by default) an empty thought channel after the
	// generation prompt.
	"gemma4": `{{ bos_token }}{% if messages and messages[0].role == 'system' %}<|turn>system
{{ messages[0].content | trim }}<turn|>
{% set msgs = messages[1:] %}{% else %}{% set msgs = messages %}{% endif %}{% for m in msgs %}<|turn>{{ 'model' if m.role == 'assistant' else m.role }}
{{ m.content | trim }}<turn|>
{% endfor %}{% if add_generation_prompt %}<|turn>model
<|channel>thought
<channel|>{% endif %}`,

	// Phi-3 / Phi-3.5.
	"phi3": `{% for m in messages %}<|{{ m.role }}|>
{{ m.content }}<|end|>
{% endfor %}{% if add_generation_prompt %}<|assistant|>
{% else %}{{ eos_token }}{% endif %}`,
}

var fallbackCache = map[string]*Template{}

func init() {
	for name, src := range fallbackSources {
		t, err := parseNamed(name, src)
		if err != nil {
			panic(fmt.Sprintf("chat: built-in template %s: %v", name, err))
		}
		fallbackCache[name] = t
	}
}

// Special-token texts that identify a chat format; ForModel and ForModelOrFallback probe the
// vocabulary for them and pass the ones present to Fallback as hints.
const (
	HintLlama3    = "<|start_header_id|>"
	HintLlama3EOT = "<|eot_id|>"
	HintChatML    = "<|im_start|>"
	HintGemma     = "<start_of_turn>"
	HintGemma4    = "<|turn>"
	HintPhi3      = "<|assistant|>"
	HintPhi3User  = "<|user|>"
	HintPhi3End   = "<|end|>"
	HintInst      = "[INST]"
	HintHarmony   = "<|channel|>"
)

var allHints = []string{HintLlama3, HintLlama3EOT, HintChatML, HintGemma4, HintGemma, HintPhi3, HintPhi3User, HintPhi3End, HintInst, HintHarmony}

// Fallback picks a built-in template for a model without a usable one. The rule, first match wins:
//
//  1. a hint (a special token present in the vocabulary) decides: "<|start_header_id|>" or
//     "<|eot_id|>" → llama3, "<|im_start|>" → chatml, "<|turn>" → gemma4, "<start_of_turn>" → gemma,
//     "<|channel|>" → harmony (gpt-oss), "<|assistant|>" or both "<|user|>" and "<|end|>" →
//     phi3 ("<|user|>" alone also appears in other vocabularies);
//  2. the architecture (general.architecture, any case): a registered family's Chat
//     (engine/family): its InstTemplate when "[INST]" is a single token and it has one
//     (llama → mistral: Mistral's vocabularies have it, Llama 2's does not), else its Template;
//  3. an architecture outside the family table whose name starts like a format's relatives
//     (relativeFormats: gemma* → gemma, qwen* → chatml, mistral* → mistral);
//  4. anything else → chatml, as llama.cpp does.
func Fallback(arch string, hints ...string) *Template {
	return fallbackCache[fallbackName(arch, hints)]
}

func fallbackName(arch string, hints []string) string {
	has := func(h string) bool {
		for _, x := range hints {
			if x == h {
				return true
			}
		}
		return false
	}
	switch {
	case has(HintLlama3) || has(HintLlama3EOT):
		return "llama3"
	case has(HintChatML):
		return "chatml"
	case has(HintGemma4):
		return "gemma4"
	case has(HintGemma):
		return "gemma"
	case has(HintHarmony):
		return "harmony"
	case has(HintPhi3) || has(HintPhi3User) && has(HintPhi3End):
		return "phi3"
	}
	arch = strings.ToLower(arch)
	if f, ok := family.Lookup(arch); ok {
		if f.Chat.InstTemplate != "" && has(HintInst) {
			return f.Chat.InstTemplate
		}
		return f.Chat.Template
	}
	for _, r := range relativeFormats {
		if strings.HasPrefix(arch, r.prefix) {
			return r.format
		}
	}
	return "chatml"
}

// relativeFormats are the formats of architectures the engine does not run (so not in the
// family table) but whose names say which format their files use: gemma3n, qwen2moe,
// mistral3 and the like.
var relativeFormats = []struct{ prefix, format string }{
	{"gemma", "gemma"}, {"qwen", "chatml"}, {"mistral", "mistral"},
}

// ForModel returns the model's own template when source is non-empty, else the Fallback for arch
// with hints from tokenTexts (reports whether a token with that exact text is in the vocabulary;
// may be nil). A source that does not parse is an error; ForModelOrFallback falls back instead.
func ForModel(source, arch string, tokenTexts func(string) bool) (*Template, error) {
	if source != "" {
		return Parse(source)
	}
	return Fallback(arch, vocabHints(tokenTexts)...), nil
}

// ForModelOrFallback always returns a usable template t: the GGUF's own (src, the key
// tokenizer.chat_template) when it parses, else the built-in one Fallback picks for arch
// (general.architecture) and the special tokens hasToken finds in the vocabulary (hasToken
// reports whether a token with that exact text exists; nil means none). The vocabulary matters
// most here: a Llama-3 GGUF has arch "llama" like Llama 2, and only its tokens tell the formats
// apart. problem is non-nil only when src was given but rejected: it wraps the parse error and
// names the fallback used, for the app to show. A missing src is not a problem (older
// conversions have none); t.Name() says which fallback was chosen.
func ForModelOrFallback(src, arch string, hasToken func(string) bool) (t *Template, problem error) {
	if src == "" {
		return Fallback(arch, vocabHints(hasToken)...), nil
	}
	t, err := Parse(src)
	if err == nil {
		return t, nil
	}
	t = Fallback(arch, vocabHints(hasToken)...)
	// gonja's error quotes the whole template (kilobytes) before its cause, which has the
	// message, line and column: keep the cause.
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), "failed to parse template '") {
			if cause := errors.Unwrap(e); cause != nil {
				err = cause
			}
			break
		}
	}
	return t, fmt.Errorf("the model's chat template does not parse, using the built-in %s format instead: %w", t.Name(), err)
}

// vocabHints lists the hint tokens present in a vocabulary (hasToken may be nil).
func vocabHints(hasToken func(string) bool) []string {
	if hasToken == nil {
		return nil
	}
	var hints []string
	for _, h := range allHints {
		if hasToken(h) {
			hints = append(hints, h)
		}
	}
	return hints
}
