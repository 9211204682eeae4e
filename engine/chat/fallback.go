package chat

import (
	"fmt"
	"strings"
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

	// Llama 2 chat: the system prompt sits in <<SYS>> inside the first [INST].
	"llama2": `{% if messages and messages[0].role == 'system' %}{% set sys = messages[0].content %}{% set msgs = messages[1:] %}{% else %}{% set sys = '' %}{% set msgs = messages %}{% endif %}
{% for m in msgs %}
{% if m.role == 'user' %}{{ bos_token }}[INST] {% if loop.first and sys %}<<SYS>>
{{ sys | trim }}
<</SYS>>

{% endif %}{{ m.content | trim }} [/INST]{% elif m.role == 'assistant' %} {{ m.content | trim }} {{ eos_token }}{% endif %}
{% endfor %}`,

	// Mistral Instruct v0.1-v0.3: no system role; a system prompt is prepended to the first user
	// turn.
	"mistral": `{% if messages and messages[0].role == 'system' %}{% set sys = messages[0].content %}{% set msgs = messages[1:] %}{% else %}{% set sys = '' %}{% set msgs = messages %}{% endif %}
{{ bos_token }}{% for m in msgs %}
{% if m.role == 'user' %}[INST] {% if loop.first and sys %}{{ sys }}

{% endif %}{{ m.content }} [/INST]{% elif m.role == 'assistant' %}{{ m.content }}{{ eos_token }}{% endif %}
{% endfor %}`,

	// Gemma: assistant is "model"; Gemma has no system role, so a system prompt opens the first
	// user turn (as the Gemma 3 template does) instead of failing like Gemma 2's.
	"gemma": `{% if messages and messages[0].role == 'system' %}{% set sys = messages[0].content | trim %}{% set msgs = messages[1:] %}{% else %}{% set sys = '' %}{% set msgs = messages %}{% endif %}
{{ bos_token }}{% for m in msgs %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}
{% if loop.first and sys %}{{ sys }}

{% endif %}{{ m.content | trim }}<end_of_turn>
{% endfor %}{% if add_generation_prompt %}<start_of_turn>model
{% endif %}`,

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

// Special-token texts that identify a chat format; ForModel probes the vocabulary for them and
// passes the ones present to Fallback as hints.
const (
	HintLlama3 = "<|start_header_id|>"
	HintChatML = "<|im_start|>"
	HintGemma  = "<start_of_turn>"
	HintPhi3   = "<|assistant|>"
	HintInst   = "[INST]"
)

var allHints = []string{HintLlama3, HintChatML, HintGemma, HintPhi3, HintInst}

// Fallback picks a built-in template for a model without one. The rule, first match wins:
//
//  1. a hint (a special token present in the vocabulary) decides: "<|start_header_id|>" →
//     llama3, "<|im_start|>" → chatml, "<start_of_turn>" → gemma, "<|assistant|>" → phi3;
//  2. the architecture (general.architecture): gemma* → gemma, phi3 → phi3, qwen* → chatml,
//     mistral* → mistral, llama → mistral when "[INST]" is a single token (Mistral's
//     vocabularies have it, Llama 2's does not) else llama2;
//  3. anything else → chatml, as llama.cpp does.
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
	case has(HintLlama3):
		return "llama3"
	case has(HintChatML):
		return "chatml"
	case has(HintGemma):
		return "gemma"
	case has(HintPhi3):
		return "phi3"
	}
	arch = strings.ToLower(arch)
	switch {
	case strings.HasPrefix(arch, "gemma"):
		return "gemma"
	case arch == "phi3":
		return "phi3"
	case strings.HasPrefix(arch, "qwen"):
		return "chatml"
	case strings.HasPrefix(arch, "mistral"):
		return "mistral"
	case arch == "llama":
		if has(HintInst) {
			return "mistral"
		}
		return "llama2"
	}
	return "chatml"
}

// ForModel returns the model's own template when source is non-empty, else the Fallback for arch
// with hints from tokenTexts (reports whether a token with that exact text is in the vocabulary;
// may be nil).
func ForModel(source, arch string, tokenTexts func(string) bool) (*Template, error) {
	if source != "" {
		return Parse(source)
	}
	var hints []string
	if tokenTexts != nil {
		for _, h := range allHints {
			if tokenTexts(h) {
				hints = append(hints, h)
			}
		}
	}
	return Fallback(arch, hints...), nil
}
