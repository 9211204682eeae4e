package tokenizer

import (
	"fmt"
	"strings"

	"github.com/dlclark/regexp2"
)

// splitFunc splits each segment of cpts (given as consecutive lengths in
// offsets) further and appends the new lengths to out.
type splitFunc func(cpts []rune, offsets []int, out []int) []int

type splitStep struct {
	custom    splitFunc
	re        *regexp2.Regexp
	collapsed bool // match against the category-collapsed text
}

// customSplitters are hand-written equivalents of the hottest regexes.
var customSplitters = map[string]splitFunc{
	gpt2Regex:   splitGPT2,
	llama3Regex: splitLlama3,
	qwen2Regex:  splitQwen2,
}

type preTokenizer struct {
	steps        []splitStep
	needCollapse bool
}

// Unicode categories llama.cpp's regex fallback understands, with the byte each
// collapses to and the ASCII members that stay themselves in collapsed text.
var unicodeCategories = map[string]struct {
	flag   uint16
	marker rune
	ascii  string
}{
	`\p{N}`:  {flagNumber, 0xD1, "0-9"},
	`\p{L}`:  {flagLetter, 0xD2, "A-Za-z"},
	`\p{P}`:  {flagPunct, 0xD3, `!-#%-*,-/:-;?-@\[-\]_\{\}`},
	`\p{M}`:  {flagMark, 0xD4, ""},
	`\p{S}`:  {flagSymbol, 0xD5, "\\$\\+<->^`\\|"},
	`\p{Lu}`: {flagLetter, 0xD2, "A-Za-z"},
	`\p{Ll}`: {flagLetter, 0xD2, "A-Za-z"},
	`\p{Lt}`: {flagLetter, 0xD2, "A-Za-z"},
	`\p{Lm}`: {flagLetter, 0xD2, "A-Za-z"},
	`\p{Lo}`: {flagLetter, 0xD2, "A-Za-z"},
}

func usesCategories(re string) bool {
	for k := range unicodeCategories {
		if strings.Contains(re, k) {
			return true
		}
	}
	return false
}

func compilePreTokenizer(spec preTokenizerSpec) (*preTokenizer, error) {
	pt := &preTokenizer{}
	for _, expr := range spec.regexes {
		if usesCategories(expr) {
			pt.needCollapse = true
		}
		if fn, ok := customSplitters[expr]; ok {
			pt.steps = append(pt.steps, splitStep{custom: fn})
			continue
		}
		step := splitStep{}
		pattern := expr
		if usesCategories(expr) {
			var err error
			if pattern, err = collapseRegex(expr); err != nil {
				return nil, err
			}
			step.collapsed = true
		}
		re, err := regexp2.Compile(pattern, regexp2.ECMAScript)
		if err != nil {
			return nil, fmt.Errorf("compile %q: %w", expr, err)
		}
		step.re = re
		pt.steps = append(pt.steps, step)
	}
	return pt, nil
}

// collapseRegex rewrites a regex with \p{..} classes for the collapsed text,
// where every non-ASCII codepoint stands for its category marker.
func collapseRegex(expr string) (string, error) {
	for _, c := range expr {
		if c >= 128 {
			return "", fmt.Errorf("regex %q mixes unicode categories and non-ASCII characters", expr)
		}
	}
	var b strings.Builder
	inside := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		if c == '[' && (i == 0 || expr[i-1] != '\\') {
			b.WriteByte('[')
			inside = true
			continue
		}
		if inside && c == ']' && expr[i-1] != '\\' {
			b.WriteByte(']')
			inside = false
			continue
		}
		if c == '\\' && i+3 < len(expr) && expr[i+1] == 'p' && expr[i+2] == '{' {
			if end := strings.IndexByte(expr[i+3:], '}'); end >= 0 && i+3+end <= i+10 {
				closing := i + 3 + end
				if cat, ok := unicodeCategories[expr[i:closing+1]]; ok {
					if !inside {
						b.WriteByte('[')
					}
					b.WriteRune(cat.marker)
					b.WriteString(cat.ascii)
					if !inside {
						b.WriteByte(']')
					}
					i = closing
					continue
				}
			}
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// collapse maps each codepoint to what llama.cpp's std::regex fallback sees:
// ASCII stays, other whitespace becomes \v, other codepoints their category
// marker (0xD0 for separators, controls and unassigned).
func collapse(cpts []rune, out []rune) []rune {
	out = out[:0]
	for _, c := range cpts {
		if c < 128 {
			out = append(out, c)
			continue
		}
		f := cptFlags(c)
		switch {
		case f&flagWhitespace != 0:
			out = append(out, 0x0B)
		case f&flagCategories == flagNumber:
			out = append(out, 0xD1)
		case f&flagCategories == flagLetter:
			out = append(out, 0xD2)
		case f&flagCategories == flagPunct:
			out = append(out, 0xD3)
		case f&flagCategories == flagMark:
			out = append(out, 0xD4)
		case f&flagCategories == flagSymbol:
			out = append(out, 0xD5)
		default:
			out = append(out, 0xD0)
		}
	}
	return out
}

// wideText is what llama.cpp's std::wregex fallback sees: the codepoints with
// non-ASCII whitespace replaced by \v.
func wideText(cpts []rune, out []rune) []rune {
	out = out[:0]
	for _, c := range cpts {
		if c > 0x7F && cptFlags(c)&flagWhitespace != 0 {
			c = 0x0B
		}
		out = append(out, c)
	}
	return out
}

// splitRegex splits each segment by the regex's matches: every match and every
// unmatched gap becomes a piece (llama.cpp's unicode_regex_split_stl).
func splitRegex(re *regexp2.Regexp, text []rune, offsets []int, out []int) []int {
	start := 0
	for _, n := range offsets {
		seg := text[start : start+n]
		prev := 0
		m, err := re.FindRunesMatch(seg)
		for err == nil && m != nil {
			if m.Index > prev {
				out = append(out, m.Index-prev)
			}
			if m.Length > 0 {
				out = append(out, m.Length)
			}
			prev = m.Index + m.Length
			m, err = re.FindNextMatch(m)
		}
		if prev < n {
			out = append(out, n-prev)
		}
		start += n
	}
	return out
}

// split runs all steps over the codepoints and returns the piece lengths.
func (pt *preTokenizer) split(cpts []rune) []int {
	offsets := []int{len(cpts)}
	if len(cpts) == 0 {
		return nil
	}
	var collapsed, wide []rune
	if pt.needCollapse {
		collapsed = collapse(cpts, nil)
	}
	var next []int
	for _, st := range pt.steps {
		next = next[:0]
		switch {
		case st.custom != nil:
			next = st.custom(cpts, offsets, next)
		case st.collapsed:
			next = splitRegex(st.re, collapsed, offsets, next)
		default:
			if wide == nil {
				wide = wideText(cpts, nil)
			}
			next = splitRegex(st.re, wide, offsets, next)
		}
		offsets, next = next, offsets
	}
	return offsets
}
