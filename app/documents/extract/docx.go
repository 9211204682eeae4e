package extract

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"golang.org/x/net/html/charset"

	"nibble/app/documents"
	"nibble/app/documents/extract/internal/inflate"
)

// The WordprocessingML namespaces (transitional and strict) and the
// markup-compatibility one.
const (
	nsW       = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
	nsWStrict = "http://purl.oclc.org/ooxml/wordprocessingml/main"
	nsMC      = "http://schemas.openxmlformats.org/markup-compatibility/2006"
	nsMath    = "http://schemas.openxmlformats.org/officeDocument/2006/math"
)

// maxSmallPart bounds the parts read whole (relationships, styles).
const maxSmallPart = 16 << 20

// extractDOCX reads the main document part of a .docx: paragraphs (w:p)
// become lines, with "#" before headings and "- " before list items; runs'
// text (w:t), tabs and breaks are kept; table rows become lines with " | "
// between cells. The XML is streamed (never held whole) under the
// decompression budget and the depth limit.
func extractDOCX(data []byte, lim documents.Limits) (*documents.Document, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("%w: the .docx (a zip archive) cannot be opened: %v", documents.ErrDamaged, err)
	}
	files := make(map[string]*zip.File, len(zr.File))
	for _, f := range zr.File {
		files[f.Name] = f
	}
	budget := inflate.NewBudget(lim)

	main := "word/document.xml"
	if f := files["_rels/.rels"]; f != nil {
		if target, err := mainPartFromRels(f, budget, lim); err != nil {
			return nil, err
		} else if target != "" && files[target] != nil {
			main = target
		}
	}
	f := files[main]
	if f == nil {
		return nil, fmt.Errorf("%w: the .docx has no %s part", documents.ErrDamaged, main)
	}
	var styles map[string]int
	if sf := files[path.Join(path.Dir(main), "styles.xml")]; sf != nil {
		if styles, err = headingStyles(sf, budget, lim); err != nil {
			return nil, err
		}
	}
	r, err := openZipEntry(f, budget)
	if err != nil {
		return nil, err
	}
	text, err := docxText(r, styles, lim)
	if err != nil {
		var depth *depthError
		if errors.Is(err, documents.ErrLimit) && !errors.As(err, &depth) {
			return nil, err // names the zip entry already
		}
		return nil, fmt.Errorf("%s: %w", main, err)
	}
	doc := &documents.Document{Text: text}
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("%w: the .docx has no text (only images or empty paragraphs?)", documents.ErrNoText)
	}
	return doc, nil
}

func newXMLDecoder(r io.Reader) *xml.Decoder {
	d := xml.NewDecoder(r)
	d.CharsetReader = charset.NewReaderLabel
	return d
}

// xmlDepth counts element nesting and fails past the limit.
type xmlDepth struct {
	depth, max int
}

// depthError is ErrLimit for XML nested too deeply.
type depthError struct{ max int }

func (e *depthError) Error() string {
	return fmt.Sprintf("%v: XML elements nested deeper than %d levels", documents.ErrLimit, e.max)
}

func (e *depthError) Unwrap() error { return documents.ErrLimit }

func (x *xmlDepth) push() error {
	x.depth++
	if x.depth > x.max {
		return &depthError{x.max}
	}
	return nil
}

func (x *xmlDepth) pop() {
	if x.depth > 0 {
		x.depth--
	}
}

func xmlErr(err error) error {
	if errors.Is(err, documents.ErrLimit) || errors.Is(err, documents.ErrDamaged) || errors.Is(err, documents.ErrEncrypted) || errors.Is(err, documents.ErrUnsupported) {
		return err
	}
	return fmt.Errorf("%w: malformed XML: %v", documents.ErrDamaged, err)
}

// mainPartFromRels finds the officeDocument relationship's target.
func mainPartFromRels(f *zip.File, b *inflate.Budget, lim documents.Limits) (string, error) {
	data, err := readZipEntry(f, b, maxSmallPart)
	if err != nil {
		return "", err
	}
	d := newXMLDecoder(bytes.NewReader(data))
	depth := xmlDepth{max: lim.MaxDepth}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("_rels/.rels: %w", xmlErr(err))
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if err := depth.push(); err != nil {
				return "", fmt.Errorf("_rels/.rels: %w", err)
			}
			if t.Name.Local != "Relationship" {
				continue
			}
			var typ, target string
			for _, a := range t.Attr {
				switch a.Name.Local {
				case "Type":
					typ = a.Value
				case "Target":
					target = a.Value
				}
			}
			if strings.HasSuffix(typ, "/officeDocument") && target != "" {
				return strings.TrimPrefix(path.Clean("/"+target), "/"), nil
			}
		case xml.EndElement:
			depth.pop()
		}
	}
}

// headingStyles maps paragraph style IDs to heading levels (1-9) from
// styles.xml: a style named "heading N" or "Title", or with an outline level,
// or based on such a style.
func headingStyles(f *zip.File, b *inflate.Budget, lim documents.Limits) (map[string]int, error) {
	data, err := readZipEntry(f, b, maxSmallPart)
	if err != nil {
		return nil, err
	}
	type style struct {
		name, basedOn string
		outline       int // 0 none, else level
	}
	all := map[string]*style{}
	var cur *style
	d := newXMLDecoder(bytes.NewReader(data))
	depth := xmlDepth{max: lim.MaxDepth}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("styles.xml: %w", xmlErr(err))
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if err := depth.push(); err != nil {
				return nil, fmt.Errorf("styles.xml: %w", err)
			}
			switch t.Name.Local {
			case "style":
				cur = &style{}
				if id := attr(t, "styleId"); id != "" {
					all[id] = cur
				}
			case "name":
				if cur != nil {
					cur.name = strings.ToLower(attr(t, "val"))
				}
			case "basedOn":
				if cur != nil {
					cur.basedOn = attr(t, "val")
				}
			case "outlineLvl":
				if cur != nil {
					if n, err := strconv.Atoi(attr(t, "val")); err == nil && n >= 0 && n < 9 {
						cur.outline = n + 1
					}
				}
			}
		case xml.EndElement:
			depth.pop()
			if t.Name.Local == "style" {
				cur = nil
			}
		}
	}
	levels := make(map[string]int)
	for id := range all {
		s := all[id]
		for hops := 0; s != nil && hops < 16; hops++ {
			if lvl := headingLevel(s.name); lvl > 0 {
				levels[id] = lvl
				break
			}
			if s.outline > 0 {
				levels[id] = s.outline
				break
			}
			s = all[s.basedOn]
		}
	}
	return levels, nil
}

// headingLevel reads "heading 2" as 2 and "title" as 1.
func headingLevel(name string) int {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "title" {
		return 1
	}
	if rest, ok := strings.CutPrefix(name, "heading"); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil && n >= 1 && n <= 9 {
			return n
		}
	}
	return 0
}

func attr(t xml.StartElement, local string) string {
	for _, a := range t.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

func isW(n xml.Name) bool { return n.Space == nsW || n.Space == nsWStrict }

// docxText streams document.xml into text.
func docxText(r io.Reader, styles map[string]int, lim documents.Limits) (string, error) {
	d := newXMLDecoder(r)
	depth := xmlDepth{max: lim.MaxDepth}
	var (
		out      strings.Builder
		para     strings.Builder
		level    int  // heading level of the current paragraph
		list     bool // the current paragraph is a list item
		inText   int  // inside w:t or m:t
		inRun    int  // inside w:r
		skipAt   int  // depth of a skipped subtree (mc:Fallback, w:del), 0 when none
		tables   int  // table nesting
		cells    []string
		cell     strings.Builder
		inCell   int
		lastHead bool // the last thing written was a heading or table
	)
	emit := func(line string, blankBefore bool) error {
		if out.Len() > 0 {
			out.WriteByte('\n')
			if blankBefore || lastHead {
				out.WriteByte('\n')
			}
		}
		out.WriteString(line)
		if out.Len() > lim.MaxTextBytes {
			return documents.TextTooLarge(out.Len(), lim)
		}
		return nil
	}
	flushPara := func() error {
		text := strings.TrimRight(para.String(), " \t")
		para.Reset()
		lvl, li := level, list
		level, list = 0, false
		if inCell > 0 {
			if text != "" {
				if cell.Len() > 0 {
					cell.WriteByte(' ')
				}
				cell.WriteString(strings.ReplaceAll(text, "\n", " "))
			}
			return nil
		}
		if strings.TrimSpace(text) == "" {
			return nil
		}
		switch {
		case lvl > 0:
			err := emit(strings.Repeat("#", lvl)+" "+strings.ReplaceAll(text, "\n", " "), true)
			lastHead = true
			return err
		case li:
			err := emit("- "+text, false)
			lastHead = false
			return err
		}
		err := emit(text, false)
		lastHead = false
		return err
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", xmlErr(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if err := depth.push(); err != nil {
				return "", err
			}
			if skipAt > 0 {
				continue
			}
			name := t.Name
			if name.Space == nsMC && name.Local == "Fallback" {
				skipAt = depth.depth // the Choice already holds this content
				continue
			}
			if name.Space == nsMath && name.Local == "t" {
				inText++
				continue
			}
			if !isW(name) {
				continue
			}
			switch name.Local {
			case "del", "moveFrom":
				skipAt = depth.depth // tracked deletions are not the text
			case "p":
				if para.Len() > 0 { // a paragraph inside a paragraph (a text box)
					if err := flushPara(); err != nil {
						return "", err
					}
				}
			case "pStyle":
				if lvl := styles[attr(t, "val")]; lvl > 0 {
					level = lvl
				} else if lvl := headingLevel(attr(t, "val")); lvl > 0 {
					level = lvl
				} else if v := attr(t, "val"); strings.HasPrefix(strings.ToLower(v), "heading") {
					if n, err := strconv.Atoi(v[len("heading"):]); err == nil && n >= 1 && n <= 9 {
						level = n
					}
				}
			case "outlineLvl":
				if n, err := strconv.Atoi(attr(t, "val")); err == nil && n >= 0 && n < 9 {
					level = n + 1
				}
			case "numPr":
				list = true
			case "r":
				inRun++
			case "t":
				inText++
			case "tab":
				if inRun > 0 {
					para.WriteByte('\t')
				}
			case "br", "cr":
				if inRun > 0 {
					para.WriteByte('\n')
				}
			case "noBreakHyphen":
				if inRun > 0 {
					para.WriteByte('-')
				}
			case "tbl":
				if err := flushPara(); err != nil {
					return "", err
				}
				tables++
				if tables == 1 {
					lastHead = true // a blank line before the table
				}
			case "tr":
				if tables == 1 {
					cells = cells[:0]
				}
			case "tc":
				if tables == 1 {
					inCell++
					cell.Reset()
				}
			}
		case xml.EndElement:
			leaving := depth.depth
			depth.pop()
			if skipAt > 0 {
				if leaving == skipAt {
					skipAt = 0
				}
				continue
			}
			name := t.Name
			if name.Space == nsMath && name.Local == "t" {
				if inText > 0 {
					inText--
				}
				continue
			}
			if !isW(name) {
				continue
			}
			switch name.Local {
			case "t":
				if inText > 0 {
					inText--
				}
			case "r":
				if inRun > 0 {
					inRun--
				}
			case "p":
				if err := flushPara(); err != nil {
					return "", err
				}
			case "tc":
				if tables == 1 && inCell > 0 {
					if err := flushPara(); err != nil {
						return "", err
					}
					inCell--
					cells = append(cells, strings.TrimSpace(cell.String()))
					cell.Reset()
				}
			case "tr":
				if tables == 1 {
					row := strings.Join(cells, " | ")
					cells = cells[:0]
					if strings.Trim(row, " |") != "" {
						if err := emit(row, false); err != nil {
							return "", err
						}
						lastHead = false
					}
				}
			case "tbl":
				if tables > 0 {
					tables--
				}
				if tables == 0 {
					lastHead = true // a blank line after the table
				}
			}
		case xml.CharData:
			if skipAt == 0 && inText > 0 {
				para.Write(t)
				if para.Len() > lim.MaxTextBytes {
					return "", documents.TextTooLarge(para.Len(), lim)
				}
			}
		}
	}
	if err := flushPara(); err != nil {
		return "", err
	}
	return out.String(), nil
}
