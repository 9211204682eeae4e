package tokenizer

import (
	"fmt"
	"strings"
)

// Byte-level BPE (llama.cpp's llm_tokenizer_bpe_session): pre-tokenize into
// words, map bytes to the GPT-2 alphabet, then apply merges by rank within
// each word.

type bpeBigram struct {
	left, right int32
	rank        int32
	size        int32
}

// before pops the lowest rank first, then the leftmost pair.
func (a bpeBigram) before(b bpeBigram) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.left < b.left
}

type bpeSession struct {
	t       *Tokenizer
	cpts    []rune
	word    []byte
	symbols []symbol
	queue   priorityQueue[bpeBigram]
}

func (s *bpeSession) tokenize(text string, out []int32) []int32 {
	s.cpts = decodeCodepoints(text, s.cpts)
	lengths := s.t.pretok.split(s.cpts)
	start := 0
	var raw []byte
	for _, n := range lengths {
		// Re-encode the codepoints (normalising invalid input the way
		// llama.cpp does), then map every byte to its GPT-2 character.
		raw = raw[:0]
		for _, c := range s.cpts[start : start+n] {
			raw = appendCodepoint(raw, c)
		}
		start += n
		s.word = s.word[:0]
		if s.t.spmBPE {
			s.word = append(s.word, raw...)
			if strings.Trim(string(raw), "\n") == "" {
				// A run of newlines that is a token is taken whole.
				if id, ok := s.t.toID[string(raw)]; ok {
					out = append(out, id)
					continue
				}
			}
		} else {
			for _, b := range raw {
				s.word = append(s.word, byteToUTF8[b]...)
			}
		}
		if s.t.ignoreMerges {
			if id, ok := s.t.toID[string(s.word)]; ok {
				out = append(out, id)
				continue
			}
		}
		out = s.tokenizeWord(string(s.word), out)
	}
	return out
}

func (s *bpeSession) textID(text string) int32 {
	if id, ok := s.t.toID[text]; ok {
		return id
	}
	return -1
}

func (s *bpeSession) tokenizeWord(word string, out []int32) []int32 {
	s.queue = s.queue[:0]
	s.symbols = splitChars(word, s.symbols)
	for i := range s.symbols {
		sym := &s.symbols[i]
		sym.id = s.textID(word[sym.start : sym.start+sym.n])
	}
	for i := int32(1); i < int32(len(s.symbols)); i++ {
		s.addBigram(word, i-1, i)
	}
	for len(s.queue) > 0 {
		b := s.queue.pop()
		l, r := &s.symbols[b.left], &s.symbols[b.right]
		// A pair is stale once either side changed; both sides only grow by
		// merging, so comparing the total length is the same as comparing text.
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.id = s.textID(word[l.start : l.start+l.n])
		l.next = r.next
		if r.next >= 0 {
			s.symbols[r.next].prev = b.left
		}
		s.addBigram(word, l.prev, b.left)
		s.addBigram(word, b.left, l.next)
	}
	for i := int32(0); i != -1 && len(s.symbols) > 0; i = s.symbols[i].next {
		sym := s.symbols[i]
		if sym.id >= 0 {
			out = append(out, sym.id)
			continue
		}
		piece := word[sym.start : sym.start+sym.n]
		// Not a token: llama.cpp tries each byte of the piece on its own (as
		// a <0xXX> token in SentencePiece-style BPE) and silently drops the
		// ones that are not tokens either.
		for j := 0; j < len(piece); j++ {
			b := piece[j : j+1]
			if s.t.spmBPE {
				b = fmt.Sprintf("<0x%02X>", piece[j])
			}
			if id, ok := s.t.toID[b]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

func (s *bpeSession) addBigram(word string, left, right int32) {
	if left < 0 || right < 0 {
		return
	}
	l, r := s.symbols[left], s.symbols[right]
	var rank int32
	var ok bool
	if l.id >= 0 && r.id >= 0 {
		rank, ok = s.t.idRanks[idPair(l.id, r.id)]
	} else if len(s.t.strRanks) > 0 {
		rank, ok = s.t.strRanks[mergePair{word[l.start : l.start+l.n], word[r.start : r.start+r.n]}]
	}
	if !ok {
		return
	}
	s.queue.push(bpeBigram{left: left, right: right, rank: rank, size: l.n + r.n})
}

// decodeByteLevel is llama_decode_text: map each GPT-2 alphabet character back
// to its byte; anything else is rendered as an [UNK_BYTE_…] marker.
func decodeByteLevel(text string) []byte {
	var out []byte
	cpts := decodeCodepoints(text, nil)
	for _, c := range cpts {
		if b, ok := runeToByte[c]; ok {
			out = append(out, b)
			continue
		}
		enc := appendCodepoint(nil, c)
		var sb strings.Builder
		sb.WriteString("[UNK_BYTE_0x")
		for _, x := range enc {
			const hex = "0123456789abcdef"
			sb.WriteByte(hex[x>>4])
			sb.WriteByte(hex[x&15])
		}
		sb.WriteString(text)
		sb.WriteString("]")
		out = append(out, sb.String()...)
	}
	return out
}
