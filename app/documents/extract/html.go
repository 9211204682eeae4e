package extract

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"

	"nibble/app/documents"
)

// htmlSkip are elements whose content is not visible text.
var htmlSkip = map[string]bool{
	"script": true, "style": true, "noscript": true, "template": true, "head": true,
	"svg": true, "math": true, "iframe": true, "object": true, "embed": true,
	"canvas": true, "select": true, "datalist": true, "audio": true, "video": true,
	"noembed": true, "noframes": true,
}

// headContent are the elements allowed in <head>; any other start tag ends a
// <head> whose end tag was left out.
var headContent = map[string]bool{
	"title": true, "meta": true, "link": true, "style": true, "script": true,
	"base": true, "noscript": true, "template": true,
}

// htmlBreak is the break (1 line, 2 blank line) around block elements.
var htmlBreak = map[string]int{
	"p": 2, "div": 1, "section": 2, "article": 2, "header": 1, "footer": 1, "main": 1,
	"nav": 1, "aside": 2, "blockquote": 2, "figure": 2, "figcaption": 1, "form": 1,
	"fieldset": 1, "address": 1, "details": 1, "summary": 1, "dl": 2, "dt": 1, "dd": 1,
	"table": 2, "thead": 1, "tbody": 1, "tfoot": 1, "caption": 1, "pre": 2, "hr": 2,
	"ul": 2, "ol": 2, "center": 1, "body": 2, "html": 2, "legend": 1, "option": 1,
	"h1": 2, "h2": 2, "h3": 2, "h4": 2, "h5": 2, "h6": 2,
}

// maxListNesting bounds the list counters kept; deeper lists are indented no
// further. The tokenizer keeps no element stack, so nesting costs nothing else.
const maxListNesting = 32

// extractHTML keeps the visible text of an HTML page: no scripts, styles or
// head metadata; headings become "#" lines, list items "- " lines, table
// rows lines with " | " between cells. It streams tokens without building a
// tree, so deep nesting costs neither stack nor memory.
func extractHTML(data []byte, lim documents.Limits) (*documents.Document, error) {
	var warnings []string
	if !utf8.Valid(data) {
		enc, name, _ := charset.DetermineEncoding(data, "text/html")
		if name != "utf-8" && enc != nil {
			decoded, err := enc.NewDecoder().Bytes(data)
			if err != nil {
				return nil, fmt.Errorf("%w: decoding the page as %s: %v", documents.ErrDamaged, name, err)
			}
			warnings = append(warnings, "decoded from "+name)
			data = decoded
		} else {
			invalid, _, _, first := scanUTF8(data)
			warnings = append(warnings, fmt.Sprintf("%d invalid UTF-8 sequences replaced with U+FFFD (the first at byte %d)", invalid, first))
			data = bytes.ToValidUTF8(data, []byte("\uFFFD"))
		}
	}
	if i := bytes.IndexByte(data, 0); i >= 0 && i < 8192 {
		return nil, fmt.Errorf("%w: it holds NUL bytes (the first at byte %d), so it is binary data, not HTML", documents.ErrBinary, i)
	}

	w := &blockWriter{limit: lim.MaxTextBytes}
	var (
		skipTag  string // element being skipped, "" when none
		skipNest int
		inTitle  bool
		title    strings.Builder
		pre      int
		lists    []int // per open list: next item number, 0 for unordered
		listOver int   // lists open beyond maxListNesting
		cell     int   // cells seen in the current table row
		preStart bool  // just after <pre>: a first newline is dropped
	)
	z := html.NewTokenizer(bytes.NewReader(data))
	for w.err == nil {
		tt := z.Next()
		if tt == html.ErrorToken {
			if err := z.Err(); err != io.EOF {
				return nil, fmt.Errorf("%w: reading HTML: %v", documents.ErrDamaged, err)
			}
			break
		}
		switch tt {
		case html.TextToken:
			if inTitle {
				if title.Len() < 1024 {
					title.Write(z.Text())
				}
				continue
			}
			if skipTag != "" {
				continue
			}
			t := string(z.Text())
			if pre > 0 {
				if preStart && strings.HasPrefix(t, "\n") {
					t = t[1:]
				}
				preStart = false
				w.raw(normalizeNewlines(t))
			} else {
				w.text(t)
			}
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			nameB, _ := z.TagName()
			tag := string(nameB)
			end := tt == html.EndTagToken
			selfClosing := tt == html.SelfClosingTagToken
			if tag == "title" && !selfClosing {
				inTitle = !end
				continue
			}
			if skipTag != "" {
				switch {
				case skipTag == "head" && !end && !headContent[tag]:
					skipTag = "" // <head> ended without its end tag; handle tag below
				case tag == skipTag && end:
					skipNest--
					if skipNest == 0 {
						skipTag = ""
					}
					continue
				case tag == skipTag && !selfClosing:
					skipNest++
					continue
				default:
					continue
				}
			}
			if htmlSkip[tag] {
				if !end && !selfClosing {
					skipTag, skipNest = tag, 1
				}
				continue
			}
			switch tag {
			case "br":
				w.newline()
				continue
			case "h1", "h2", "h3", "h4", "h5", "h6":
				w.brk(2)
				if !end {
					w.prefix = strings.Repeat("#", int(tag[1]-'0')) + " "
				}
				continue
			case "pre":
				w.brk(2)
				if end {
					if pre > 0 {
						pre--
					}
				} else if !selfClosing {
					pre++
					preStart = true
				}
				continue
			case "ul", "ol", "menu":
				w.brk(1)
				if end {
					if listOver > 0 {
						listOver--
					} else if len(lists) > 0 {
						lists = lists[:len(lists)-1]
					}
				} else if !selfClosing {
					if len(lists) >= maxListNesting {
						listOver++
					} else if tag == "ol" {
						lists = append(lists, olStart(z))
					} else {
						lists = append(lists, 0)
					}
				}
				continue
			case "li":
				w.brk(1)
				if !end {
					indent := 0
					marker := "- "
					if len(lists) > 0 {
						indent = len(lists) - 1
						if n := lists[len(lists)-1]; n > 0 {
							marker = strconv.Itoa(n) + ". "
							lists[len(lists)-1]++
						}
					}
					w.prefix = strings.Repeat("  ", indent) + marker
				}
				continue
			case "tr":
				w.brk(1)
				cell = 0
				continue
			case "td", "th":
				if !end {
					if cell > 0 {
						w.sep = " | "
					}
					cell++
				}
				continue
			}
			if n, ok := htmlBreak[tag]; ok {
				w.brk(n)
			}
		}
	}
	if w.err != nil {
		return nil, w.err
	}
	doc := &documents.Document{
		Title:    strings.Join(strings.Fields(title.String()), " "),
		Text:     w.String(),
		Warnings: warnings,
	}
	if strings.TrimSpace(doc.Text) == "" {
		doc.Warnings = append(doc.Warnings, "the page has no visible text")
	}
	return doc, nil
}

// olStart is the first item number of an <ol>: its start attribute, else 1.
func olStart(z *html.Tokenizer) int {
	for {
		key, val, more := z.TagAttr()
		if string(key) == "start" {
			if n, err := strconv.Atoi(strings.TrimSpace(string(val))); err == nil && n > 0 && n < 1e9 {
				return n
			}
		}
		if !more {
			return 1
		}
	}
}

// blockWriter assembles text from inline pieces and block breaks, collapsing
// whitespace the way a browser shows it.
type blockWriter struct {
	b      strings.Builder
	pend   int    // pending line breaks before the next text: 0, 1 or 2
	space  bool   // a space is pending before the next text
	prefix string // written before the next text on a fresh line (heading, list marker)
	sep    string // written before the next text (table cell separator)
	limit  int
	err    error
}

// brk asks for n line breaks (1: new line, 2: blank line) before the next text.
func (w *blockWriter) brk(n int) {
	if n > w.pend {
		w.pend = n
	}
	w.space = false
	w.sep = ""
	w.prefix = ""
}

// newline is a hard line break (<br>): it always counts, up to a blank line.
func (w *blockWriter) newline() {
	if w.b.Len() == 0 {
		return
	}
	if w.pend < 2 {
		w.pend++
	}
	w.space = false
}

func (w *blockWriter) start() {
	if w.b.Len() > 0 {
		switch w.pend {
		case 1:
			w.b.WriteByte('\n')
		case 2:
			w.b.WriteString("\n\n")
		}
	}
	if w.pend > 0 || w.b.Len() == 0 {
		w.b.WriteString(w.prefix)
		w.prefix = ""
		w.sep = ""
		w.space = false
	}
	w.pend = 0
	if w.sep != "" {
		w.b.WriteString(w.sep)
		w.sep = ""
		w.space = false
	}
	if w.space {
		w.b.WriteByte(' ')
		w.space = false
	}
	w.prefix = ""
}

// text writes inline text with whitespace collapsed.
func (w *blockWriter) text(t string) {
	if t == "" {
		return
	}
	fields := strings.Fields(t)
	if len(fields) == 0 {
		w.space = w.b.Len() > 0
		return
	}
	if isSpaceByteOrRune(t, true) {
		w.space = true
	}
	w.start()
	for i, f := range fields {
		if i > 0 {
			w.b.WriteByte(' ')
		}
		w.b.WriteString(f)
	}
	w.space = isSpaceByteOrRune(t, false)
	w.check()
}

// raw writes preformatted text as it is.
func (w *blockWriter) raw(t string) {
	if t == "" {
		return
	}
	w.start()
	w.b.WriteString(t)
	w.check()
}

func (w *blockWriter) check() {
	if w.b.Len() > w.limit {
		w.err = fmt.Errorf("%w: its text is over the %s limit for documents", documents.ErrTooLarge, documents.HumanBytes(int64(w.limit)))
	}
}

func (w *blockWriter) String() string {
	return strings.TrimSpace(w.b.String())
}

// isSpaceByteOrRune reports whether t starts (first) or ends with white space.
func isSpaceByteOrRune(t string, first bool) bool {
	var r rune
	if first {
		r, _ = utf8.DecodeRuneInString(t)
	} else {
		r, _ = utf8.DecodeLastRuneInString(t)
	}
	return strings.TrimSpace(string(r)) == ""
}
