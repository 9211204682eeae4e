package model

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/kv"
)

// recorder is a backend that logs the ops the forward pass issues, in order.
type recorder struct {
	backend.Backend
	ops []string
}

func (r *recorder) log(op string) { r.ops = append(r.ops, op) }

func (r *recorder) Embed(dst backend.Tensor, table backend.Weight, tokens []int32) {
	r.log("embed")
	r.Backend.Embed(dst, table, tokens)
}

func (r *recorder) KVSetSmoothing(c backend.KVCache, layer int, lambda []float32) {
	r.log(fmt.Sprintf("smooth %d", layer))
	r.Backend.KVSetSmoothing(c, layer, lambda)
}

func (r *recorder) KVStore(c backend.KVCache, layer int, k, v backend.Tensor, pos, rows int) {
	r.log(fmt.Sprintf("store %d", layer))
	r.Backend.KVStore(c, layer, k, v, pos, rows)
}

func (r *recorder) Sync() error {
	r.log("sync")
	return r.Backend.Sync()
}

func (r *recorder) take() []string {
	ops := r.ops
	r.ops = nil
	return ops
}

func newRecordedState(t *testing.T, kvc kv.Config, layers int) (*State, *recorder) {
	t.Helper()
	rec := &recorder{Backend: cpu.New(1)}
	t.Cleanup(func() { rec.Backend.Close() })
	m, err := Open(writeTiny(t, func(kv map[string]any, ts map[string][]uint64) {
		kv["llama.block_count"] = uint32(layers)
		// Head dim 32, one q4 group.
		kv["llama.attention.head_count"] = uint32(2)
		ts["blk.0.attn_k.weight"], ts["blk.0.attn_v.weight"] = []uint64{64, 64}, []uint64{64, 64}
		for l := 1; l < layers; l++ {
			for name, dims := range ts {
				if rest, ok := strings.CutPrefix(name, "blk.0."); ok {
					ts[fmt.Sprintf("blk.%d.%s", l, rest)] = dims
				}
			}
		}
	}), rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	st, err := m.NewState(kvc, 32)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, rec
}

// Tokens outside the vocabulary are refused before the first op is issued:
// ops never fail on data.
func TestForwardValidatesTokensBeforeAnyOp(t *testing.T) {
	st, rec := newRecordedState(t, kv.Config{Type: kv.Q4, GroupSize: 32, Ctx: 64, Smooth: true}, 1)
	logits := make([]float32, 100)
	for _, bad := range [][]int32{{1, 2, -1}, {100}, {5, 1 << 30}} {
		err := st.Forward(bad, 0, logits)
		if err == nil || !strings.Contains(err.Error(), "outside the vocabulary of 100") {
			t.Fatalf("tokens %v: %v", bad, err)
		}
		if ops := rec.take(); len(ops) != 0 {
			t.Fatalf("tokens %v: ops %v issued before the error", bad, ops)
		}
	}
	if err := st.Forward([]int32{99}, 0, logits); err != nil {
		t.Fatal(err)
	}
}

// Channel smoothing is calibrated in an explicit step: a batch of at least
// kv.MinCalibrationRows rows at position 0 syncs once per layer (before the
// layer's factors are set and its K stored); a shorter batch there clears
// the factors without a sync; later batches leave them alone. An f16 or
// unsmoothed cache never calibrates.
func TestCalibrationIsAnExplicitStep(t *testing.T) {
	const layers = 3
	st, rec := newRecordedState(t, kv.Config{Type: kv.Q4, GroupSize: 32, Ctx: 64, Smooth: true}, layers)
	logits := make([]float32, 100)
	prompt := make([]int32, kv.MinCalibrationRows)
	relevant := func(ops []string) []string {
		return slices.DeleteFunc(ops, func(op string) bool { return op == "embed" })
	}
	if err := st.Forward(prompt, 0, logits); err != nil {
		t.Fatal(err)
	}
	var want []string
	for l := range layers {
		want = append(want, "sync", fmt.Sprintf("smooth %d", l), fmt.Sprintf("store %d", l))
	}
	want = append(want, "sync")
	if got := relevant(rec.take()); !slices.Equal(got, want) {
		t.Fatalf("a %d-row batch at position 0 issued %v, want %v", len(prompt), got, want)
	}
	if err := st.Forward(prompt[:4], len(prompt), logits); err != nil {
		t.Fatal(err)
	}
	if got := relevant(rec.take()); !slices.Equal(got, []string{"store 0", "store 1", "store 2", "sync"}) {
		t.Fatalf("a batch past position 0 issued %v", got)
	}
	if err := st.Forward(prompt[:1], 0, logits); err != nil {
		t.Fatal(err)
	}
	if got := relevant(rec.take()); !slices.Equal(got, []string{"smooth 0", "store 0", "smooth 1", "store 1", "smooth 2", "store 2", "sync"}) {
		t.Fatalf("one row at position 0 issued %v", got)
	}
	for _, cfg := range []kv.Config{{Type: kv.F16, Smooth: true}, {Type: kv.Q8, GroupSize: 32}} {
		cfg.Ctx = 64
		st, rec := newRecordedState(t, cfg, 1)
		if err := st.Forward(prompt, 0, logits); err != nil {
			t.Fatal(err)
		}
		if got := relevant(rec.take()); !slices.Equal(got, []string{"store 0", "sync"}) {
			t.Fatalf("%v smooth=%v: %v", cfg.Type, cfg.Smooth, got)
		}
	}
}
