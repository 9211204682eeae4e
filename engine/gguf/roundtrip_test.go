package gguf

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"nibble/engine/ggml"
)

// sampleValues covers every value type, arrays of each, empty and nested arrays.
func sampleValues() (keys []string, vals []any) {
	add := func(k string, v any) { keys = append(keys, k); vals = append(vals, v) }
	add("general.architecture", "llama")
	add("t.u8", uint8(200))
	add("t.i8", int8(-100))
	add("t.u16", uint16(60000))
	add("t.i16", int16(-30000))
	add("t.u32", uint32(4_000_000_000))
	add("t.i32", int32(-2_000_000_000))
	add("t.f32", float32(-1.5e-6))
	add("t.bool", true)
	add("t.bool.false", false)
	add("t.str", "héllo\x00wörld")
	add("t.str.empty", "")
	add("t.u64", uint64(math.MaxUint64))
	add("t.i64", int64(math.MinInt64))
	add("t.f64", math.Pi)
	add("a.u8", []uint8{1, 2, 255})
	add("a.i8", []int8{-128, 0, 127})
	add("a.u16", []uint16{0, 65535})
	add("a.i16", []int16{-1, 1})
	add("a.u32", []uint32{7, 8, 9})
	add("a.i32", []int32{-7, 8, -9})
	add("a.f32", []float32{0.5, -0.25, 1e30})
	add("a.bool", []bool{true, false, true})
	add("a.str", []string{"a", "", "long string with spaces"})
	add("a.u64", []uint64{1 << 63})
	add("a.i64", []int64{-1 << 62})
	add("a.f64", []float64{1.25, -2.5})
	add("a.empty", []uint32{})
	add("a.nested", []Value{
		{Type: Array, Elem: Int32, Len: 2, Data: []int32{1, 2}},
		{Type: Array, Elem: String, Len: 1, Data: []string{"x"}},
		{Type: Array, Elem: Array, Len: 1, Data: []Value{{Type: Array, Elem: Float64, Len: 3, Data: []float64{1, 2, 3}}}},
	})
	return keys, vals
}

type sampleTensor struct {
	name string
	typ  ggml.Type
	dims []uint64
}

var sampleTensors = []sampleTensor{
	{"a.weight", ggml.F32, []uint64{3}},
	{"b.weight", ggml.F16, []uint64{4, 2}},
	{"c.weight", ggml.Q8_0, []uint64{64, 3}},
	{"d.weight", ggml.Q4_0, []uint64{32, 1, 2, 1}},
	{strings.Repeat("n", 63), ggml.I8, []uint64{5}},
}

// tensorPattern is distinct per tensor so misplaced data shows.
func tensorPattern(i int, dst []byte) {
	for j := range dst {
		dst[j] = byte(i*31 + j*7 + 1)
	}
}

func buildSample(t testing.TB, align uint32) *Writer {
	w := NewWriter()
	keys, vals := sampleValues()
	for i, k := range keys {
		if err := w.Set(k, vals[i]); err != nil {
			t.Fatal(err)
		}
	}
	if align != 0 {
		if err := w.Set(KeyAlignment, align); err != nil {
			t.Fatal(err)
		}
	}
	for i, st := range sampleTensors {
		i := i
		if err := w.AddTensor(st.name, st.typ, st.dims, func(dst []byte) error { tensorPattern(i, dst); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func checkSample(t *testing.T, f *File, align uint64, withData bool) {
	t.Helper()
	keys, vals := sampleValues()
	if align != 0 {
		keys = append(keys, KeyAlignment)
		vals = append(vals, uint32(align))
	} else {
		align = 32
	}
	if f.Version != 3 || f.Alignment != align || f.DataOffset%align != 0 {
		t.Errorf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	if !reflect.DeepEqual(f.Keys, keys) {
		t.Errorf("keys = %v\nwant %v", f.Keys, keys)
	}
	for i, k := range keys {
		want, _ := toValue(vals[i])
		if got := f.KV[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", k, got, want)
		}
	}
	if len(f.Tensors) != len(sampleTensors) {
		t.Fatalf("%d tensors", len(f.Tensors))
	}
	for i, st := range sampleTensors {
		ti, ok := f.Tensor(st.name)
		if !ok || ti.Type != st.typ || !reflect.DeepEqual(ti.Dims, st.dims) || ti.Offset%align != 0 {
			t.Errorf("tensor %d = %+v, want %+v", i, ti, st)
			continue
		}
		want := make([]byte, ti.Size)
		tensorPattern(i, want)
		if uint64(ti.Type.RowBytes(int(ti.Elements()))) != ti.Size {
			t.Errorf("%s size %d", ti.Name, ti.Size)
		}
		if got := f.TensorData(ti); withData && !bytes.Equal(got, want) {
			t.Errorf("%s data = %v, want %v", ti.Name, got, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, align := range []uint32{0, 64, 1} {
		w := buildSample(t, align)
		var buf bytes.Buffer
		if err := w.Write(&buf); err != nil {
			t.Fatal(err)
		}
		h, err := ReadHeader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), HeaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkSample(t, h, uint64(align), false)

		path := filepath.Join(t.TempDir(), "x.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		onDisk, _ := os.ReadFile(path)
		if !bytes.Equal(onDisk, buf.Bytes()) {
			t.Errorf("WriteFile and Write differ")
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		checkSample(t, f, uint64(align), true)
		if err := f.Close(); err != nil {
			t.Error(err)
		}
		if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
			t.Errorf("WriteFile left %d files behind", len(ents))
		}
	}
}

// Skipped arrays keep their shape and the values after them still parse.
func TestReadHeaderSkip(t *testing.T) {
	var buf bytes.Buffer
	if err := buildSample(t, 0).Write(&buf); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHeader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), HeaderOptions{SkipArraysLongerThan: 2})
	if err != nil {
		t.Fatal(err)
	}
	keys, vals := sampleValues()
	for i, k := range keys {
		want, _ := toValue(vals[i])
		got := h.KV[k]
		if want.Type == Array && want.Len > 2 {
			want.Data = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", k, got, want)
		}
	}
	if n, ok := h.ArrayLen("a.nested"); !ok || n != 3 {
		t.Errorf("ArrayLen(a.nested) = %d %v", n, ok)
	}
	if len(h.Tensors) != len(sampleTensors) {
		t.Errorf("tensors after skipped arrays: %d", len(h.Tensors))
	}
}

func TestGetters(t *testing.T) {
	var buf bytes.Buffer
	if err := buildSample(t, 0).Write(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := ReadHeader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), HeaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Arch() != "llama" {
		t.Errorf("Arch = %q", f.Arch())
	}
	if u, ok := f.Uint("t.u16"); !ok || u != 60000 {
		t.Errorf("Uint(u16) = %d %v", u, ok)
	}
	if _, ok := f.Uint("t.i32"); ok {
		t.Errorf("Uint of a negative int32 must fail")
	}
	if _, ok := f.Int("t.u64"); ok {
		t.Errorf("Int of MaxUint64 must fail")
	}
	if i, ok := f.Int("t.u32"); !ok || i != 4_000_000_000 {
		t.Errorf("Int(u32) = %d %v", i, ok)
	}
	if x, ok := f.Float("t.f32"); !ok || float32(x) != -1.5e-6 {
		t.Errorf("Float(f32) = %g %v", x, ok)
	}
	if x, ok := f.Float("t.i16"); !ok || x != -30000 {
		t.Errorf("Float(i16) = %g %v", x, ok)
	}
	if _, ok := f.Float("t.str"); ok {
		t.Errorf("Float of a string must fail")
	}
	if b, ok := f.Bool("t.bool"); !ok || !b {
		t.Errorf("Bool = %v %v", b, ok)
	}
	if s, ok := f.String("t.str"); !ok || s != "héllo\x00wörld" {
		t.Errorf("String = %q %v", s, ok)
	}
	if _, ok := f.String("missing"); ok {
		t.Errorf("missing key found")
	}
	if s, ok := f.Strings("a.str"); !ok || len(s) != 3 || s[2] != "long string with spaces" {
		t.Errorf("Strings = %q %v", s, ok)
	}
	if x, ok := f.Float32s("a.f64"); !ok || !reflect.DeepEqual(x, []float32{1.25, -2.5}) {
		t.Errorf("Float32s(f64) = %v %v", x, ok)
	}
	if x, ok := f.Int32s("a.u8"); !ok || !reflect.DeepEqual(x, []int32{1, 2, 255}) {
		t.Errorf("Int32s(u8) = %v %v", x, ok)
	}
	if _, ok := f.Int32s("a.u64"); ok {
		t.Errorf("Int32s of 1<<63 must fail")
	}
	if _, ok := f.Float32s("a.str"); ok {
		t.Errorf("Float32s of strings must fail")
	}
	if n, ok := f.ArrayLen("a.empty"); !ok || n != 0 {
		t.Errorf("ArrayLen(empty) = %d %v", n, ok)
	}
	if _, ok := f.ArrayLen("t.u8"); ok {
		t.Errorf("ArrayLen of a scalar must fail")
	}
}

func TestWriterRejects(t *testing.T) {
	w := NewWriter()
	for _, v := range []any{1, uint(1), struct{}{}, []int{1}, map[string]int{}} {
		if err := w.Set("k", v); err == nil {
			t.Errorf("Set(%T) accepted", v)
		}
	}
	if err := w.Set("", uint32(1)); err == nil {
		t.Errorf("empty key accepted")
	}
	bad := []struct {
		name string
		typ  ggml.Type
		dims []uint64
	}{
		{strings.Repeat("x", 64), ggml.F32, []uint64{1}},
		{"nodims", ggml.F32, nil},
		{"fivedims", ggml.F32, []uint64{1, 1, 1, 1, 1}},
		{"zerodim", ggml.F32, []uint64{4, 0}},
		{"block", ggml.Q4_0, []uint64{16}},
		{"type", ggml.Type(4), []uint64{16}},
		{"overflow", ggml.F32, []uint64{1 << 32, 1 << 32}},
	}
	for _, b := range bad {
		if err := w.AddTensor(b.name, b.typ, b.dims, nil); err == nil {
			t.Errorf("AddTensor(%s) accepted", b.name)
		}
	}
	if err := w.AddTensor("ok", ggml.F32, []uint64{1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("ok", ggml.F32, []uint64{1}, nil); err == nil {
		t.Errorf("duplicate tensor accepted")
	}
	var buf bytes.Buffer
	for _, v := range []Value{
		{Type: Uint32, Data: int32(1)},
		{Type: Array, Elem: Uint32, Len: 2, Data: []uint32{1}},
		{Type: Array, Elem: Float32, Len: 5},
		{Type: Array, Elem: String, Len: 1, Data: []int32{1}},
		{Type: ValueType(99), Data: uint8(1)},
	} {
		w2 := NewWriter()
		w2.SetValue("k", v)
		if err := w2.Write(&buf); err == nil {
			t.Errorf("Write accepted %#v", v)
		}
	}
	w3 := NewWriter()
	_ = w3.Set(KeyAlignment, uint32(48))
	if err := w3.Write(&buf); err == nil {
		t.Errorf("alignment 48 accepted")
	}
}

// A Set of an existing key replaces the value in place.
func TestWriterSetReplaces(t *testing.T) {
	w := NewWriter()
	_ = w.Set("a", uint32(1))
	_ = w.Set("b", uint32(2))
	_ = w.Set("a", "x")
	var buf bytes.Buffer
	if err := w.Write(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := ReadHeader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), HeaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := f.String("a"); s != "x" || !reflect.DeepEqual(f.Keys, []string{"a", "b"}) {
		t.Errorf("keys %v a=%q", f.Keys, s)
	}
}
