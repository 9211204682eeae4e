package pdf

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

	"nibble/app/documents"
	"nibble/app/documents/extract/internal/inflate"
)

// pdfFile is a PDF's object layer: the cross-reference table, objects,
// streams and their filters. Everything is bounded: object lookups detect
// cycles, nesting is limited, and decoded stream bytes count against the
// document's inflate budget.
type pdfFile struct {
	data    []byte
	lim     documents.Limits
	budget  *inflate.Budget
	xref    map[int]xrefEntry
	trailer pdfDict
	crypt   *pdfCrypt

	cache     map[int]any
	objStms   map[int]*objStm
	resolving map[int]bool

	rebuilt   bool // the cross-reference table was rebuilt by scanning
	truncated bool // no %%EOF at the end: the file may be cut short
	scanned   map[int]xrefEntry
	missing   int // references to objects that do not exist
}

type xrefEntry struct {
	off   int // file offset of "n g obj", or the index inside an object stream
	gen   int
	stm   int // object stream number, 0 when the object is at off
	inStm bool
}

type objStm struct {
	data []byte
	offs map[int]int // object number -> offset in data
}

// maxXrefSections bounds the chain of /Prev cross-reference sections.
const maxXrefSections = 1024

// pdfObjDepth is the nesting allowed inside one PDF object.
func (f *pdfFile) objDepth() int {
	if f.lim.MaxDepth < 64 {
		return f.lim.MaxDepth
	}
	return 64
}

func openPDF(data []byte, lim documents.Limits) (*pdfFile, error) {
	f := &pdfFile{
		data:      data,
		lim:       lim,
		budget:    inflate.NewBudget(lim),
		xref:      map[int]xrefEntry{},
		cache:     map[int]any{},
		objStms:   map[int]*objStm{},
		resolving: map[int]bool{},
	}
	tail := data
	if len(tail) > 2048 {
		tail = tail[len(tail)-2048:]
	}
	f.truncated = !bytes.Contains(tail, []byte("%%EOF"))
	if err := f.readXrefChain(); err != nil || !f.rootOK() {
		if errors.Is(err, documents.ErrLimit) {
			return nil, err
		}
		if err := f.rebuildXref(); err != nil {
			return nil, err
		}
	}
	if enc := f.trailer["Encrypt"]; enc != nil {
		c, err := newPDFCrypt(f, enc)
		if err != nil {
			return nil, err
		}
		f.crypt = c
		f.cache = map[int]any{} // objects read before decryption was set up
		f.objStms = map[int]*objStm{}
	}
	return f, nil
}

func (f *pdfFile) lexer(at int) *pdfLexer {
	return &pdfLexer{b: f.data, pos: at, maxDepth: f.objDepth(), refs: true}
}

// rootOK reports whether the trailer's /Root leads to a dictionary.
func (f *pdfFile) rootOK() bool {
	root, err := f.resolve(f.trailer["Root"])
	if err != nil {
		return false
	}
	d, ok := root.(pdfDict)
	return ok && d != nil
}

// readXrefChain reads the cross-reference sections from startxref back
// through /Prev (and /XRefStm of hybrid files).
func (f *pdfFile) readXrefChain() error {
	i := bytes.LastIndex(f.data, []byte("startxref"))
	if i < 0 {
		return errors.New("no startxref")
	}
	l := f.lexer(i + len("startxref"))
	tok, err := l.next()
	off, ok := tok.(int64)
	if err != nil || !ok || off < 0 || off >= int64(len(f.data)) {
		return errors.New("bad startxref")
	}
	seen := map[int64]bool{}
	queue := []int64{off}
	for len(queue) > 0 {
		off := queue[0]
		queue = queue[1:]
		if seen[off] {
			continue // a /Prev loop
		}
		if len(seen) >= maxXrefSections {
			return fmt.Errorf("%w: more than %d cross-reference sections", documents.ErrLimit, maxXrefSections)
		}
		seen[off] = true
		trailer, err := f.readXrefSection(int(off))
		if err != nil {
			return err
		}
		if f.trailer == nil {
			f.trailer = trailer
		} else {
			for k, v := range trailer { // older sections fill in what newer ones lack
				if _, ok := f.trailer[k]; !ok {
					f.trailer[k] = v
				}
			}
		}
		if x, ok := asInt(trailer["XRefStm"]); ok && x > 0 && x < int64(len(f.data)) {
			queue = append(queue, x)
		}
		if p, ok := asInt(trailer["Prev"]); ok && p >= 0 && p < int64(len(f.data)) {
			queue = append(queue, p)
		}
	}
	if f.trailer == nil {
		return errors.New("no trailer")
	}
	return nil
}

// readXrefSection reads a classic "xref" table or a cross-reference stream
// at off. Entries already known (from newer sections) are kept.
func (f *pdfFile) readXrefSection(off int) (pdfDict, error) {
	l := f.lexer(off)
	tok, err := l.next()
	if err != nil {
		return nil, err
	}
	if tok == pdfKeyword("xref") {
		for {
			tok, err := l.next()
			if err != nil {
				return nil, err
			}
			if tok == pdfKeyword("trailer") {
				break
			}
			start, ok1 := tok.(int64)
			ctok, _ := l.next()
			count, ok2 := ctok.(int64)
			if !ok1 || !ok2 || start < 0 || count < 0 || start+count > 1<<31 {
				return nil, errors.New("bad xref subsection")
			}
			// Entries are 20 bytes; more than the file holds is a lie.
			if count > int64(len(f.data)-l.pos)/18+1 {
				return nil, errors.New("xref subsection longer than the file")
			}
			for k := int64(0); k < count; k++ {
				o, _ := l.next()
				g, _ := l.next()
				kind, err := l.next()
				if err != nil {
					return nil, err
				}
				ov, ok1 := o.(int64)
				gv, ok2 := g.(int64)
				if !ok1 || !ok2 {
					return nil, errors.New("bad xref entry")
				}
				num := int(start + k)
				if _, known := f.xref[num]; known {
					continue
				}
				switch kind {
				case pdfKeyword("n"):
					if ov > 0 && ov < int64(len(f.data)) {
						f.xref[num] = xrefEntry{off: int(ov), gen: int(gv)}
					}
				case pdfKeyword("f"):
					f.xref[num] = xrefEntry{off: -1}
				default:
					return nil, errors.New("bad xref entry type")
				}
			}
		}
		tok, err := l.object(0)
		if err != nil {
			return nil, err
		}
		d, ok := tok.(pdfDict)
		if !ok {
			return nil, errors.New("xref table not followed by a trailer dictionary")
		}
		return d, nil
	}
	// A cross-reference stream: "n g obj << /Type /XRef ... >> stream".
	l.pos = off
	_, obj, err := f.parseIndirect(off, -1)
	if err != nil {
		return nil, err
	}
	s, ok := obj.(*pdfStream)
	if !ok || asName(s.dict["Type"]) != "XRef" {
		return nil, errors.New("startxref does not point to a cross-reference table")
	}
	if err := f.readXrefStream(s); err != nil {
		return nil, err
	}
	return s.dict, nil
}

func (f *pdfFile) readXrefStream(s *pdfStream) error {
	w, ok := s.dict["W"].(pdfArray)
	if !ok || len(w) < 3 {
		return errors.New("xref stream without /W")
	}
	var ws [3]int
	total := 0
	for i := 0; i < 3; i++ {
		n, ok := asInt(w[i])
		if !ok || n < 0 || n > 8 {
			return errors.New("bad /W in xref stream")
		}
		ws[i] = int(n)
		total += int(n)
	}
	if total == 0 {
		return errors.New("bad /W in xref stream")
	}
	data, err := f.decodeStream(s, false)
	if err != nil {
		return err
	}
	size, _ := asInt(s.dict["Size"])
	index, _ := s.dict["Index"].(pdfArray)
	if index == nil {
		index = pdfArray{int64(0), size}
	}
	field := func(b []byte, def int64) int64 {
		if len(b) == 0 {
			return def
		}
		var v int64
		for _, c := range b {
			v = v<<8 | int64(c)
		}
		return v
	}
	pos := 0
	for i := 0; i+1 < len(index); i += 2 {
		start, ok1 := asInt(index[i])
		count, ok2 := asInt(index[i+1])
		if !ok1 || !ok2 || start < 0 || count < 0 || start+count > 1<<31 {
			return errors.New("bad /Index in xref stream")
		}
		for k := int64(0); k < count && pos+total <= len(data); k++ {
			row := data[pos : pos+total]
			pos += total
			typ := field(row[:ws[0]], 1)
			a := field(row[ws[0]:ws[0]+ws[1]], 0)
			b := field(row[ws[0]+ws[1]:], 0)
			num := int(start + k)
			if _, known := f.xref[num]; known {
				continue
			}
			switch typ {
			case 0:
				f.xref[num] = xrefEntry{off: -1}
			case 1:
				if a > 0 && a < int64(len(f.data)) {
					f.xref[num] = xrefEntry{off: int(a), gen: int(b)}
				}
			case 2:
				if a > 0 && a < 1<<31 && b >= 0 && b < 1<<31 {
					f.xref[num] = xrefEntry{stm: int(a), off: int(b), inStm: true}
				}
			}
		}
	}
	return nil
}

// rebuildXref scans the whole file for "n g obj" and trailers: the repair
// for damaged or truncated files.
func (f *pdfFile) rebuildXref() error {
	f.rebuilt = true
	f.xref = f.scanObjects()
	f.cache = map[int]any{}
	f.objStms = map[int]*objStm{}
	f.trailer = pdfDict{}
	// Trailers, oldest first so that newer ones win.
	for at := 0; ; {
		i := findKeyword(f.data, "trailer", at)
		if i < 0 {
			break
		}
		at = i + 1
		l := f.lexer(i + len("trailer"))
		if d, err := l.object(0); err == nil {
			if td, ok := d.(pdfDict); ok {
				for k, v := range td {
					f.trailer[k] = v
				}
			}
		}
	}
	// Cross-reference streams carry the trailer keys too; and objects in
	// object streams must be found through them or through the streams.
	nums := make([]int, 0, len(f.xref))
	for n := range f.xref {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	for _, n := range nums {
		e := f.xref[n]
		s, ok := f.peekStream(e.off)
		if !ok {
			continue
		}
		switch asName(s["Type"]) {
		case "XRef":
			for _, k := range []string{"Root", "Info", "Encrypt", "ID"} {
				if v, ok := s[pdfName(k)]; ok {
					f.trailer[pdfName(k)] = v
				}
			}
		case "ObjStm":
			f.indexObjStm(n)
		}
	}
	if !f.rootOK() {
		// Find the catalog itself.
		for _, n := range nums {
			obj, err := f.object(pdfRef{n, f.xref[n].gen})
			if err != nil {
				continue
			}
			if d, ok := obj.(pdfDict); ok && asName(d["Type"]) == "Catalog" {
				f.trailer["Root"] = pdfRef{n, f.xref[n].gen}
				break
			}
		}
	}
	if !f.rootOK() {
		if f.truncated {
			return fmt.Errorf("%w: the PDF is truncated (it has no %%%%EOF) and its document catalog is missing", documents.ErrDamaged)
		}
		return fmt.Errorf("%w: the PDF's structure is broken (no cross-reference table and no document catalog)", documents.ErrDamaged)
	}
	return nil
}

// scanObjects finds every "n g obj" in the file; a later definition of the
// same number wins, as with incremental updates.
func (f *pdfFile) scanObjects() map[int]xrefEntry {
	if f.scanned != nil {
		return f.scanned
	}
	found := map[int]xrefEntry{}
	d := f.data
	for at := 0; ; {
		i := findKeyword(d, "obj", at)
		if i < 0 {
			break
		}
		at = i + 3
		// Walk back over "gen" and "num".
		j := i - 1
		for j >= 0 && isPDFSpace(d[j]) {
			j--
		}
		genEnd := j + 1
		for j >= 0 && d[j] >= '0' && d[j] <= '9' {
			j--
		}
		genStart := j + 1
		if genStart == genEnd || j < 0 || !isPDFSpace(d[j]) {
			continue
		}
		for j >= 0 && isPDFSpace(d[j]) {
			j--
		}
		numEnd := j + 1
		for j >= 0 && d[j] >= '0' && d[j] <= '9' {
			j--
		}
		numStart := j + 1
		if numStart == numEnd || numEnd-numStart > 10 || genEnd-genStart > 5 {
			continue
		}
		num, ok1 := parsePDFNumber(d[numStart:numEnd])
		gen, ok2 := parsePDFNumber(d[genStart:genEnd])
		n, _ := num.(int64)
		g, _ := gen.(int64)
		if !ok1 || !ok2 || n <= 0 || n >= 1<<31 {
			continue
		}
		found[int(n)] = xrefEntry{off: numStart, gen: int(g)}
	}
	f.scanned = found
	return found
}

// peekStream reads the dictionary of the object at off if it is a stream,
// without decoding anything.
func (f *pdfFile) peekStream(off int) (pdfDict, bool) {
	_, obj, err := f.parseIndirect(off, -1)
	if err != nil {
		return nil, false
	}
	s, ok := obj.(*pdfStream)
	if !ok {
		return nil, false
	}
	return s.dict, true
}

// indexObjStm adds the objects of object stream n to the table, where the
// table has no direct definition for them.
func (f *pdfFile) indexObjStm(n int) {
	os, err := f.loadObjStm(n)
	if err != nil {
		return
	}
	for num := range os.offs {
		if _, ok := f.xref[num]; !ok {
			f.xref[num] = xrefEntry{stm: n, inStm: true}
		}
	}
}

// parseIndirect parses "num gen obj <object> [stream ... endstream]" at
// off. wantNum, when >= 0, must match the number found.
func (f *pdfFile) parseIndirect(off, wantNum int) (pdfRef, any, error) {
	if off < 0 || off >= len(f.data) {
		return pdfRef{}, nil, errors.New("offset outside the file")
	}
	l := f.lexer(off)
	l.refs = false
	a, err1 := l.next()
	b, err2 := l.next()
	c, err3 := l.next()
	num, ok1 := a.(int64)
	gen, ok2 := b.(int64)
	if err1 != nil || err2 != nil || err3 != nil || !ok1 || !ok2 || c != pdfKeyword("obj") {
		return pdfRef{}, nil, fmt.Errorf("no object at byte %d", off)
	}
	if wantNum >= 0 && int(num) != wantNum {
		return pdfRef{}, nil, fmt.Errorf("object %d expected at byte %d, found %d", wantNum, off, num)
	}
	ref := pdfRef{int(num), int(gen)}
	l.refs = true
	obj, err := l.object(0)
	if err != nil {
		if errors.Is(err, documents.ErrLimit) {
			return ref, nil, err
		}
		return ref, nil, fmt.Errorf("object %d: %v", num, err)
	}
	d, isDict := obj.(pdfDict)
	if !isDict {
		return ref, obj, nil
	}
	save := l.pos
	if tok, err := l.next(); err != nil || tok != pdfKeyword("stream") {
		l.pos = save
		return ref, obj, nil
	}
	// The data starts after the end of line that follows "stream".
	start := l.pos
	if start < len(f.data) && f.data[start] == '\r' {
		start++
	}
	if start < len(f.data) && f.data[start] == '\n' {
		start++
	}
	end := -1
	if n, ok := asInt(d["Length"]); ok || d["Length"] != nil {
		if !ok {
			// An indirect length: resolve it, unless that loops back here.
			if r, isRef := d["Length"].(pdfRef); isRef && r.num != ref.num {
				if v, err := f.resolve(r); err == nil {
					n, ok = asInt(v)
				}
			}
		}
		if ok && n >= 0 && int64(start)+n <= int64(len(f.data)) {
			e := start + int(n)
			// Trust /Length only if "endstream" follows.
			k := e
			for k < len(f.data) && isPDFSpace(f.data[k]) {
				k++
			}
			if bytes.HasPrefix(f.data[k:], []byte("endstream")) {
				end = e
			}
		}
	}
	if end < 0 {
		k := findKeyword(f.data, "endstream", start)
		if k < 0 {
			// Truncated in the middle of a stream: keep what is there.
			end = len(f.data)
		} else {
			end = k
			if end > start && f.data[end-1] == '\n' {
				end--
			}
			if end > start && f.data[end-1] == '\r' {
				end--
			}
		}
	}
	return ref, &pdfStream{dict: d, raw: f.data[start:end:end], ref: ref}, nil
}

// resolve follows a reference; other values are returned as they are.
func (f *pdfFile) resolve(v any) (any, error) {
	r, ok := v.(pdfRef)
	if !ok {
		return v, nil
	}
	return f.object(r)
}

// object returns the object numbered r.num (nil when it does not exist).
func (f *pdfFile) object(r pdfRef) (any, error) {
	if obj, ok := f.cache[r.num]; ok {
		return obj, nil
	}
	if f.resolving[r.num] {
		return nil, fmt.Errorf("object %d refers to itself", r.num)
	}
	f.resolving[r.num] = true
	defer delete(f.resolving, r.num)
	if len(f.resolving) > 64 {
		return nil, fmt.Errorf("%w: object references nested too deeply", documents.ErrLimit)
	}

	e, ok := f.xref[r.num]
	if !ok || e.off < 0 && !e.inStm {
		// Absent or free: null. A damaged table may have missed it.
		if s, found := f.scanObjects()[r.num]; found && !ok {
			e = s
		} else {
			f.missing++
			return nil, nil
		}
	}
	var obj any
	var err error
	if e.inStm {
		obj, err = f.objectInStream(r.num, e.stm)
	} else {
		_, obj, err = f.parseIndirect(e.off, r.num)
		if err != nil && !errors.Is(err, documents.ErrLimit) {
			// A wrong offset: look for the object where it really is.
			if s, found := f.scanObjects()[r.num]; found && s.off != e.off {
				_, obj, err = f.parseIndirect(s.off, r.num)
			}
		}
		if err == nil && f.crypt != nil {
			obj = f.crypt.decryptObject(obj, r, 0)
		}
	}
	if err != nil {
		if errors.Is(err, documents.ErrLimit) || errors.Is(err, documents.ErrEncrypted) {
			return nil, err
		}
		f.missing++
		return nil, err
	}
	f.cache[r.num] = obj
	return obj, nil
}

func (f *pdfFile) loadObjStm(n int) (*objStm, error) {
	if os, ok := f.objStms[n]; ok {
		if os == nil {
			return nil, fmt.Errorf("object stream %d is unreadable", n)
		}
		return os, nil
	}
	f.objStms[n] = nil // a stream that contains itself fails instead of looping
	e, ok := f.xref[n]
	if !ok || e.inStm || e.off < 0 {
		if s, found := f.scanObjects()[n]; found {
			e = s
		} else {
			return nil, fmt.Errorf("object stream %d not found", n)
		}
	}
	_, obj, err := f.parseIndirect(e.off, n)
	if err != nil {
		return nil, err
	}
	s, ok := obj.(*pdfStream)
	if !ok {
		return nil, fmt.Errorf("object %d is not an object stream", n)
	}
	data, err := f.decodeStream(s, true)
	if err != nil {
		return nil, fmt.Errorf("object stream %d: %w", n, err)
	}
	count, _ := asInt(s.dict["N"])
	first, _ := asInt(s.dict["First"])
	if count < 0 || first < 0 || first > int64(len(data)) {
		return nil, fmt.Errorf("object stream %d has a bad header", n)
	}
	l := &pdfLexer{b: data[:first], maxDepth: 1}
	os := &objStm{data: data, offs: map[int]int{}}
	for k := int64(0); k < count; k++ {
		a, err1 := l.next()
		b, err2 := l.next()
		num, ok1 := a.(int64)
		off, ok2 := b.(int64)
		if err1 != nil || err2 != nil || !ok1 || !ok2 {
			break
		}
		if off >= 0 && first+off < int64(len(data)) && num > 0 && num < 1<<31 {
			os.offs[int(num)] = int(first + off)
		}
	}
	f.objStms[n] = os
	return os, nil
}

func (f *pdfFile) objectInStream(num, stm int) (any, error) {
	os, err := f.loadObjStm(stm)
	if err != nil {
		return nil, err
	}
	off, ok := os.offs[num]
	if !ok {
		return nil, fmt.Errorf("object %d is not in object stream %d", num, stm)
	}
	l := &pdfLexer{b: os.data, pos: off, maxDepth: f.objDepth(), refs: true}
	return l.object(0)
}

// dict resolves v and returns it as a dictionary (a stream's dictionary
// counts), or nil.
func (f *pdfFile) dict(v any) pdfDict {
	o, err := f.resolve(v)
	if err != nil {
		return nil
	}
	switch d := o.(type) {
	case pdfDict:
		return d
	case *pdfStream:
		return d.dict
	}
	return nil
}

func (f *pdfFile) array(v any) pdfArray {
	o, err := f.resolve(v)
	if err != nil {
		return nil
	}
	a, _ := o.(pdfArray)
	return a
}

func (f *pdfFile) get(d pdfDict, key string) any {
	v, err := f.resolve(dictGet(d, key))
	if err != nil {
		return nil
	}
	return v
}

func (f *pdfFile) num(v any) (float64, bool) {
	o, err := f.resolve(v)
	if err != nil {
		return 0, false
	}
	return asFloat(o)
}
