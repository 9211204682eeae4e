package retrieve

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"nibble/app/documents"
)

// TokenCounter counts the tokens of text with the loaded model's tokenizer.
type TokenCounter func(string) int

// Chunk is a passage of a document: bytes [Start, End) of its Text.
// Consecutive chunks may overlap.
type Chunk struct {
	Index      int // position among the document's chunks
	Start, End int
	Heading    string // the nearest heading at or above Start, without "#"
	Tokens     int
}

type block struct {
	start, end int
	heading    string // set for a heading line
	tokens     int
}

// maxBisect bounds how often an over-long piece is halved.
const maxBisect = 32

// ChunkDocument splits doc's text into passages of at most target tokens
// (unless a single character is more), breaking at headings and paragraphs
// first, then lines, words and characters. Each passage after the first
// then starts about overlap tokens early, repeating the end of the one
// before (so it may reach target+overlap tokens), unless it starts a
// section.
func ChunkDocument(doc *documents.Document, count TokenCounter, target, overlap int) ([]Chunk, error) {
	if doc == nil {
		return nil, errors.New("documents: chunking: no document")
	}
	if count == nil {
		return nil, errors.New("documents: chunking: no token counter")
	}
	if target < 1 {
		return nil, fmt.Errorf("documents: chunking: target of %d tokens; it must be at least 1", target)
	}
	if overlap < 0 || overlap >= target {
		return nil, fmt.Errorf("documents: chunking: overlap of %d tokens; it must be from 0 to less than the target (%d)", overlap, target)
	}
	c := &chunker{text: doc.Text, count: safeCount(count), target: target}
	blocks := splitBlocks(doc)
	for i := range blocks {
		blocks[i].tokens = c.count(doc.Text[blocks[i].start:blocks[i].end])
	}
	c.pack(blocks)
	c.addOverlap(overlap)
	for i := range c.chunks {
		c.chunks[i].Index = i
	}
	return c.chunks, nil
}

func safeCount(count TokenCounter) TokenCounter {
	return func(s string) int {
		if s == "" {
			return 0
		}
		n := count(s)
		if n < 0 {
			return 0
		}
		return n
	}
}

type chunker struct {
	text    string
	count   TokenCounter
	target  int
	chunks  []Chunk
	heading string
}

// splitBlocks cuts text into paragraphs (separated by blank lines) and
// heading lines ("# Title" in Markdown, and in the text extracted from HTML
// and DOCX; not inside code fences).
func splitBlocks(doc *documents.Document) []block {
	text := doc.Text
	headings := doc.Kind == documents.KindMarkdown || doc.Kind == documents.KindHTML || doc.Kind == documents.KindDOCX
	var blocks []block
	start := -1 // start of the current paragraph, -1 when none
	fence := ""
	flush := func(end int) {
		if start >= 0 {
			e := end
			for e > start && (text[e-1] == '\n' || text[e-1] == ' ' || text[e-1] == '\t') {
				e--
			}
			if e > start {
				blocks = append(blocks, block{start: start, end: e})
			}
		}
		start = -1
	}
	for pos := 0; pos < len(text); {
		end := strings.IndexByte(text[pos:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += pos
		}
		line := text[pos:end]
		trimmed := strings.TrimSpace(line)
		if headings {
			if f := fenceMarker(trimmed); f != "" {
				switch {
				case fence == "":
					fence = f
				case strings.HasPrefix(trimmed, fence):
					fence = ""
				}
			}
		}
		switch {
		case trimmed == "" && fence == "":
			flush(pos)
		case headings && fence == "" && isHeading(trimmed):
			flush(pos)
			blocks = append(blocks, block{start: pos, end: pos + len(strings.TrimRight(line, " \t")), heading: headingText(trimmed)})
		default:
			if start < 0 {
				start = pos
			}
		}
		pos = end + 1
	}
	flush(len(text))
	return blocks
}

func fenceMarker(line string) string {
	switch {
	case strings.HasPrefix(line, "```"):
		return "```"
	case strings.HasPrefix(line, "~~~"):
		return "~~~"
	}
	return ""
}

func isHeading(line string) bool {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	return n >= 1 && n <= 6 && len(line) > n && line[n] == ' '
}

func headingText(line string) string {
	return strings.TrimSpace(strings.TrimLeft(line, "#"))
}

// pack joins blocks into chunks of at most target tokens.
func (c *chunker) pack(blocks []block) {
	var cur *Chunk
	flush := func() {
		if cur != nil {
			c.chunks = append(c.chunks, *cur)
			cur = nil
		}
	}
	for _, b := range blocks {
		if b.heading != "" {
			c.heading = b.heading
		}
		switch {
		case b.tokens > c.target:
			flush()
			c.splitBig(b.start, b.end, b.tokens)
			continue
		case cur == nil:
		case b.heading != "" && cur.Tokens >= c.target/3:
			flush()
		case cur.Tokens+b.tokens+1 > c.target:
			flush()
		default:
			merged := Chunk{Start: cur.Start, End: b.end, Heading: cur.Heading}
			// The white space between counts too (it may be many blank lines).
			merged.Tokens = cur.Tokens + b.tokens + max(1, c.count(c.text[cur.End:b.start]))
			if merged.Tokens > c.target { // never trust additivity near the edge
				merged.Tokens = c.count(c.text[merged.Start:merged.End])
			}
			if merged.Tokens <= c.target {
				*cur = merged
				continue
			}
			flush()
		}
		cur = &Chunk{Start: b.start, End: b.end, Heading: c.heading, Tokens: b.tokens}
	}
	flush()
}

// splitBig cuts a block of more than target tokens: greedy pieces of
// whole lines (or words, or characters) sized by the block's bytes per
// token, then each piece counted and halved while still too long.
func (c *chunker) splitBig(start, end, tokens int) {
	maxBytes := int(float64(c.target) * float64(end-start) / float64(tokens))
	if maxBytes < 1 {
		maxBytes = 1
	}
	for start < end {
		stop := end
		if stop-start > maxBytes {
			stop = cutPoint(c.text, start, start+maxBytes)
		}
		c.emitPiece(start, stop, 0)
		start = skipSpaces(c.text, stop, end)
	}
}

func (c *chunker) emitPiece(start, end, depth int) {
	if start >= end {
		return
	}
	n := c.count(c.text[start:end])
	if n > c.target && depth < maxBisect {
		mid := cutPoint(c.text, start, start+(end-start)/2)
		if mid > start && mid < end {
			c.emitPiece(start, mid, depth+1)
			c.emitPiece(skipSpaces(c.text, mid, end), end, depth+1)
			return
		}
	}
	c.chunks = append(c.chunks, Chunk{Start: start, End: end, Heading: c.heading, Tokens: n})
}

// cutPoint finds where to cut text[start:limit]: after the last newline,
// else after the last space, else at the last character boundary; always
// past start (when limit > start).
func cutPoint(text string, start, limit int) int {
	if limit >= len(text) {
		return len(text)
	}
	half := start + (limit-start)/2
	if i := strings.LastIndexByte(text[start:limit], '\n'); i >= 0 && start+i+1 > half {
		return start + i + 1
	}
	if i := strings.LastIndexAny(text[start:limit], " \t"); i >= 0 && start+i+1 > half {
		return start + i + 1
	}
	p := limit
	for p > start && !utf8.RuneStart(text[p]) {
		p--
	}
	if p == start { // one character longer than the limit: take it whole
		_, size := utf8.DecodeRuneInString(text[start:])
		return start + size
	}
	return p
}

func skipSpaces(text string, pos, end int) int {
	for pos < end && (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\t') {
		pos++
	}
	return pos
}

// addOverlap extends each chunk's start back into the chunk before by
// about overlap tokens, at a word boundary, unless it starts a section.
func (c *chunker) addOverlap(overlap int) {
	if overlap == 0 {
		return
	}
	for i := len(c.chunks) - 1; i > 0; i-- {
		cur, prev := &c.chunks[i], c.chunks[i-1]
		if isHeading(strings.TrimSpace(firstLine(c.text[cur.Start:cur.End]))) {
			continue
		}
		if prev.Tokens == 0 || prev.End <= prev.Start {
			continue
		}
		back := int(float64(overlap) * float64(prev.End-prev.Start) / float64(prev.Tokens))
		from := cur.Start - back
		if from <= prev.Start {
			from = prev.Start
		} else {
			// Forward to the start of a word.
			for from < cur.Start && text8Continues(c.text, from) {
				from++
			}
			for from < cur.Start && !utf8.RuneStart(c.text[from]) {
				from++
			}
		}
		if from >= cur.Start {
			continue
		}
		n := c.count(c.text[from:cur.End])
		if n > c.target+overlap { // the estimate was off: keep the chunk as it was
			continue
		}
		cur.Start, cur.Tokens = from, n
	}
}

// text8Continues reports whether position p is inside a word (the byte
// before it is not white space).
func text8Continues(text string, p int) bool {
	if p == 0 {
		return false
	}
	b := text[p-1]
	return b != ' ' && b != '\n' && b != '\t'
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
