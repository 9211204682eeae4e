package model

import (
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/gguf"
)

// writeTiny writes a 1-layer llama GGUF with zero weights; mutate may change
// the metadata or the tensor list before it is written.
func writeTiny(t *testing.T, mutate func(kv map[string]any, tensors map[string][]uint64)) string {
	t.Helper()
	const E, H, KVH, FF, V = 64, 4, 2, 128, 100
	kv := map[string]any{
		"general.architecture": "llama", "llama.block_count": uint32(1), "llama.embedding_length": uint32(E),
		"llama.attention.head_count": uint32(H), "llama.attention.head_count_kv": uint32(KVH),
		"llama.feed_forward_length": uint32(FF), "llama.context_length": uint32(256),
		"llama.vocab_size": uint32(V),
	}
	hd := uint64(E / H)
	tensors := map[string][]uint64{
		"token_embd.weight": {E, V}, "output_norm.weight": {E},
		"blk.0.attn_norm.weight": {E}, "blk.0.ffn_norm.weight": {E},
		"blk.0.attn_q.weight": {E, E}, "blk.0.attn_k.weight": {E, KVH * hd}, "blk.0.attn_v.weight": {E, KVH * hd},
		"blk.0.attn_output.weight": {E, E}, "blk.0.ffn_gate.weight": {E, FF}, "blk.0.ffn_up.weight": {E, FF},
		"blk.0.ffn_down.weight": {FF, E},
	}
	if mutate != nil {
		mutate(kv, tensors)
	}
	w := gguf.NewWriter()
	for k, v := range kv {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for name, dims := range tensors {
		if err := w.AddTensor(name, ggml.F32, dims, func([]byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func testBackend(t *testing.T) *cpu.Backend {
	b := cpu.New(1)
	t.Cleanup(func() { b.Close() })
	return b
}

func TestOpenBindsEveryTensor(t *testing.T) {
	m, err := Open(writeTiny(t, nil), testBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	hp := m.HP
	if hp.Layers != 1 || hp.HeadDim != 16 || hp.KVHeads != 2 || !hp.TiedOutput || m.Output != m.TokEmbd || hp.RopeBase != 10000 {
		t.Fatalf("hparams %+v", hp)
	}
	if d := m.Layers[0].Wk.Desc(); d.Rows != 32 || d.Cols != 64 || d.Bytes() != 32*64*4 || d.Name != "blk.0.attn_k.weight" {
		t.Fatalf("attn_k bound as %+v (%d bytes)", d, d.Bytes())
	}
}

// Like llama.cpp's loader, a missing tensor, a wrong shape or missing
// metadata is an error naming the culprit.
func TestOpenRejectsWhatLlamaCppRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(map[string]any, map[string][]uint64)
		want   string
	}{
		{"missing tensor", func(_ map[string]any, ts map[string][]uint64) { delete(ts, "blk.0.ffn_up.weight") }, `missing tensor "blk.0.ffn_up.weight"`},
		{"wrong shape", func(_ map[string]any, ts map[string][]uint64) { ts["blk.0.attn_k.weight"] = []uint64{64, 64} }, `"blk.0.attn_k.weight" has wrong shape [64 64], want [64 32]`},
		{"wrong rank", func(_ map[string]any, ts map[string][]uint64) { ts["output_norm.weight"] = []uint64{64, 1} }, `"output_norm.weight" has 2 dimensions`},
		{"missing key", func(kv map[string]any, _ map[string][]uint64) { delete(kv, "llama.feed_forward_length") }, "llama.feed_forward_length is missing"},
		{"bad heads", func(kv map[string]any, _ map[string][]uint64) { kv["llama.attention.head_count_kv"] = uint32(3) }, "not a multiple of 3 kv heads"},
		{"unknown arch", func(kv map[string]any, _ map[string][]uint64) { kv["general.architecture"] = "rwkv6" }, `"rwkv6" is not supported`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(writeTiny(t, c.mutate), testBackend(t))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "tiny.gguf") {
				t.Fatalf("error %q does not name the file", err)
			}
		})
	}
}

func TestActivationBytesMatchesTheTable(t *testing.T) {
	hp := HParams{Layers: 1, Embd: 8, Heads: 2, KVHeads: 1, HeadDim: 4, FF: 16, Vocab: 10}
	want := 4 * int64(3*(8+8+8+4+4+8+16+16)+8+10)
	if got := ActivationBytes(hp, 3); got != want {
		t.Fatalf("ActivationBytes = %d, want %d", got, want)
	}
}
