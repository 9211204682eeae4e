package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// raw assembles GGUF bytes field by field, so tests can break any field.
type raw struct{ b []byte }

func (r *raw) u32(v uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, v); return r }
func (r *raw) u64(v uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, v); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.b = append(r.b, s...); return r }
func (r *raw) pad(align int) *raw {
	for len(r.b)%align != 0 {
		r.b = append(r.b, 0)
	}
	return r
}
func (r *raw) zeros(n int) *raw { r.b = append(r.b, make([]byte, n)...); return r }

func hdr(nTensors, nKV uint64) *raw {
	r := &raw{b: []byte("GGUF")}
	return r.u32(3).u64(nTensors).u64(nKV)
}

// kvU32 appends a u32 key-value pair.
func (r *raw) kvU32(key string, v uint32) *raw { return r.str(key).u32(uint32(Uint32)).u32(v) }

// tensor appends a tensor info.
func (r *raw) tensor(name string, typ uint32, off uint64, dims ...uint64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	return r.u32(typ).u64(off)
}

// withData pads the header and appends n bytes of tensor data.
func (r *raw) withData(n int) []byte { return r.pad(32).zeros(n).b }

const f32 = 0 // ggml.F32 as written on disk

func TestMalformed(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want string // substring of the error
	}{
		{"empty", nil, "too short"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), `magic at offset 0: got "GGML"`},
		{"version 1", (&raw{b: []byte("GGUF")}).u32(1).u64(0).u64(0).b, "v1 is no longer supported"},
		{"version 4", (&raw{b: []byte("GGUF")}).u32(4).u64(0).u64(0).b, "version at offset 4: 4 is not supported"},
		{"byte-swapped version", (&raw{b: []byte("GGUF")}).u32(3 << 24).u64(0).u64(0).b, "byte-swapped"},
		{"truncated counts", []byte("GGUF\x03\x00\x00\x00\x01"), "tensor count at offset 8"},
		{"absurd tensor count", hdr(1<<40, 0).zeros(100).b, "tensor count at offset 8: 1099511627776 tensors cannot fit"},
		{"negative tensor count", hdr(1<<63, 0).b, "tensor count at offset 8"},
		{"absurd kv count", hdr(0, 1<<62).zeros(100).b, "metadata count at offset 16"},
		{"counts together too many", hdr(3, 5).zeros(120).b, "counts at offset 8"},
		{"key length past end", hdr(0, 1).u64(1000).zeros(20).b, "kv 0 key at offset 24: length 1000 exceeds the 20 bytes left"},
		{"key length over limit", hdr(0, 1).u64(1 << 40).zeros(20).b, "exceeds the limit"},
		{"empty key", hdr(0, 1).str("").u32(uint32(Uint8)).zeros(8).b, "kv 0 at offset 24: empty key"},
		{"duplicate key", hdr(0, 2).kvU32("a", 1).kvU32("a", 2).b, `kv 1 ("a") at offset 41: duplicate key`},
		{"unknown value type", hdr(0, 1).str("k").u32(13).zeros(8).b, `kv 0 ("k") type at offset 33: unknown value type 13`},
		{"truncated value", hdr(0, 1).str("k").u32(uint32(Uint64)).zeros(4).b, "needs 8 bytes, file has 4 left"},
		{"string value past end", hdr(0, 1).str("k").u32(uint32(String)).u64(99).zeros(10).b, "length 99 exceeds"},
		{"unknown array element type", hdr(0, 1).str("k").u32(uint32(Array)).u32(77).u64(0).b, "unknown array element type 77"},
		{"array count too large", hdr(0, 1).str("k").u32(uint32(Array)).u32(uint32(Uint32)).u64(10).zeros(39).b, "10 elements of u32 cannot fit in the 39 bytes"},
		{"string array count too large", hdr(0, 1).str("k").u32(uint32(Array)).u32(uint32(String)).u64(1 << 60).zeros(64).b, "cannot fit"},
		{"string array element past end", hdr(0, 1).str("k").u32(uint32(Array)).u32(uint32(String)).u64(2).str("ab").u64(50).zeros(8).b, "length 50 exceeds"},
		{"nested arrays too deep", nestedArrays(maxArrayDepth + 1), "nested deeper than 8"},
		{"alignment not u32", hdr(0, 1).str(KeyAlignment).u32(uint32(Uint64)).u64(32).b, `kv 0 ("general.alignment") at offset 24: alignment must be of type u32`},
		{"alignment not a power of two", hdr(0, 1).kvU32(KeyAlignment, 48).b, "alignment 48 is not a power of two"},
		{"alignment zero", hdr(0, 1).kvU32(KeyAlignment, 0).b, "alignment 0 is not a power of two"},
		{"tensor name too long", hdr(1, 0).tensor(strings.Repeat("x", 64), f32, 0, 8).withData(32), "name is 64 bytes, limit is 63"},
		{"duplicate tensor name", hdr(2, 0).tensor("t", f32, 0, 8).tensor("t", f32, 32, 8).withData(64), `tensor 1 ("t") at offset 57: duplicate tensor name`},
		{"zero dims", hdr(1, 0).tensor("t", f32, 0).withData(32), "n_dims 0 is not in 1..4"},
		{"five dims", hdr(1, 0).tensor("t", f32, 0, 1, 1, 1, 1, 1).withData(32), "n_dims 5 is not in 1..4"},
		{"zero-size dim", hdr(1, 0).tensor("t", f32, 0, 4, 0).withData(32), "ne[1] = 0 is not in 1..2^63-1"},
		{"dim beyond int64", hdr(1, 0).tensor("t", f32, 0, 1<<63).withData(32), "ne[0] = 9223372036854775808"},
		{"element count overflow", hdr(1, 0).tensor("t", f32, 0, 1<<32, 1<<31).withData(32), "2^63 or more elements"},
		{"byte size overflow", hdr(1, 0).tensor("t", 28 /* F64 */, 0, 1<<31, 1<<31).withData(32), "size in bytes"},
		{"unknown ggml type", hdr(1, 0).tensor("t", 4, 0, 32).withData(32), `tensor 0 ("t") at offset 24: unknown ggml type 4`},
		{"type out of range", hdr(1, 0).tensor("t", 1000, 0, 32).withData(32), "unknown ggml type 1000"},
		{"row not a block multiple", hdr(1, 0).tensor("t", 2 /* Q4_0 */, 0, 48, 2).withData(64), "ne[0] = 48 is not a multiple of the Q4_0 block size 32"},
		{"misaligned offset", hdr(2, 0).tensor("a", f32, 0, 4).tensor("b", f32, 16, 4).withData(64), `tensor 1 ("b") at offset 57: data offset 16 is not a multiple of the alignment 32`},
		{"tensor past end", hdr(1, 0).tensor("t", f32, 0, 16).withData(60), "64 bytes run past the end"},
		{"offset far past end", hdr(1, 0).tensor("t", f32, 1<<40, 8).withData(32), "run past the end"},
		{"overlapping tensors", hdr(2, 0).tensor("a", f32, 0, 16).tensor("b", f32, 32, 8).withData(96), `tensor 1 ("b") data at offset 128: overlaps tensor 0 ("a")`},
		{"overlapping, out of order", hdr(2, 0).tensor("a", f32, 32, 16).tensor("b", f32, 0, 16).withData(96), `overlaps tensor 1 ("b")`},
		{"data section past end", hdr(1, 0).tensor("t", f32, 0, 1).b, "data section at offset 64: file ends at 57"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ReadHeader(bytes.NewReader(c.data), int64(len(c.data)), HeaderOptions{})
			if err == nil {
				t.Fatalf("accepted: %+v", f)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "gguf: ") || !strings.Contains(err.Error(), "offset") {
				t.Errorf("error %q should start with gguf: and name an offset", err)
			}
			// The mapped path must agree.
			if _, err2 := parse(newMappedSource(c.data), HeaderOptions{}); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("mapped parse: %v", err2)
			}
			// A skipping parse must reject it as well.
			if _, err3 := ReadHeader(bytes.NewReader(c.data), int64(len(c.data)), HeaderOptions{SkipArraysLongerThan: 1}); err3 == nil {
				t.Errorf("skipping parse accepted it")
			}
		})
	}
}

// nestedArrays builds a key holding arrays nested depth levels.
func nestedArrays(depth int) []byte {
	r := hdr(0, 1).str("k").u32(uint32(Array))
	for i := 0; i < depth-1; i++ {
		r.u32(uint32(Array)).u64(1)
	}
	return r.u32(uint32(Uint8)).u64(1).zeros(1).b
}

// Boundary cases that must be accepted.
func TestAcceptedEdges(t *testing.T) {
	cases := map[string][]byte{
		"63-byte name":          hdr(1, 0).tensor(strings.Repeat("x", 63), f32, 0, 8).withData(32),
		"nesting at the limit":  nestedArrays(maxArrayDepth),
		"no tensors, no pad":    hdr(0, 1).kvU32("a", 1).b,
		"v2":                    (&raw{b: []byte("GGUF")}).u32(2).u64(0).u64(0).b,
		"alignment 1":           hdr(2, 1).kvU32(KeyAlignment, 1).tensor("a", 24 /* I8 */, 0, 3).tensor("b", 24, 3, 5).withData(8),
		"tensors out of order":  hdr(2, 0).tensor("a", f32, 32, 8).tensor("b", f32, 0, 8).withData(64),
		"non-zero bool is true": hdr(0, 1).str("b").u32(uint32(Bool)).zeros(0).b,
	}
	cases["non-zero bool is true"] = append(cases["non-zero bool is true"], 7)
	for name, data := range cases {
		f, err := ReadHeader(bytes.NewReader(data), int64(len(data)), HeaderOptions{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if name == "non-zero bool is true" {
			if b, ok := f.Bool("b"); !ok || !b {
				t.Errorf("bool 7 read as %v %v", b, ok)
			}
		}
	}
}

// Every prefix of a valid file that cuts into its header or tensor data is
// rejected with an error, not a panic. (The padding after the last tensor is
// optional.)
func TestTruncatedPrefixes(t *testing.T) {
	var buf bytes.Buffer
	if err := buildSample(t, 0).Write(&buf); err != nil {
		t.Fatal(err)
	}
	full := buf.Bytes()
	f, err := ReadHeader(bytes.NewReader(full), int64(len(full)), HeaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	end := f.DataOffset
	for _, ti := range f.Tensors {
		end = max(end, f.DataOffset+ti.Offset+ti.Size)
	}
	if _, err := ReadHeader(bytes.NewReader(full), int64(end), HeaderOptions{}); err != nil {
		t.Errorf("file without trailing padding rejected: %v", err)
	}
	for n := 0; n < int(end); n++ {
		_, err := ReadHeader(bytes.NewReader(full[:n]), int64(n), HeaderOptions{})
		if err == nil {
			t.Fatalf("prefix of %d/%d bytes accepted", n, len(full))
		}
	}
}

// A reader that returns fewer bytes than the claimed size reports the I/O error.
func TestShortReader(t *testing.T) {
	var buf bytes.Buffer
	if err := buildSample(t, 0).Write(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	_, err := ReadHeader(bytes.NewReader(data[:100]), int64(len(data)), HeaderOptions{})
	if err == nil || !errors.Is(err, io.EOF) {
		t.Fatalf("got %v, want an error wrapping io.EOF", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad file error should name the path: %v", err)
	}
	if _, err := Open(dir); err == nil {
		t.Errorf("directory accepted")
	}
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty); err == nil {
		t.Errorf("empty file accepted")
	}
}
