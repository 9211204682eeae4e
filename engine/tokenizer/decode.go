package tokenizer

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// buildPieces precomputes llama_token_to_piece(id, special=true) for every id.
func (t *Tokenizer) buildPieces() {
	t.pieceEnd = make([]uint32, len(t.texts))
	for id, text := range t.texts {
		t.pieces = append(t.pieces, t.computePiece(int32(id), text)...)
		t.pieceEnd[id] = uint32(len(t.pieces))
	}
}

func (t *Tokenizer) computePiece(id int32, text string) []byte {
	a := t.attrs[id]
	switch {
	case a&(attrUnknown|attrControl|attrUserDefined) != 0:
		return []byte(text)
	case a&attrNormal != 0:
		if t.kind == kindSPM || t.spmBPE {
			return []byte(strings.ReplaceAll(text, "\u2581", " "))
		}
		return decodeByteLevel(text)
	case a&attrByte != 0:
		return []byte{tokenByte(text)}
	}
	return nil // unused and undefined tokens render as nothing
}

// tokenByte parses "<0xAB>" like llama.cpp (strtol on the two hex digits).
func tokenByte(text string) byte {
	if len(text) < 5 {
		return 0
	}
	v, _ := strconv.ParseUint(text[3:5], 16, 8)
	return byte(v)
}

// Piece returns the bytes of one token as llama_token_to_piece(special=true)
// does: control and user-defined tokens as their text, byte tokens as that
// byte, SentencePiece ▁ as a space, byte-level BPE decoded to raw bytes. It
// returns nil for an id outside the vocabulary. The caller owns the result.
func (t *Tokenizer) Piece(id int32) []byte {
	p := t.piece(id)
	if p == nil {
		return nil
	}
	return append([]byte{}, p...)
}

// piece is Piece without the copy, for internal use.
func (t *Tokenizer) piece(id int32) []byte {
	if !t.valid(id) {
		return nil
	}
	lo := uint32(0)
	if id > 0 {
		lo = t.pieceEnd[id-1]
	}
	return t.pieces[lo:t.pieceEnd[id]:t.pieceEnd[id]]
}

// Decode concatenates the pieces of ids, dropping the leading space of the
// first piece when the vocabulary adds a space prefix (SentencePiece), as
// llama_detokenize(remove_special=false, unparse_special=true) does. Unlike
// llama_detokenize it does not apply clean_up_tokenization_spaces, so it
// round-trips Encode and agrees with StreamDecoder. Invalid ids render as nothing.
func (t *Tokenizer) Decode(ids []int32) string {
	var b []byte
	for i, id := range ids {
		b = append(b, t.pieceStripped(id, i == 0)...)
	}
	return string(b)
}

// pieceStripped applies detokenize's one-space lstrip to the first token.
func (t *Tokenizer) pieceStripped(id int32, first bool) []byte {
	p := t.piece(id)
	if first && t.addSpacePrefix && len(p) > 0 && p[0] == ' ' {
		p = p[1:]
	}
	return p
}

// Detokenize is llama_detokenize: removeSpecial drops a leading BOS and a
// trailing EOS the vocabulary adds, unparseSpecial renders control tokens (else
// they are dropped), and BPE vocabularies get llama.cpp's cleanup of spaces
// before punctuation and contractions (clean_up_tokenization_spaces).
func (t *Tokenizer) Detokenize(ids []int32, removeSpecial, unparseSpecial bool) string {
	removeSpace := t.addSpacePrefix
	if removeSpecial && t.addBOS && len(ids) > 0 && ids[0] == t.bos {
		removeSpace = false
		ids = ids[1:]
	}
	if removeSpecial && t.addEOS && len(ids) > 0 && ids[len(ids)-1] == t.eos {
		ids = ids[:len(ids)-1]
	}
	var b []byte
	for _, id := range ids {
		strip := removeSpace
		removeSpace = false // even when this token renders as nothing
		if !t.valid(id) || (!unparseSpecial && t.attrs[id]&(attrUnknown|attrControl) != 0) {
			continue
		}
		p := t.piece(id)
		if strip && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		b = append(b, p...)
	}
	if t.cleanSpaces() {
		b = cleanTokenizationSpaces(b)
	}
	return string(b)
}

// cleanSpaces is llama.cpp's clean_spaces flag: on for BPE, except the
// pre-tokenizers that turn it off.
func (t *Tokenizer) cleanSpaces() bool {
	if t.kind != kindBPE {
		return false
	}
	switch t.pre {
	case "deepseek-llm", "deepseek-coder", "deepseek-v3", "spark2_5", "youtu", "command-r",
		"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "qwen35", "poro-chat", "viking",
		"tekken", "smollm", "chameleon", "gpt-4o", "llama4", "kanana2", "talkie",
		"granite-embed-multi-97m", "tiny_aya", "cohere2moe", "superbpe", "trillion",
		"granite-docling", "bailingmoe", "bailingmoe2", "llada-moe", "seed-coder", "hunyuan",
		"hunyuan-dense", "hy_v4", "joyai-llm", "ufakzeka", "grok-2", "laguna", "minimax-m2",
		"solar-open":
		return false
	}
	return true
}

// cleanTokenizationSpaces runs llama.cpp's three passes: drop the space before
// ? ! . , ; collapse " ' " to "'"; drop the space before 's 'm 're 've.
func cleanTokenizationSpaces(text []byte) []byte {
	if len(text) == 0 {
		return text
	}
	out := text[:1]
	for i := 1; i < len(text); i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			out = out[:len(out)-1]
		}
		out = append(out, x)
	}
	text = out
	out = text[:1]
	for i := 1; i < len(text); i++ {
		x := text[i]
		if x == '\'' && i+1 < len(text) && text[i-1] == ' ' && text[i+1] == ' ' {
			// Drop both spaces. llama.cpp also overwrites the skipped space
			// with NUL, which the next comparison then sees.
			out = out[:len(out)-1]
			text[i+1] = 0
			out = append(out, x)
			i++
			continue
		}
		out = append(out, x)
	}
	text = out
	out = text[:1]
	for i := 1; i < len(text); i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < len(text) {
			x1 := text[i+1]
			switch {
			case x1 == 's' || x1 == 'm':
				out = out[:len(out)-1]
			case i+2 < len(text) && ((x1 == 'r' && text[i+2] == 'e') || (x1 == 'v' && text[i+2] == 'e')):
				out = out[:len(out)-1]
			}
		}
		out = append(out, x)
	}
	return out
}

// StreamDecoder turns tokens into text incrementally, holding back bytes until
// they form complete UTF-8 sequences.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
	first   bool
}

// NewStreamDecoder returns a decoder whose output, concatenated, equals Decode
// of the same ids wherever that is valid UTF-8.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{t: t, first: true}
}

// NewContinuationDecoder returns a decoder for text that continues a prompt
// (a plain completion): the first piece keeps its leading space, which
// separates it from the prompt's last word, as llama-server's completions
// keep it. Concatenated, its output is the pieces as they are.
func (t *Tokenizer) NewContinuationDecoder() *StreamDecoder {
	return &StreamDecoder{t: t}
}

// Push adds one token and returns the text that became complete: valid UTF-8
// only. Bytes that can no longer start or continue a valid sequence come out as
// U+FFFD; an incomplete trailing sequence is held back.
func (d *StreamDecoder) Push(id int32) string {
	d.pending = append(d.pending, d.t.pieceStripped(id, d.first)...)
	d.first = false
	var out []byte
	i := 0
	for i < len(d.pending) {
		rest := d.pending[i:]
		if !utf8.FullRune(rest) {
			break // may still complete with the next token
		}
		r, n := utf8.DecodeRune(rest)
		if r == utf8.RuneError && n == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, rest[:n]...)
		}
		i += n
	}
	d.pending = append(d.pending[:0], d.pending[i:]...)
	return string(out)
}

// Flush returns what is still held back at the end of a stream: an unfinished
// sequence, each byte of it as U+FFFD.
func (d *StreamDecoder) Flush() string {
	s := strings.Repeat("\uFFFD", len(d.pending))
	d.pending = d.pending[:0]
	return s
}
