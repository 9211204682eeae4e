package tokenizer

// Hand-written equivalents of the GPT-2 and Llama-3 pre-tokenizer regexes,
// following llama.cpp's unicode_regex_split_custom_gpt2/_llama3 step by step
// (including how they treat the segment end), since llama.cpp uses these
// rather than a regex engine for the two patterns.

const outOfRange rune = -1

// segment gives bounded access to one piece of the codepoint array.
type segment struct {
	cpts     []rune
	ini, end int
	prevEnd  int
	out      []int
}

func (s *segment) cpt(pos int) rune {
	if pos >= s.ini && pos < s.end {
		return s.cpts[pos]
	}
	return outOfRange
}

// flags of an out-of-range position are zero: not even "undefined".
func (s *segment) flags(pos int) uint16 {
	if pos >= s.ini && pos < s.end {
		return cptFlags(s.cpts[pos])
	}
	return 0
}

func (s *segment) addToken(end int) int {
	n := end - s.prevEnd
	if n > 0 {
		s.out = append(s.out, n)
	}
	s.prevEnd = end
	return n
}

// whitespaceTail ends a split step at pos, where nws whitespace characters
// start: `\s+(?!\S)` keeps the last one for the next word, `\s+` takes them
// all at the end of the text, and with none a single character is its own
// token. It returns the new position.
func (s *segment) whitespaceTail(pos, nws int) int {
	switch {
	case nws > 1 && s.cpt(pos+nws) != outOfRange:
		pos += nws - 1
	case nws > 0:
		pos += nws
	default:
		pos++
	}
	s.addToken(pos)
	return pos
}

const wordFlags = flagWhitespace | flagLetter | flagNumber

// isOther is "[^\s\p{L}\p{N}]" for an in-range codepoint.
func isOther(f uint16) bool { return f&wordFlags == 0 && f != 0 }

// contraction reports the length of a "'s|'t|'re|'ve|'m|'ll|'d" match at pos.
func (s *segment) contraction(pos int, fold bool) int {
	if s.cpt(pos) != '\'' || pos+1 >= s.end {
		return 0
	}
	lower := func(c rune) rune {
		if fold {
			return toLowerLlama(c)
		}
		return c
	}
	c1 := lower(s.cpt(pos + 1))
	if c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd' {
		return 2
	}
	if pos+2 < s.end {
		c2 := lower(s.cpt(pos + 2))
		if (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l') {
			return 3
		}
	}
	return 0
}

// splitGPT2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(cpts []rune, offsets []int, out []int) []int {
	start := 0
	for _, n := range offsets {
		s := segment{cpts: cpts, ini: start, end: start + n, prevEnd: start, out: out}
		start += n
		for pos := s.ini; pos < s.end; {
			c := s.cpt(pos)
			f := s.flags(pos)
			if k := s.contraction(pos, false); k > 0 {
				pos += s.addToken(pos + k)
				continue
			}
			f2 := f
			if c == ' ' {
				f2 = s.flags(pos + 1)
			}
			if f2&flagLetter != 0 {
				if c == ' ' {
					pos++
				}
				for f2&flagLetter != 0 {
					pos++
					f2 = s.flags(pos)
				}
				s.addToken(pos)
				continue
			}
			if f2&flagNumber != 0 {
				if c == ' ' {
					pos++
				}
				for f2&flagNumber != 0 {
					pos++
					f2 = s.flags(pos)
				}
				s.addToken(pos)
				continue
			}
			if isOther(f2) {
				if c == ' ' {
					pos++
				}
				for isOther(f2) {
					pos++
					f2 = s.flags(pos)
				}
				s.addToken(pos)
				continue
			}
			nws := 0
			for s.flags(pos+nws)&flagWhitespace != 0 {
				nws++
			}
			pos = s.whitespaceTail(pos, nws)
		}
		out = s.out
	}
	return out
}

// splitLlama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitLlama3(cpts []rune, offsets []int, out []int) []int {
	return splitLlama3Digits(cpts, offsets, out, 3)
}

// splitQwen2 is the Qwen2 regex: the Llama-3 one with single digits (\p{N}).
// llama.cpp runs it through std::regex; this equivalent is checked against
// std::regex by TestRegexDiff and is several times faster than regexp2.
func splitQwen2(cpts []rune, offsets []int, out []int) []int {
	return splitLlama3Digits(cpts, offsets, out, 1)
}

func splitLlama3Digits(cpts []rune, offsets []int, out []int, maxDigits int) []int {
	start := 0
	for _, n := range offsets {
		s := segment{cpts: cpts, ini: start, end: start + n, prevEnd: start, out: out}
		start += n
		for pos := s.ini; pos < s.end; {
			c := s.cpt(pos)
			f := s.flags(pos)
			if k := s.contraction(pos, true); k > 0 {
				pos += s.addToken(pos + k)
				continue
			}
			if !(c == '\r' || c == '\n' || f&flagNumber != 0) {
				if f&flagLetter != 0 || s.flags(pos+1)&flagLetter != 0 {
					pos++
					for s.flags(pos)&flagLetter != 0 {
						pos++
					}
					s.addToken(pos)
					continue
				}
			}
			if f&flagNumber != 0 {
				ini := pos
				for s.flags(pos)&flagNumber != 0 {
					pos++
					if pos-ini >= maxDigits {
						s.addToken(pos)
						ini = pos
					}
				}
				s.addToken(pos)
				continue
			}
			f2 := f
			if c == ' ' {
				f2 = s.flags(pos + 1)
			}
			// llama.cpp tests the current codepoint's flags (not f2) for being in range here.
			if f2&wordFlags == 0 && f != 0 {
				if c == ' ' {
					pos++
				}
				for isOther(f2) {
					pos++
					f2 = s.flags(pos)
				}
				c2 := s.cpt(pos)
				for c2 == '\r' || c2 == '\n' {
					pos++
					c2 = s.cpt(pos)
				}
				s.addToken(pos)
				continue
			}
			nws, lastRN := 0, 0
			for s.flags(pos+nws)&flagWhitespace != 0 {
				c2 := s.cpt(pos + nws)
				if c2 == '\r' || c2 == '\n' {
					lastRN = pos + nws + 1
				}
				nws++
			}
			if lastRN > 0 {
				pos = lastRN
				s.addToken(pos)
				continue
			}
			pos = s.whitespaceTail(pos, nws)
		}
		out = s.out
	}
	return out
}
