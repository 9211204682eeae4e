// Package tokenizer implements the SentencePiece (tokenizer.ggml.model "llama")
// and byte-level BPE ("gpt2") tokenizers of GGUF files, matching llama.cpp's
// llama-vocab.cpp token for token.
package tokenizer

import "slices"

// Tokenizer encodes text to token ids and back. It is immutable after
// construction and safe for concurrent use.
type Tokenizer struct {
	model, pre string
	kind       vocabKind

	texts  []string
	scores []float32
	attrs  []uint16
	toID   map[string]int32

	idRanks      map[uint64]int32    // BPE merge ranks of token pairs, by idPair
	strRanks     map[mergePair]int32 // merge ranks where a side is not a token
	pretok       *preTokenizer
	ignoreMerges bool
	// spmBPE is SentencePiece-style BPE (tokenizer model "gemma4", llama.cpp's
	// LLAMA_VOCAB_PRE_TYPE_GEMMA4): spaces become ▁ before merging, merges
	// run over the raw UTF-8 characters (no GPT-2 byte alphabet), a piece
	// with no token falls back to <0xXX> byte tokens, and a run of newlines
	// that is a token is taken whole.
	spmBPE bool

	bos, eos, eot, eom, unk int32
	addBOS, addEOS          bool
	addSpacePrefix          bool
	eog                     map[int32]bool

	special    []int32 // partitioned out of raw text, longest first
	byteTokens [256]int32
	pieces     []byte
	pieceEnd   []uint32 // pieces[pieceEnd[id-1]:pieceEnd[id]] is the piece of id
}

// BOS returns the beginning-of-sequence token id, or -1.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS returns the end-of-sequence token id, or -1.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT returns the end-of-turn token id, or -1 if none.
func (t *Tokenizer) EOT() int32 { return t.eot }

// IsEOG reports whether id ends generation (EOS, EOT, EOM and the tokens
// llama.cpp recognises by text, such as <|im_end|> or <end_of_turn>).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// EOGTokens lists the end-of-generation tokens, in id order.
func (t *Tokenizer) EOGTokens() []int32 {
	ids := make([]int32, 0, len(t.eog))
	for id, ok := range t.eog {
		if ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// AddBOS reports whether Encode(…, addSpecial=true, …) prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode(…, addSpecial=true, …) appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.texts) }

// TokenID returns the id of the token whose vocabulary text is text.
func (t *Tokenizer) TokenID(text string) (int32, bool) {
	id, ok := t.toID[text]
	return id, ok
}

// TokenText returns the vocabulary text of id ("" if out of range).
func (t *Tokenizer) TokenText(id int32) string {
	if !t.valid(id) {
		return ""
	}
	return t.texts[id]
}

// Model returns tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (BPE) or
// "gemma4" (SentencePiece-style BPE).
func (t *Tokenizer) Model() string { return t.model }

// Pre returns the pre-tokenizer name in effect ("default" for a BPE vocabulary
// without tokenizer.ggml.pre; whatever the file says for SentencePiece).
func (t *Tokenizer) Pre() string { return t.pre }

func (t *Tokenizer) valid(id int32) bool { return id >= 0 && int(id) < len(t.texts) }

// IsControl reports whether id is a control token (rendered by Piece, but not
// produced from text unless parseSpecial is set).
func (t *Tokenizer) IsControl(id int32) bool { return t.valid(id) && t.attrs[id]&attrControl != 0 }
