package tokenizer

import (
	"fmt"
	"strings"
)

// GGUF tokenizer.ggml.token_type values.
const (
	TypeUndefined   int32 = 0
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Token attributes, as llama.cpp's llama_token_attr bit set.
const (
	attrUnknown     uint16 = 1 << 0
	attrUnused      uint16 = 1 << 1
	attrNormal      uint16 = 1 << 2
	attrControl     uint16 = 1 << 3
	attrUserDefined uint16 = 1 << 4
	attrByte        uint16 = 1 << 5
	attrLStrip      uint16 = 1 << 7
	attrRStrip      uint16 = 1 << 8
)

// Vocab is the tokenizer metadata of a GGUF file (the tokenizer.ggml.* keys),
// decoupled from the file so that tests can build one directly. Absent
// optional keys are nil / missing from SpecialIDs, exactly as in the file.
type Vocab struct {
	Model  string // tokenizer.ggml.model: "llama" (SPM), "gpt2" (byte-level BPE) or "gemma4" (SentencePiece-style BPE)
	Pre    string // tokenizer.ggml.pre; "" when absent
	Name   string // general.name (llama.cpp keys per-token strip flags on it)
	Arch   string // general.architecture
	Tokens []string
	Scores []float32 // optional
	Types  []int32   // optional; all normal when absent
	Merges []string  // required for gpt2

	// SpecialIDs holds the tokenizer.ggml.<name>_token_id keys that are present,
	// by <name>: "bos", "eos", "eot", "eom", "unknown", "seperator", "padding",
	// "mask", "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep",
	// and the deprecated "prefix", "suffix", "middle".
	SpecialIDs map[string]uint64

	AddBOS         *bool // tokenizer.ggml.add_bos_token
	AddEOS         *bool // tokenizer.ggml.add_eos_token
	AddSpacePrefix *bool // tokenizer.ggml.add_space_prefix
}

// specialIDKeys lists the special-token keys in llama.cpp's load order (later
// deprecated aliases overwrite the fim ids).
var specialIDKeys = []string{
	"bos", "eos", "eot", "eom", "unknown", "seperator", "padding", "mask",
	"fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep",
	"prefix", "suffix", "middle",
}

type vocabKind int

const (
	kindSPM vocabKind = iota
	kindBPE
)

// New builds a tokenizer from vocabulary metadata, applying llama.cpp's
// defaults and fix-ups (llama_vocab::impl::load).
func New(v *Vocab) (*Tokenizer, error) {
	t := &Tokenizer{model: v.Model, pre: v.Pre}
	ids := map[string]int32{
		"bos": -1, "eos": -1, "eot": -1, "eom": -1, "unknown": -1, "seperator": -1,
		"padding": -1, "mask": -1, "fim_pre": -1, "fim_suf": -1, "fim_mid": -1,
		"fim_pad": -1, "fim_rep": -1, "fim_sep": -1,
	}
	switch v.Model {
	case "llama":
		t.kind = kindSPM
		ids["bos"], ids["eos"], ids["unknown"] = 1, 2, 0
		t.addSpacePrefix = true
		t.addBOS = true
	case "gpt2", "gemma4":
		t.kind = kindBPE
		ids["bos"], ids["eos"] = 11, 11
		if v.Merges == nil {
			return nil, fmt.Errorf("tokenizer: %s vocabulary without tokenizer.ggml.merges", v.Model)
		}
		if v.Model == "gemma4" {
			// llama.cpp reads the special ids from the file only and forces
			// the pre-tokenizer, whatever tokenizer.ggml.pre says.
			ids["bos"], ids["eos"] = -1, -1
			t.pre, t.spmBPE = "gemma4", true
		}
		if t.pre == "" {
			t.pre = "default" // llama.cpp warns and falls back to the default pre-tokenizer
		}
		spec, ok := preTokenizers[t.pre]
		if !ok {
			return nil, fmt.Errorf("tokenizer: unsupported pre-tokenizer %q (tokenizer.ggml.pre)", t.pre)
		}
		pt, err := compilePreTokenizer(spec)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: pre-tokenizer %q: %w", t.pre, err)
		}
		t.pretok = pt
		t.ignoreMerges = spec.ignoreMerges
		t.addBOS = spec.addBOS
		if spec.noBOS {
			ids["bos"] = -1
		}
	case "":
		return nil, fmt.Errorf("tokenizer: missing tokenizer.ggml.model")
	default:
		return nil, fmt.Errorf("tokenizer: unsupported tokenizer model %q (tokenizer.ggml.model)", v.Model)
	}
	if v.AddSpacePrefix != nil {
		t.addSpacePrefix = *v.AddSpacePrefix
	}

	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: empty tokenizer.ggml.tokens")
	}
	if n > 1<<31-1 {
		return nil, fmt.Errorf("tokenizer: %d tokens exceed the int32 id range", n)
	}
	if v.Scores != nil && len(v.Scores) < n {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.scores has %d entries for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) < n {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type has %d entries for %d tokens", len(v.Types), n)
	}
	t.texts = make([]string, n)
	t.scores = make([]float32, n)
	t.attrs = make([]uint16, n)
	t.toID = make(map[string]int32, n)
	for i, w := range v.Tokens {
		if w == "" {
			w = fmt.Sprintf("[EMPTY_%d]", i)
		}
		if prev, dup := t.toID[w]; dup {
			return nil, fmt.Errorf("tokenizer: duplicate token %q in vocabulary (ids %d and %d)", w, prev, i)
		}
		t.toID[w] = int32(i)
		t.texts[i] = w
		if v.Scores != nil {
			t.scores[i] = v.Scores[i]
		}
		t.attrs[i] = attrNormal
		if v.Types != nil {
			t.attrs[i] = attrFromType(v.Types[i])
		}
	}

	if t.kind == kindBPE {
		t.indexMerges(v.Merges)
	}

	for _, k := range specialIDKeys {
		name := k
		switch k {
		case "prefix":
			name = "fim_pre"
		case "suffix":
			name = "fim_suf"
		case "middle":
			name = "fim_mid"
		}
		if id := ids[name]; id >= int32(n) {
			ids[name] = -1 // default out of range: disabled
		}
		if nv, ok := v.SpecialIDs[k]; ok && nv < uint64(n) {
			ids[name] = int32(nv)
		}
	}
	if v.AddBOS != nil {
		t.addBOS = *v.AddBOS
	}
	if v.AddEOS != nil {
		t.addEOS = *v.AddEOS
	}
	if t.addBOS && ids["bos"] < 0 {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set")
	}
	if t.addEOS && ids["eos"] < 0 {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set")
	}

	t.detectSpecialTokens(ids)
	t.bos, t.eos, t.eot, t.eom, t.unk = ids["bos"], ids["eos"], ids["eot"], ids["eom"], ids["unknown"]
	t.buildSpecialCache()
	t.buildPieces()
	t.applyNamedStripFlags(v)
	t.buildByteTokens()
	return t, nil
}

func attrFromType(tt int32) uint16 {
	switch tt {
	case TypeNormal:
		return attrNormal
	case TypeUnknown:
		return attrUnknown
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUserDefined
	case TypeUnused:
		return attrUnused
	case TypeByte:
		return attrByte
	}
	return 0
}

type mergePair struct{ left, right string }

func idPair(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

// indexMerges splits each "left right" merge at the first space after the
// first byte; the first occurrence of a pair wins, as with llama.cpp's
// map::emplace. Pairs of two tokens are keyed by id (the fast path); the rest
// by text, since llama.cpp looks merges up by text.
func (t *Tokenizer) indexMerges(merges []string) {
	t.idRanks = make(map[uint64]int32, len(merges))
	t.strRanks = make(map[mergePair]int32)
	for i, m := range merges {
		var p mergePair
		if len(m) > 1 {
			if k := strings.IndexByte(m[1:], ' '); k >= 0 {
				p = mergePair{m[:k+1], m[k+2:]}
			}
		}
		l, lok := t.toID[p.left]
		r, rok := t.toID[p.right]
		if lok && rok {
			if _, dup := t.idRanks[idPair(l, r)]; !dup {
				t.idRanks[idPair(l, r)] = int32(i)
			}
		} else if _, dup := t.strRanks[p]; !dup {
			t.strRanks[p] = int32(i)
		}
	}
}
