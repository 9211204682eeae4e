//go:build linux

package metal_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/numeric"
	"nibble/engine/synth"
)

// MatMulID in float64 over the dequantized experts and the activations as
// the Metal _id kernels read them, as exactCPU's MatMul (half in the
// mat-mat kernel of batches).
func (e *exactCPU) MatMulID(dst backend.Tensor, w backend.Weight, experts int, x, ids backend.Tensor, rows, k int, xPerSlot bool) {
	d := w.Desc()
	toHalf := mulMMRounds(d.Type, rows, d.Cols)
	deq := e.dequantized(w, toHalf)
	xrows := rows
	if xPerSlot {
		xrows = rows * k
	}
	out, xs, id := dst.(*cpu.Tensor).D, halfRows(x.(*cpu.Tensor).D[:xrows*d.Cols], toHalf), ids.(*cpu.Tensor).D
	per := d.Rows / experts
	for s := 0; s < rows*k; s++ {
		xr := s / k
		if xPerSlot {
			xr = s
		}
		xv, ex := xs[xr*d.Cols:(xr+1)*d.Cols], int(id[s])
		for i := 0; i < per; i++ {
			out[s*per+i] = float32(exactDot(deq[(ex*per+i)*d.Cols:(ex*per+i+1)*d.Cols], xv))
		}
	}
}

// moeModels are mixture-of-experts models to run whole: synth Qwen3-MoE
// (Q4_0, and F16 with shared experts) and Mixtral (F16), and the tiny
// transformers references of engine/testdata/hf where present.
func moeModels(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	paths := map[string]string{}
	synthMoE := func(name, arch string, typ ggml.Type, mutate func(*synth.Options)) {
		o := synth.DefaultOptions(arch)
		o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 128, 4, 2, 96
		o.Experts, o.ExpertsUsed = 16, 4
		if arch == "qwen3moe" {
			o.FF, o.ExpertFF = 256, 64
		}
		o.Type, o.Seed, o.VocabData = typ, 5, vocab.LlamaSPM
		if mutate != nil {
			mutate(&o)
		}
		p := filepath.Join(dir, name+".gguf")
		if err := synth.Generate(p, o); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	synthMoE("synth-qwen3moe-q4_0", "qwen3moe", ggml.Q4_0, nil)
	synthMoE("synth-qwen3moe-shexp-f16", "qwen3moe", ggml.F16, func(o *synth.Options) { o.SharedFF = 96 })
	synthMoE("synth-mixtral-f16", synth.Mixtral, ggml.F16, nil)
	for _, name := range []string{"tiny-qwen3moe", "tiny-mixtral"} {
		p := filepath.Join("..", "engine", "testdata", "hf", name+".gguf")
		if _, err := os.Stat(p); err == nil {
			paths[name] = p
		}
	}
	return paths
}

// Mixture-of-experts models, whole, on the emulator against the CPU with
// float activations (exactCPU, MatMulID included): the prompt in two
// prefill batches of 24 (kernel_mul_mm_id after the map) and 8 greedy
// decode steps (kernel_mul_mv_id), f16 cache: 1 − cosine of the last
// prompt position's logits ≤ 1e-5 and the same 8 greedy tokens.
func TestMoEFamiliesMatchCPU(t *testing.T) {
	paths := moeModels(t)
	emulatorDevice(t)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range paths {
			if !yield(n) {
				return
			}
		}
	}) {
		t.Run(name, func(t *testing.T) {
			exact, _ := load(t, paths[name], newExactCPU(), false)
			metal, _ := load(t, paths[name], newBackend(t), false)
			hp := exact.m.HP
			ids := make([]int32, 40)
			for i := range ids {
				ids[i] = int32(3 + (i*7919)%(hp.Vocab-3))
			}
			want := runPass(t, exact.m, ids, kv.Config{Type: kv.F16})
			got := runPass(t, metal.m, ids, kv.Config{Type: kv.F16})
			cos := numeric.Cosine(got.last, want.last)
			worstStep := 1.0
			for i := 0; i < greedySteps && got.greedy[i] == want.greedy[i]; i++ {
				worstStep = min(worstStep, numeric.Cosine(got.steps[i], want.steps[i]))
			}
			t.Logf("%s: %d layers, embd %d, %d experts (%d used, ff %d, shared ff %d): 1 - cos(last prompt logits) %.2g, decode steps ≤ %.2g; greedy metal %v, cpu-float %v",
				hp.Arch, hp.Layers, hp.Embd, hp.Experts, hp.ExpertsUsed, hp.ExpertFF, hp.SharedFF, 1-cos, 1-worstStep, got.greedy, want.greedy)
			if !(cos >= 0.99999) {
				t.Errorf("cosine of the last-position logits %.8f < 0.99999", cos)
			}
			if !(worstStep >= 0.99999) {
				t.Errorf("cosine of a decode step's logits %.8f < 0.99999", worstStep)
			}
			if !slices.Equal(got.greedy, want.greedy) {
				t.Errorf("greedy tokens differ: metal %v, cpu with float activations %v", got.greedy, want.greedy)
			}
		})
	}
}
