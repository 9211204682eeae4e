package tokenizer

// SentencePiece BPE (llama.cpp's llm_tokenizer_spm): start from UTF-8
// characters, repeatedly merge the adjacent pair whose concatenation is the
// highest-scoring token, then fall back to byte tokens for leftovers.

type symbol struct {
	start, n   int32 // byte range in the text; n == 0 once merged away
	prev, next int32
	id         int32 // BPE: token id of the text, -1 if none
}

// splitChars makes one symbol per UTF-8 sequence, judging the length from
// the lead byte only (as llama.cpp does, so invalid input groups the same way).
func splitChars(text string, syms []symbol) []symbol {
	syms = syms[:0]
	for off := 0; off < len(text); {
		n := min(utf8SeqLen(text[off]), len(text)-off)
		idx := int32(len(syms))
		next := idx + 1
		if off+n == len(text) {
			next = -1
		}
		syms = append(syms, symbol{start: int32(off), n: int32(n), prev: idx - 1, next: next})
		off += n
	}
	return syms
}

type spmBigram struct {
	left, right int32
	score       float32
	size        int32
}

// before pops the highest score first, then the leftmost pair.
func (a spmBigram) before(b spmBigram) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.left < b.left
}

type spmSession struct {
	t       *Tokenizer
	text    string
	symbols []symbol
	queue   priorityQueue[spmBigram]
}

func (s *spmSession) tokenize(text string, out []int32) []int32 {
	s.text = text
	s.symbols = s.symbols[:0]
	s.queue = s.queue[:0]
	s.symbols = splitChars(text, s.symbols)
	for i := int32(1); i < int32(len(s.symbols)); i++ {
		s.tryAddBigram(i-1, i)
	}
	for len(s.queue) > 0 {
		b := s.queue.pop()
		l, r := &s.symbols[b.left], &s.symbols[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue // stale: one side was merged since
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			s.symbols[r.next].prev = b.left
		}
		s.tryAddBigram(l.prev, b.left)
		s.tryAddBigram(b.left, l.next)
	}
	for i := int32(0); i != -1 && len(s.symbols) > 0; i = s.symbols[i].next {
		sym := s.symbols[i]
		piece := text[sym.start : sym.start+sym.n]
		if id, ok := s.t.toID[piece]; ok {
			out = append(out, id)
			continue
		}
		// Merged symbols are always tokens, so only single characters that
		// are not in the vocabulary get here.
		for j := 0; j < len(piece); j++ {
			if id := s.t.byteTokens[piece[j]]; id >= 0 {
				out = append(out, id)
			}
		}
	}
	return out
}

func (s *spmSession) tryAddBigram(left, right int32) {
	if left < 0 || right < 0 {
		return
	}
	l, r := s.symbols[left], s.symbols[right]
	id, ok := s.t.toID[s.text[l.start:l.start+l.n+r.n]]
	if !ok {
		return
	}
	s.queue.push(spmBigram{left: left, right: right, score: s.t.scores[id], size: l.n + r.n})
}

// buildByteTokens records llama.cpp's byte_to_token for SPM: the <0xXX> token,
// else the one-byte token, else (where llama.cpp would throw) the unknown token.
func (t *Tokenizer) buildByteTokens() {
	const hex = "0123456789ABCDEF"
	for b := 0; b < 256; b++ {
		id := int32(-1)
		if v, ok := t.toID[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]; ok {
			id = v
		} else if v, ok := t.toID[string([]byte{byte(b)})]; ok {
			id = v
		} else if t.unk >= 0 {
			id = t.unk
		}
		t.byteTokens[b] = id
	}
}
