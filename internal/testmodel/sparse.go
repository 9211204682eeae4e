// Package testmodel writes model files for tests.
package testmodel

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/model"
)

const headerLimit = 16 << 20

var errStop = errors.New("header written")

// headerOnly passes writes to w until limit bytes have gone through, then
// fails, so the tensor data of a huge model is never generated or written.
type headerOnly struct {
	w     io.Writer
	n     int64
	limit int64
}

func (h *headerOnly) Write(p []byte) (int, error) {
	if h.n >= h.limit {
		return 0, errStop
	}
	n, err := h.w.Write(p)
	h.n += int64(n)
	return n, err
}

// headerFirst orders the layout for WriteSparse: the small tensors (norms
// and attn_k) ahead of the big ones, each group by block, norms before
// attn_k. Optional tensors are left out.
func headerFirst(specs []model.TensorSpec) []model.TensorSpec {
	specs = slices.DeleteFunc(specs, func(s model.TensorSpec) bool { return s.Optional })
	rank := func(s model.TensorSpec) int {
		switch {
		case len(s.Dims) == 1:
			return 0
		case s.Kind == model.AttnK:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(specs, func(a, b model.TensorSpec) int {
		return cmp.Or(cmp.Compare(rank(a)/2, rank(b)/2), cmp.Compare(a.Layer, b.Layer), cmp.Compare(rank(a), rank(b)))
	})
	return specs
}

// WriteSparse writes a llama-shaped GGUF whose tensor data is a hole:
// the header through gguf.Writer, then os.File.Truncate to the full size.
// Small tensors (norms, attn_k: together more than headerLimit bytes) come
// first, so the writer has flushed the header and stopped before it would
// allocate a buffer for a big one. It returns the data offset.
func WriteSparse(t testing.TB, path string, layers, embd, heads, kvHeads, ff, vocabSize int, typ ggml.Type, withVocab bool, extra map[string]any) uint64 {
	t.Helper()
	w := gguf.NewWriter()
	hd := embd / heads
	for k, v := range map[string]any{
		"general.architecture": "llama", "general.name": "sparse-test", "general.file_type": uint32(1),
		"llama.block_count": uint32(layers), "llama.embedding_length": uint32(embd),
		"llama.attention.head_count": uint32(heads), "llama.attention.head_count_kv": uint32(kvHeads),
		"llama.feed_forward_length": uint32(ff), "llama.context_length": uint32(131072),
		"llama.rope.freq_base": float32(500000), "llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.vocab_size": uint32(vocabSize),
	} {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range extra {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if withVocab {
		// The embedded Llama SentencePiece vocabulary, so the file loads fully.
		voc, err := gguf.ReadHeader(bytes.NewReader(vocab.LlamaSPM), int64(len(vocab.LlamaSPM)), gguf.HeaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range voc.Keys {
			if strings.HasPrefix(k, "tokenizer.") {
				w.SetValue(k, voc.KV[k])
			}
		}
	}
	hp := model.FamilyHParams("llama")
	hp.Layers, hp.Embd, hp.Heads, hp.KVHeads, hp.HeadDim, hp.RopeDims = layers, embd, heads, kvHeads, hd, hd
	hp.FF, hp.Vocab, hp.TiedOutput = ff, vocabSize, true
	for _, s := range headerFirst(model.TensorLayout(hp)) {
		ty := typ
		if len(s.Dims) == 1 {
			ty = ggml.F32
		}
		if err := w.AddTensor(s.Name, ty, s.Dims, nil); err != nil {
			t.Fatal(err)
		}
	}
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if err := w.Write(&headerOnly{w: fh, limit: headerLimit}); !errors.Is(err, errStop) {
		t.Fatalf("writing the header: %v", err)
	}
	// Make room for every tensor, parse the header, then cut the file to
	// exactly the end of the last tensor.
	if err := fh.Truncate(1 << 40); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	f, err := gguf.ReadHeader(fh, 1<<40, gguf.HeaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	end := f.DataOffset
	for _, ti := range f.Tensors {
		end = max(end, f.DataOffset+ti.Offset+ti.Size)
	}
	if err := fh.Truncate(int64(end)); err != nil {
		t.Fatal(err)
	}
	return f.DataOffset
}
