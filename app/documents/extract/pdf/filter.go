package pdf

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"errors"
	"fmt"
	"io"

	"nibble/app/documents"
)

// errStreamDamaged marks a stream whose data ended early or was corrupt;
// decodeStream returns what it could decode along with it.
var errStreamDamaged = errors.New("stream data is damaged")

// decodeStream returns the decoded data of s. With decrypt, an encrypted
// file's stream is decrypted first. On damaged data it returns what it
// decoded and an error wrapping errStreamDamaged; limits give ErrLimit.
func (f *pdfFile) decodeStream(s *pdfStream, decrypt bool) ([]byte, error) {
	data := s.raw
	if decrypt && f.crypt != nil && asName(s.dict["Type"]) != "XRef" {
		var err error
		if data, err = f.crypt.decryptStream(s); err != nil {
			return nil, err
		}
	}
	filters, parms := f.streamFilters(s.dict)
	var damaged error
	for i, name := range filters {
		out, err := f.applyFilter(name, parms[i], data)
		if err != nil {
			if errors.Is(err, errStreamDamaged) && damaged == nil {
				damaged = err
			} else if !errors.Is(err, errStreamDamaged) {
				return nil, err
			}
		}
		data = out
	}
	return data, damaged
}

func (f *pdfFile) streamFilters(d pdfDict) ([]string, []pdfDict) {
	fv := f.get(d, "Filter")
	pv := f.get(d, "DecodeParms")
	if fv == nil {
		fv = f.get(d, "F") // inline images abbreviate
	}
	var names []string
	var parms []pdfDict
	switch v := fv.(type) {
	case pdfName:
		names = []string{string(v)}
		parms = []pdfDict{f.dict(pv)}
	case pdfArray:
		pa, _ := pv.(pdfArray)
		for i, n := range v {
			name, _ := f.resolve(n)
			names = append(names, asName(name))
			var p pdfDict
			if i < len(pa) {
				p = f.dict(pa[i])
			}
			parms = append(parms, p)
		}
	}
	return names, parms
}

func (f *pdfFile) applyFilter(name string, parms pdfDict, data []byte) ([]byte, error) {
	var r io.Reader
	src := bytes.NewReader(data)
	consumed := func() int64 { return int64(len(data) - src.Len()) }
	switch name {
	case "FlateDecode", "Fl":
		zr, err := zlib.NewReader(src)
		if err != nil {
			// Some writers leave out the zlib header: try raw deflate.
			src.Reset(data)
			r = flate.NewReader(src)
		} else {
			r = zr
		}
	case "LZWDecode", "LZW":
		early := int64(1)
		if v, ok := asInt(parms["EarlyChange"]); ok {
			early = v
		}
		lzw := &lzwReader{src: data, early: early == 1}
		consumed = func() int64 { return int64(lzw.bit / 8) }
		r = lzw
	case "ASCIIHexDecode", "AHx":
		return asciiHexDecode(data), nil
	case "ASCII85Decode", "A85":
		return ascii85Decode(data)
	case "RunLengthDecode", "RL":
		rl := &runLengthReader{src: data}
		consumed = func() int64 { return int64(rl.pos) }
		r = rl
	case "Crypt":
		return data, nil // only the Identity crypt filter is used in practice
	case "":
		return data, nil
	default:
		// DCTDecode, JPXDecode, CCITTFaxDecode, JBIG2Decode: images.
		return nil, fmt.Errorf("filter %s is for images, not text", name)
	}
	out, err := readBudget(f.budget.Reader(r, consumed, "a PDF stream"))
	if err != nil {
		if errors.Is(err, documents.ErrLimit) {
			return nil, err
		}
		if !errors.Is(err, zlib.ErrChecksum) { // a wrong checksum after complete data is harmless
			return out, fmt.Errorf("%w: %s: %v", errStreamDamaged, name, err)
		}
	}
	if p, ok := asInt(parms["Predictor"]); ok && p > 1 {
		return applyPredictor(out, p, parms)
	}
	return out, nil
}

// readBudget reads r to its end (what was read is returned with an error).
func readBudget(r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

func applyPredictor(data []byte, pred int64, parms pdfDict) ([]byte, error) {
	colors, bpc, columns := int64(1), int64(8), int64(1)
	if v, ok := asInt(parms["Colors"]); ok {
		colors = v
	}
	if v, ok := asInt(parms["BitsPerComponent"]); ok {
		bpc = v
	}
	if v, ok := asInt(parms["Columns"]); ok {
		columns = v
	}
	if colors < 1 || colors > 32 || columns < 1 || columns > 1<<20 ||
		(bpc != 1 && bpc != 2 && bpc != 4 && bpc != 8 && bpc != 16) {
		return nil, fmt.Errorf("%w: bad predictor parameters", errStreamDamaged)
	}
	bpp := int((colors*bpc + 7) / 8)
	rowLen := int((colors*bpc*columns + 7) / 8)
	switch {
	case pred == 2: // TIFF: only 8-bit components are common
		if bpc != 8 {
			return data, nil
		}
		out := append([]byte(nil), data...)
		for row := 0; row+rowLen <= len(out); row += rowLen {
			for i := bpp; i < rowLen; i++ {
				out[row+i] += out[row+i-bpp]
			}
		}
		return out, nil
	case pred >= 10:
		out := make([]byte, 0, len(data))
		prev := make([]byte, rowLen)
		cur := make([]byte, rowLen)
		for pos := 0; pos < len(data); pos += rowLen + 1 {
			typ := data[pos]
			end := pos + 1 + rowLen
			if end > len(data) {
				break // a partial last row
			}
			copy(cur, data[pos+1:end])
			for i := 0; i < rowLen; i++ {
				var left, upLeft byte
				if i >= bpp {
					left = cur[i-bpp]
					upLeft = prev[i-bpp]
				}
				up := prev[i]
				switch typ {
				case 1:
					cur[i] += left
				case 2:
					cur[i] += up
				case 3:
					cur[i] += byte((int(left) + int(up)) / 2)
				case 4:
					cur[i] += paeth(left, up, upLeft)
				}
			}
			out = append(out, cur...)
			prev, cur = cur, prev
		}
		return out, nil
	}
	return data, nil
}

func paeth(a, b, c byte) byte {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := abs(p-int(a)), abs(p-int(b)), abs(p-int(c))
	switch {
	case pa <= pb && pa <= pc:
		return a
	case pb <= pc:
		return b
	}
	return c
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func asciiHexDecode(data []byte) []byte {
	out := make([]byte, 0, len(data)/2)
	var hi byte
	half := false
	for _, c := range data {
		if c == '>' {
			break
		}
		if !isHex(c) {
			continue
		}
		if half {
			out = append(out, hi<<4|unhex(c))
		} else {
			hi = unhex(c)
		}
		half = !half
	}
	if half {
		out = append(out, hi<<4)
	}
	return out
}

func ascii85Decode(data []byte) ([]byte, error) {
	if i := bytes.Index(data, []byte("~>")); i >= 0 {
		data = data[:i]
	}
	if bytes.HasPrefix(data, []byte("<~")) {
		data = data[2:]
	}
	out := make([]byte, 0, len(data)*4/5+4)
	var group [5]byte
	n := 0
	for _, c := range data {
		switch {
		case c == 'z' && n == 0:
			out = append(out, 0, 0, 0, 0)
			continue
		case c >= '!' && c <= 'u':
			group[n] = c - '!'
			n++
		case isPDFSpace(c):
			continue
		default:
			return out, fmt.Errorf("%w: bad character %q in ASCII85 data", errStreamDamaged, c)
		}
		if n == 5 {
			v := uint64(0)
			for _, g := range group {
				v = v*85 + uint64(g)
			}
			if v > 0xffffffff {
				return out, fmt.Errorf("%w: ASCII85 group out of range", errStreamDamaged)
			}
			out = append(out, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
			n = 0
		}
	}
	if n > 1 {
		for i := n; i < 5; i++ {
			group[i] = 'u' - '!'
		}
		v := uint64(0)
		for _, g := range group {
			v = v*85 + uint64(g)
		}
		b := []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
		out = append(out, b[:n-1]...)
	}
	return out, nil
}

// runLengthReader decodes RunLengthDecode data.
type runLengthReader struct {
	src  []byte
	pos  int
	run  int // bytes of a repeat left to emit
	rep  byte
	lit  int // literal bytes left to copy
	done bool
}

func (r *runLengthReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		switch {
		case r.run > 0:
			p[n] = r.rep
			n++
			r.run--
		case r.lit > 0:
			if r.pos >= len(r.src) {
				return n, io.ErrUnexpectedEOF
			}
			p[n] = r.src[r.pos]
			r.pos++
			n++
			r.lit--
		default:
			if r.done || r.pos >= len(r.src) {
				if n == 0 {
					return 0, io.EOF
				}
				return n, nil
			}
			c := r.src[r.pos]
			r.pos++
			switch {
			case c == 128:
				r.done = true
			case c < 128:
				r.lit = int(c) + 1
			default:
				if r.pos >= len(r.src) {
					return n, io.ErrUnexpectedEOF
				}
				r.rep = r.src[r.pos]
				r.pos++
				r.run = 257 - int(c)
			}
		}
	}
	return n, nil
}

// lzwReader decodes PDF's LZW (MSB first, 9 to 12 bit codes, with the
// EarlyChange option that Go's compress/lzw does not have).
type lzwReader struct {
	src   []byte
	early bool
	bit   int // position in src, in bits
	table [][]byte
	prev  []byte
	width int
	pend  []byte
	done  bool
}

func (r *lzwReader) reset() {
	r.table = r.table[:0]
	for i := 0; i < 256; i++ {
		r.table = append(r.table, []byte{byte(i)})
	}
	r.table = append(r.table, nil, nil) // 256 clear, 257 end
	r.width = 9
	r.prev = nil
}

func (r *lzwReader) code() (int, bool) {
	if r.bit+r.width > len(r.src)*8 {
		return 0, false
	}
	v := 0
	for i := 0; i < r.width; i++ {
		b := r.src[(r.bit+i)/8]
		v = v<<1 | int(b>>(7-uint((r.bit+i)%8)))&1
	}
	r.bit += r.width
	return v, true
}

func (r *lzwReader) Read(p []byte) (int, error) {
	if r.table == nil {
		r.table = make([][]byte, 0, 4096)
		r.reset()
	}
	n := 0
	for n < len(p) {
		if len(r.pend) > 0 {
			m := copy(p[n:], r.pend)
			n += m
			r.pend = r.pend[m:]
			continue
		}
		if r.done {
			break
		}
		c, ok := r.code()
		if !ok || c == 257 {
			r.done = true
			break
		}
		if c == 256 {
			r.reset()
			continue
		}
		var entry []byte
		switch {
		case c < len(r.table) && r.table[c] != nil:
			entry = r.table[c]
		case c == len(r.table) && r.prev != nil:
			entry = append(append([]byte(nil), r.prev...), r.prev[0])
		default:
			r.done = true
			return n, fmt.Errorf("bad LZW code %d", c)
		}
		if r.prev != nil && len(r.table) < 4096 {
			r.table = append(r.table, append(append([]byte(nil), r.prev...), entry[0]))
		}
		r.prev = entry
		r.pend = entry
		size := len(r.table)
		if r.early {
			size++
		}
		switch {
		case size > 2048:
			r.width = 12
		case size > 1024:
			r.width = 11
		case size > 512:
			r.width = 10
		}
	}
	if n == 0 && r.done {
		return 0, io.EOF
	}
	return n, nil
}
