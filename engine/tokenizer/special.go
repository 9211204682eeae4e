package tokenizer

import (
	"sort"
	"strings"

	"nibble/engine/family"
)

// Texts llama.cpp uses to find special tokens that the metadata does not name.
// llama.cpp walks an unordered map and takes the first hit; we take the first
// text in list order that exists, which is deterministic.
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eomTexts    = []string{"<|eom_id|>"}
	fimPreTexts = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}
	fimSufTexts = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}
	fimMidTexts = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}
	fimPadTexts = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	fimRepTexts = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTexts = []string{"<|file_sep|>"}

	// Tokens that end generation, matched by text.
	eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
		"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
		"[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~[",
	}
)

// detectSpecialTokens fills unset EOT/EOM/FIM ids from token texts, builds the
// end-of-generation set and applies llama.cpp's attribute overrides.
func (t *Tokenizer) detectSpecialTokens(ids map[string]int32) {
	detect := func(name string, texts []string) {
		if ids[name] >= 0 {
			return
		}
		for _, s := range texts {
			if id, ok := t.toID[s]; ok {
				ids[name] = id
				t.attrs[id] |= attrControl
				return
			}
		}
	}
	detect("eot", eotTexts)
	detect("eom", eomTexts)
	detect("fim_pre", fimPreTexts)
	detect("fim_suf", fimSufTexts)
	detect("fim_mid", fimMidTexts)
	detect("fim_pad", fimPadTexts)
	detect("fim_rep", fimRepTexts)
	detect("fim_sep", fimSepTexts)

	t.eog = make(map[int32]bool)
	for _, k := range []string{"fim_pad", "fim_rep", "fim_sep"} {
		if id := ids[k]; id >= 0 {
			t.eog[id] = true
		}
	}
	for _, s := range eogTexts {
		id, ok := t.toID[s]
		if !ok {
			continue
		}
		t.eog[id] = true
		// llama.cpp also forces these to control type. We leave "</s>" alone:
		// the reference llama.cpp (c392e5094) did not list it, and forcing it
		// would stop phi-3's user-defined "</s>" from being matched in text.
		if s != "</s>" {
			t.attrs[id] |= attrControl
		}
	}
	// gpt-oss: these must always be rendered and matched as user-defined.
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if id, ok := t.toID[s]; ok {
			t.attrs[id] = attrUserDefined
		}
	}
	for _, k := range []string{"eos", "eot", "eom"} {
		if id := ids[k]; id >= 0 {
			t.eog[id] = true
		}
	}
	// o200k_harmony / solar-open: "<|end|>" is not an end of generation there.
	has := func(s string) bool { id, ok := t.toID[s]; return ok && t.eog[id] }
	if has("<|end|>") && ((has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>"))) {
		id := t.toID["<|end|>"]
		delete(t.eog, id)
		t.attrs[id] = attrUserDefined
	}
	// gemma4 / paddleocr: "</s>" is an ordinary token when "<|tool_response>" exists.
	if has("<|tool_response>") && has("</s>") {
		id := t.toID["</s>"]
		delete(t.eog, id)
		t.attrs[id] = attrNormal
	}
}

// buildSpecialCache lists the tokens that the partition step matches in raw
// text (control, user-defined, unknown), longest first. llama.cpp uses an
// unstable sort; ties are broken by id here.
func (t *Tokenizer) buildSpecialCache() {
	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	sort.SliceStable(t.special, func(i, j int) bool {
		return len(t.texts[t.special[i]]) > len(t.texts[t.special[j]])
	})
}

// familyVocab is the tokenizer overrides of the first registered family
// (engine/family) whose Vocab.Names occur in the lower-cased model name, or
// nil.
func familyVocab(name string) *family.Vocab {
	for _, f := range family.All() {
		for _, sub := range f.Vocab.Names {
			if strings.Contains(name, sub) {
				return &f.Vocab
			}
		}
	}
	return nil
}

// applyNamedStripFlags sets the lstrip/rstrip attributes llama.cpp derives from
// the model name, pre-tokenizer and architecture: the families' overrides from
// the family table, those of encoders the engine does not run here.
func (t *Tokenizer) applyNamedStripFlags(v *Vocab) {
	set := func(text string, flag uint16, on bool) {
		id, ok := t.toID[text]
		if !ok {
			return
		}
		if on {
			t.attrs[id] |= flag
		} else {
			t.attrs[id] &^= flag
		}
	}
	name := strings.ToLower(v.Name)
	containsAny := func(s string, subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	fv := familyVocab(name)
	switch {
	case containsAny(v.Pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || containsAny(v.Arch, "nomic-bert-moe", "jina-bert-v3"):
		set("<mask>", attrLStrip, true)
	case fv != nil:
		if fv.RStripSpecials {
			for _, id := range t.special {
				t.attrs[id] |= attrRStrip
			}
		}
		for _, s := range fv.RStrip {
			set(s, attrRStrip, true)
		}
		for _, s := range fv.KeepRight {
			set(s, attrRStrip, false)
		}
	case containsAny(name, "modern-bert"):
		set("[MASK]", attrLStrip, true)
	}
}
