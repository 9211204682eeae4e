package gguf

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"

	"nibble/engine/ggml"
)

const (
	magic            = "GGUF"
	defaultAlignment = 32
	// maxNameLen is GGML_MAX_NAME: names are stored NUL-terminated in 64
	// bytes, so llama.cpp rejects names of 64 bytes or more.
	maxNameLen = 64
	maxDims    = 4 // GGML_MAX_DIMS
	// The fewest bytes a KV pair (non-empty key, 1-byte value) and a tensor
	// info (empty name, one dim) occupy: counts are checked against them.
	minKVBytes     = 8 + 1 + 4 + 1
	minTensorBytes = 8 + 4 + 8 + 4 + 8
	// KeyAlignment is the metadata key that overrides the data alignment.
	KeyAlignment = "general.alignment"
)

// HeaderOptions tunes ReadHeader.
type HeaderOptions struct {
	// SkipArraysLongerThan > 0 leaves arrays with more elements than this
	// unread: their Value keeps Type, Elem and Len but Data is nil, and their
	// bytes are skipped (for string arrays only the length prefixes are
	// read). 0 reads everything.
	SkipArraysLongerThan int
}

// ReadHeader parses and validates the header of a GGUF file of the given
// size read through r. It never reads tensor data; it reads the header in
// 64 KiB chunks so a remote reader issues few requests. The File it returns
// has no tensor data (TensorData returns nil) and needs no Close.
func ReadHeader(r io.ReaderAt, size int64, opt HeaderOptions) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("gguf: negative file size %d", size)
	}
	return parse(newSource(r, uint64(size)), opt)
}

func parse(s *source, opt HeaderOptions) (*File, error) {
	f := &File{Alignment: defaultAlignment}
	if err := parseFixedHeader(s, f); err != nil {
		return nil, err
	}
	nTensors, nKV, err := parseCounts(s)
	if err != nil {
		return nil, err
	}
	if err := parseKV(s, f, nKV, opt); err != nil {
		return nil, err
	}
	if err := parseTensorInfos(s, f, nTensors); err != nil {
		return nil, err
	}
	return f, checkDataSection(s, f)
}

func parseFixedHeader(s *source, f *File) error {
	if s.size < 4 {
		return fmt.Errorf("gguf: magic at offset 0: file is %d bytes, too short for a GGUF file: %w", s.size, io.ErrUnexpectedEOF)
	}
	b, err := s.next(4, "magic")
	if err != nil {
		return err
	}
	if string(b) != magic {
		return fmt.Errorf("gguf: magic at offset 0: got %q, want %q (not a GGUF file)", b, magic)
	}
	v, err := s.u32("version")
	if err != nil {
		return err
	}
	switch {
	case v == 1:
		return fmt.Errorf("gguf: version at offset 4: GGUF v1 is no longer supported (llama.cpp rejects it too); convert the file again")
	case v != 2 && v != 3 && v&0xFFFF == 0:
		return fmt.Errorf("gguf: version at offset 4: %#x looks byte-swapped (a big-endian file?); only little-endian v2/v3 are supported", v)
	case v != 2 && v != 3:
		return fmt.Errorf("gguf: version at offset 4: %d is not supported (want 2 or 3)", v)
	}
	f.Version = v
	return nil
}

func parseCounts(s *source) (nTensors, nKV uint64, err error) {
	if nTensors, err = s.u64("tensor count"); err != nil {
		return 0, 0, err
	}
	if nKV, err = s.u64("metadata count"); err != nil {
		return 0, 0, err
	}
	left := s.remaining()
	if nTensors > left/minTensorBytes {
		return 0, 0, fmt.Errorf("gguf: tensor count at offset 8: %d tensors cannot fit in the %d bytes left in the file", nTensors, left)
	}
	if nKV > left/minKVBytes {
		return 0, 0, fmt.Errorf("gguf: metadata count at offset 16: %d key-value pairs cannot fit in the %d bytes left in the file", nKV, left)
	}
	if nTensors*minTensorBytes+nKV*minKVBytes > left {
		return 0, 0, fmt.Errorf("gguf: counts at offset 8: %d tensors and %d key-value pairs cannot fit in the %d bytes left in the file", nTensors, nKV, left)
	}
	return nTensors, nKV, nil
}

func parseKV(s *source, f *File, n uint64, opt HeaderOptions) error {
	f.Keys = make([]string, 0, n)
	f.KV = make(map[string]Value, n)
	vr := &valueReader{s: s, skip: opt.SkipArraysLongerThan}
	alignWhere := ""
	for i := uint64(0); i < n; i++ {
		off := s.pos
		key, err := s.str(fmt.Sprintf("kv %d key", i))
		if err != nil {
			return err
		}
		if key == "" {
			return fmt.Errorf("gguf: kv %d at offset %d: empty key", i, off)
		}
		if _, dup := f.KV[key]; dup {
			return fmt.Errorf("gguf: kv %d (%q) at offset %d: duplicate key", i, key, off)
		}
		what := fmt.Sprintf("kv %d (%q)", i, key)
		typeOff := s.pos
		t, err := s.u32(what + " type")
		if err != nil {
			return err
		}
		if !ValueType(t).Known() {
			return fmt.Errorf("gguf: %s type at offset %d: unknown value type %d", what, typeOff, t)
		}
		v, err := vr.value(ValueType(t), 0, what)
		if err != nil {
			return err
		}
		f.Keys = append(f.Keys, key)
		f.KV[key] = v
		if key == KeyAlignment {
			alignWhere = fmt.Sprintf("%s at offset %d", what, off)
		}
	}
	if v, ok := f.KV[KeyAlignment]; ok {
		a, isU32 := v.Data.(uint32)
		if v.Type != Uint32 || !isU32 {
			return fmt.Errorf("gguf: %s: alignment must be of type u32, got %s", alignWhere, v.Type)
		}
		if a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf: %s: alignment %d is not a power of two", alignWhere, a)
		}
		f.Alignment = uint64(a)
	}
	return nil
}

func parseTensorInfos(s *source, f *File, n uint64) error {
	f.Tensors = make([]TensorInfo, 0, n)
	f.index = make(map[string]int, n)
	for i := uint64(0); i < n; i++ {
		off := s.pos
		name, err := s.str(fmt.Sprintf("tensor %d name", i))
		if err != nil {
			return err
		}
		where := fmt.Sprintf("tensor %d (%q) at offset %d", i, name, off)
		if len(name) >= maxNameLen {
			return fmt.Errorf("gguf: %s: name is %d bytes, limit is %d", where, len(name), maxNameLen-1)
		}
		if _, dup := f.index[name]; dup {
			return fmt.Errorf("gguf: %s: duplicate tensor name", where)
		}
		t, err := readTensorInfo(s, name, where, f.Alignment)
		if err != nil {
			return err
		}
		f.index[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	return nil
}

func readTensorInfo(s *source, name, where string, alignment uint64) (TensorInfo, error) {
	t := TensorInfo{Name: name}
	nd, err := s.u32(where + ": n_dims")
	if err != nil {
		return t, err
	}
	if nd < 1 || nd > maxDims {
		return t, fmt.Errorf("gguf: %s: n_dims %d is not in 1..%d", where, nd, maxDims)
	}
	t.Dims = make([]uint64, nd)
	elems := uint64(1)
	for j := range t.Dims {
		d, err := s.u64(fmt.Sprintf("%s: ne[%d]", where, j))
		if err != nil {
			return t, err
		}
		if d == 0 || d > math.MaxInt64 {
			return t, fmt.Errorf("gguf: %s: ne[%d] = %d is not in 1..2^63-1", where, j, d)
		}
		hi, lo := bits.Mul64(elems, d)
		if hi != 0 || lo >= math.MaxInt64 {
			return t, fmt.Errorf("gguf: %s: shape %v has 2^63 or more elements", where, t.Dims[:j+1])
		}
		elems = lo
		t.Dims[j] = d
	}
	ty, err := s.u32(where + ": type")
	if err != nil {
		return t, err
	}
	t.Type = ggml.Type(ty)
	if !t.Type.Known() {
		return t, fmt.Errorf("gguf: %s: unknown ggml type %d", where, ty)
	}
	block := uint64(t.Type.BlockSize())
	if t.Dims[0]%block != 0 {
		return t, fmt.Errorf("gguf: %s: ne[0] = %d is not a multiple of the %s block size %d", where, t.Dims[0], t.Type, block)
	}
	hi, size := bits.Mul64(elems/block, uint64(t.Type.TypeSize()))
	if hi != 0 || size > math.MaxInt64 {
		return t, fmt.Errorf("gguf: %s: size in bytes of shape %v %s overflows", where, t.Dims, t.Type)
	}
	t.Size = size
	if t.Offset, err = s.u64(where + ": data offset"); err != nil {
		return t, err
	}
	if t.Offset%alignment != 0 {
		return t, fmt.Errorf("gguf: %s: data offset %d is not a multiple of the alignment %d", where, t.Offset, alignment)
	}
	return t, nil
}

// checkDataSection places the data section after the padded header and
// checks that every tensor lies inside it without overlapping another.
func checkDataSection(s *source, f *File) error {
	end := s.pos
	f.DataOffset = (end + f.Alignment - 1) / f.Alignment * f.Alignment
	if len(f.Tensors) == 0 {
		f.DataOffset = min(f.DataOffset, s.size) // vocab-only files may omit the padding
		return nil
	}
	if f.DataOffset > s.size {
		return fmt.Errorf("gguf: data section at offset %d: file ends at %d: %w", f.DataOffset, s.size, io.ErrUnexpectedEOF)
	}
	dataSize := s.size - f.DataOffset
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset > dataSize || t.Size > dataSize-t.Offset {
			return fmt.Errorf("gguf: tensor %d (%q) data at offset %d: %d bytes run past the end of the file (data section is %d bytes at offset %d)",
				i, t.Name, f.DataOffset+min(t.Offset, dataSize), t.Size, dataSize, f.DataOffset)
		}
	}
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(f.Tensors[a].Offset, f.Tensors[b].Offset) })
	for k := 1; k < len(order); k++ {
		prev, cur := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if cur.Offset < prev.Offset+prev.Size {
			return fmt.Errorf("gguf: tensor %d (%q) data at offset %d: overlaps tensor %d (%q) at [%d, %d)",
				order[k], cur.Name, f.DataOffset+cur.Offset, order[k-1], prev.Name,
				f.DataOffset+prev.Offset, f.DataOffset+prev.Offset+prev.Size)
		}
	}
	return nil
}
