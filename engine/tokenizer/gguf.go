package tokenizer

import (
	"fmt"

	"nibble/engine/gguf"
)

// FromGGUF builds the tokenizer described by a GGUF file's tokenizer.ggml.*
// metadata.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, err := VocabFromGGUF(f)
	if err != nil {
		return nil, err
	}
	return New(v)
}

// VocabFromGGUF reads the tokenizer metadata without building a tokenizer.
func VocabFromGGUF(f *gguf.File) (*Vocab, error) {
	const p = "tokenizer.ggml."
	has := func(key string) bool { _, ok := f.KV[key]; return ok }
	v := &Vocab{SpecialIDs: map[string]uint64{}}
	var ok bool
	if v.Model, ok = f.String(p + "model"); !ok {
		return nil, fmt.Errorf("tokenizer: missing or non-string %smodel", p)
	}
	if has(p + "pre") {
		if v.Pre, ok = f.String(p + "pre"); !ok {
			return nil, fmt.Errorf("tokenizer: %spre is not a string", p)
		}
	}
	v.Name, _ = f.String("general.name")
	v.Arch, _ = f.String("general.architecture")
	if v.Tokens, ok = f.Strings(p + "tokens"); !ok {
		return nil, fmt.Errorf("tokenizer: missing or non-string-array %stokens", p)
	}
	if has(p + "scores") {
		if v.Scores, ok = f.Float32s(p + "scores"); !ok {
			return nil, fmt.Errorf("tokenizer: %sscores is not a numeric array", p)
		}
	}
	if has(p + "token_type") {
		if v.Types, ok = f.Int32s(p + "token_type"); !ok {
			return nil, fmt.Errorf("tokenizer: %stoken_type is not an int32 array", p)
		}
	}
	if has(p + "merges") {
		if v.Merges, ok = f.Strings(p + "merges"); !ok {
			return nil, fmt.Errorf("tokenizer: %smerges is not a string array", p)
		}
	}
	for _, k := range specialIDKeys {
		key := p + k + "_token_id"
		if id, ok := f.Uint(key); ok {
			v.SpecialIDs[k] = id
		} else if has(key) {
			// llama.cpp reads these as uint32; a negative value means "none".
			if i, ok := f.Int(key); !ok || i >= 0 {
				return nil, fmt.Errorf("tokenizer: %s is not an integer", key)
			}
		}
	}
	for key, dst := range map[string]**bool{
		p + "add_bos_token":    &v.AddBOS,
		p + "add_eos_token":    &v.AddEOS,
		p + "add_space_prefix": &v.AddSpacePrefix,
	} {
		if !has(key) {
			continue
		}
		b, ok := f.Bool(key)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s is not a bool", key)
		}
		*dst = &b
	}
	return v, nil
}
