package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// FuzzReadHeader feeds arbitrary bytes to both parse paths (ReadHeader over
// an io.ReaderAt and the mapped path Open uses). They must agree, never
// panic, and whatever they accept must satisfy the invariants and survive a
// rewrite through the Writer.
func FuzzReadHeader(f *testing.F) {
	for _, seed := range syntheticSeeds(f) {
		f.Add(seed)
	}
	for _, p := range sharedSeedFiles() {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b[:min(len(b), 8<<10)])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, skip := range []int{0, 3} {
			opt := HeaderOptions{SkipArraysLongerThan: skip}
			h, err := ReadHeader(bytes.NewReader(data), int64(len(data)), opt)
			m, errMapped := parse(newMappedSource(data), opt)
			if (err == nil) != (errMapped == nil) || (err != nil && err.Error() != errMapped.Error()) {
				t.Fatalf("paths disagree: %v / %v", err, errMapped)
			}
			if err != nil {
				continue
			}
			checkInvariants(t, h, len(data))
			if skip == 0 {
				m.mapping = data
				checkRewrite(t, m)
			}
		}
	})
}

func checkInvariants(t *testing.T, f *File, size int) {
	if len(f.Keys) != len(f.KV) || len(f.index) != len(f.Tensors) {
		t.Fatalf("keys %d kv %d tensors %d index %d", len(f.Keys), len(f.KV), len(f.Tensors), len(f.index))
	}
	if f.Alignment == 0 || f.Alignment&(f.Alignment-1) != 0 || f.DataOffset > uint64(size) {
		t.Fatalf("alignment %d data offset %d size %d", f.Alignment, f.DataOffset, size)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Offset%f.Alignment != 0 || f.DataOffset+ti.Offset+ti.Size > uint64(size) || ti.Size == 0 {
			t.Fatalf("tensor %d %+v out of bounds", i, ti)
		}
	}
}

// checkRewrite writes f again and checks that the result parses to the same
// header and tensor data, and that writing is a fixed point.
func checkRewrite(t *testing.T, f *File) {
	first := rewrite(t, f)
	g, err := ReadHeader(bytes.NewReader(first), int64(len(first)), HeaderOptions{})
	if err != nil {
		t.Fatalf("rewritten file rejected: %v", err)
	}
	g.mapping = first
	for i := range f.Tensors {
		a, b := &f.Tensors[i], &g.Tensors[i]
		if a.Name != b.Name || a.Type != b.Type || a.Size != b.Size || !bytes.Equal(f.TensorData(a), g.TensorData(b)) {
			t.Fatalf("tensor %d changed: %+v -> %+v", i, a, b)
		}
	}
	if second := rewrite(t, g); !bytes.Equal(first, second) {
		t.Fatalf("rewrite is not a fixed point")
	}
}

func rewrite(t *testing.T, f *File) []byte {
	w := NewWriter()
	for _, k := range f.Keys {
		w.SetValue(k, f.KV[k])
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		src := f.TensorData(ti)
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, func(dst []byte) error { copy(dst, src); return nil }); err != nil {
			t.Fatalf("writer rejects a tensor the reader accepted: %v", err)
		}
	}
	var buf bytes.Buffer
	if err := w.Write(&buf); err != nil {
		t.Fatalf("writer rejects a header the reader accepted: %v", err)
	}
	return buf.Bytes()
}

// syntheticSeeds are small writer-made files.
func syntheticSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, align := range []uint32{0, 64} {
		var buf bytes.Buffer
		if err := buildSample(tb, align).Write(&buf); err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	seeds = append(seeds, nestedArrays(3), hdr(2, 0).tensor("a", f32, 32, 8).tensor("b", f32, 0, 8).withData(64))
	return seeds
}

// sharedSeedFiles are a couple of fixtures whose first KB seed the fuzzer.
func sharedSeedFiles() []string {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			return nil
		}
		dir = filepath.Dir(dir)
	}
	td := filepath.Join(dir, "..", "shared", "testdata")
	return []string{
		filepath.Join(td, "tokenizer", "ggml-vocab-llama-spm.gguf"),
		filepath.Join(td, "tokenizer", "ggml-vocab-gpt-2.gguf"),
		filepath.Join(td, "models", "tiny-qwen2-q4_0.gguf"),
	}
}

// TestWriteFuzzSeeds regenerates the checked-in seed corpus when
// NIBBLE_WRITE_FUZZ_SEEDS=1: go test ./engine/gguf -run TestWriteFuzzSeeds.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("NIBBLE_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set NIBBLE_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz/FuzzReadHeader")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzReadHeader")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	names := []string{"sample", "sample-align64", "nested", "out-of-order"}
	seeds := syntheticSeeds(t)
	for i, p := range sharedSeedFiles()[:2] {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%v (the shared test data is needed to regenerate)", err)
		}
		seeds = append(seeds, b[:4<<10])
		names = append(names, []string{"vocab-llama-spm-4k", "vocab-gpt2-4k"}[i])
	}
	for i, s := range seeds {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
		if len(body) >= 16<<10 {
			t.Fatalf("seed %s is %d bytes", names[i], len(body))
		}
		if err := os.WriteFile(filepath.Join(dir, names[i]), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
