package msltoc

import (
	"fmt"
	"strconv"
	"strings"

	"nibble/metal/msl"
)

// edit replaces the source bytes [pos, end) with text.
type edit struct {
	pos, end int
	text     string
}

// edits is a rewrite of one file, made of edits that never add or remove a
// newline.
type edits struct {
	f    *msl.File
	list []edit
}

// replace replaces the source from token a to token b (inclusive) with text,
// padded with the newlines it covered.
func (es *edits) replace(a, b msl.Token, text string) {
	n := strings.Count(es.f.Text[a.Pos:b.End], "\n")
	es.list = append(es.list, edit{a.Pos, b.End, text + strings.Repeat("\n", n)})
}

// set replaces one token with text.
func (es *edits) set(tok msl.Token, text string) {
	es.list = append(es.list, edit{tok.Pos, tok.End, text})
}

// insert adds text at byte offset pos.
func (es *edits) insert(pos int, text string) {
	es.list = append(es.list, edit{pos, pos, text})
}

// apply makes the edits; an edit inside an earlier replacement is dropped
// (a replacement is written with fixed literals).
func (es *edits) apply() (string, error) {
	list := es.list
	// Stable insertion sort by position: there are few edits.
	for i := 1; i < len(list); i++ {
		for j := i; j > 0 && list[j].pos < list[j-1].pos; j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
	src := es.f.Text
	var b strings.Builder
	at := 0
	for _, e := range list {
		if e.pos < at {
			continue // inside an earlier replacement
		}
		b.WriteString(src[at:e.pos])
		b.WriteString(e.text)
		at = e.end
	}
	b.WriteString(src[at:])
	out := b.String()
	if strings.Count(out, "\n") != strings.Count(src, "\n") {
		return "", fmt.Errorf("msl: %s: internal error: the rewrite moved lines", es.f.Name)
	}
	return out, nil
}

// writeFile appends a file's rewrite to the translation unit, after a
// #line directive that names it.
func writeFile(b *strings.Builder, name, out string) {
	fmt.Fprintf(b, "#line 1 %s\n", strconv.Quote(name))
	b.WriteString(out)
	if !strings.HasSuffix(out, "\n") {
		b.WriteByte('\n')
	}
}
