package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Every shared fixture opens, its tensors lie in the mapping, and the
// header-only reader agrees with Open.
func TestOpenSharedTestdata(t *testing.T) {
	files := append(globTestdata(t, "tokenizer/*.gguf"), globTestdata(t, "models/*.gguf")...)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			st, _ := os.Stat(path)
			if f.Version != 2 && f.Version != 3 {
				t.Errorf("version %d", f.Version)
			}
			if _, ok := f.String("tokenizer.ggml.model"); !ok {
				t.Errorf("no tokenizer.ggml.model")
			}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				data := f.TensorData(ti)
				if uint64(len(data)) != ti.Size || f.DataOffset+ti.Offset+ti.Size > uint64(st.Size()) {
					t.Errorf("tensor %s: %d bytes of data, want %d", ti.Name, len(data), ti.Size)
				}
				if ti.Size != uint64(ti.Type.RowBytes(int(ti.Dims[0])))*ti.Elements()/ti.Dims[0] {
					t.Errorf("tensor %s: size %d inconsistent with %v %s", ti.Name, ti.Size, ti.Dims, ti.Type)
				}
				if got, ok := f.Tensor(ti.Name); !ok || got != ti {
					t.Errorf("Tensor(%q) lookup failed", ti.Name)
				}
			}
			fh, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			h, err := ReadHeader(fh, st.Size(), HeaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h.Keys, f.Keys) || !reflect.DeepEqual(h.KV, f.KV) ||
				!reflect.DeepEqual(h.Tensors, f.Tensors) || h.DataOffset != f.DataOffset {
				t.Errorf("ReadHeader and Open disagree")
			}
			if len(f.Tensors) > 0 && h.TensorData(&f.Tensors[0]) != nil {
				t.Errorf("header-only file returned tensor data")
			}
		})
	}
}

// Known facts of the tiny models (testdata README §2).
func TestSharedModelFacts(t *testing.T) {
	td := sharedTestdata(t)
	path := filepath.Join(td, "models", "tiny-qwen2-q4_0.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s absent", path)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Arch() != "qwen2" {
		t.Errorf("arch %q", f.Arch())
	}
	checks := map[string]uint64{
		"qwen2.block_count": 2, "qwen2.embedding_length": 256, "qwen2.feed_forward_length": 512,
		"qwen2.attention.head_count": 4, "qwen2.attention.head_count_kv": 2, "qwen2.context_length": 4096,
		"general.file_type": 2,
	}
	for k, want := range checks {
		if got, ok := f.Uint(k); !ok || got != want {
			t.Errorf("%s = %d, %v; want %d", k, got, ok, want)
		}
	}
	if eps, ok := f.Float("qwen2.attention.layer_norm_rms_epsilon"); !ok || eps < 0.9e-6 || eps > 1.1e-6 {
		t.Errorf("rms eps %g %v", eps, ok)
	}
	if n, ok := f.ArrayLen("tokenizer.ggml.tokens"); !ok || n != 50257 {
		t.Errorf("tokens len %d %v", n, ok)
	}
	out, ok := f.Tensor("output.weight")
	if !ok || out.Type.String() != "Q6_K" || !reflect.DeepEqual(out.Dims, []uint64{256, 50257}) {
		t.Errorf("output.weight = %+v", out)
	}
	bq, ok := f.Tensor("blk.0.attn_q.bias")
	if !ok || bq.Type.String() != "F32" || len(f.TensorData(bq)) != 256*4 {
		t.Errorf("blk.0.attn_q.bias = %+v", bq)
	}
}

// Copying every key and tensor of a fixture through the Writer reproduces
// the file byte for byte: the writer lays files out as gguf-py and
// llama-quantize do.
func TestRewriteSharedModelIsByteIdentical(t *testing.T) {
	for _, path := range globTestdata(t, "models/*.gguf") {
		if !strings.Contains(path, "q4_0") && !strings.Contains(path, "f16") {
			continue // a couple suffice
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w := NewWriter()
			for _, k := range f.Keys {
				w.SetValue(k, f.KV[k])
			}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				src := f.TensorData(ti)
				if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, func(dst []byte) error { copy(dst, src); return nil }); err != nil {
					t.Fatal(err)
				}
			}
			var buf bytes.Buffer
			if err := w.Write(&buf); err != nil {
				t.Fatal(err)
			}
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), orig) {
				n := min(buf.Len(), len(orig))
				i := 0
				for i < n && buf.Bytes()[i] == orig[i] {
					i++
				}
				t.Fatalf("rewritten file differs at byte %d (lengths %d vs %d)", i, buf.Len(), len(orig))
			}
		})
	}
}

// A header-only read that skips long arrays fetches neither the skipped
// numeric arrays nor tensor data, in 64 KiB requests.
func TestReadHeaderSkipsLongArrays(t *testing.T) {
	td := sharedTestdata(t)
	for _, file := range []string{"tokenizer/ggml-vocab-llama-spm.gguf", "models/tiny-llama-spm-f16.gguf"} {
		path := filepath.Join(td, file)
		fh, err := os.Open(path)
		if err != nil {
			t.Skipf("%s absent", path)
		}
		st, _ := fh.Stat()
		cr := &countingReaderAt{r: fh}
		h, err := ReadHeader(cr, st.Size(), HeaderOptions{SkipArraysLongerThan: 1000})
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := h.ArrayLen("tokenizer.ggml.tokens"); !ok || n != 32000 {
			t.Errorf("tokens len %d %v", n, ok)
		}
		if v := h.KV["tokenizer.ggml.scores"]; v.Data != nil || v.Len != 32000 || v.Elem != Float32 {
			t.Errorf("scores not skipped: %+v", v.Type)
		}
		if _, ok := h.String("tokenizer.ggml.model"); !ok {
			t.Errorf("short values must still be read")
		}
		var skipped, nSkipped int64 // bytes of numeric arrays that need not be fetched
		for _, k := range h.Keys {
			if v := h.KV[k]; v.Type == Array && v.Data == nil {
				skipped += int64(v.Len * v.Elem.size())
				nSkipped++
			}
		}
		// Read-ahead may fetch up to one chunk past each skip point and the end.
		header := int64(h.DataOffset)
		limit := header - skipped + (nSkipped+1)*headerChunk
		t.Logf("%s: read %d bytes in %d requests; header %d bytes, %d of them skippable; file %d bytes",
			file, cr.bytes.Load(), cr.calls.Load(), header, skipped, st.Size())
		if skipped < 200_000 {
			t.Errorf("expected scores and token types (256000 bytes) to be skipped, got %d", skipped)
		}
		if got := cr.bytes.Load(); got > limit {
			t.Errorf("read %d bytes, want at most %d", got, limit)
		}
		if got := cr.calls.Load(); got > limit/headerChunk+2 {
			t.Errorf("%d read requests, want at most %d", got, limit/headerChunk+2)
		}
	}
}
