//go:build linux

package gpu

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/metal/encoder"
	"nibble/metal/internal/emulator"
	"nibble/metal/internal/emulator/emutest"
	"nibble/metal/shaders"
	"nibble/metal/traffic"
)

var moeOut = flag.String("moe-out", "", "TestExportMoE: write kernels.cu and the mixture-of-experts traces here")

// qwen3MoESynth is the synth Qwen3-MoE shape of the CPU speed check;
// qwen3MoELayer one layer of Qwen3-30B-A3B (128 experts).
var (
	qwen3MoESynth = traffic.Shape{Name: "qwen3moe-synth", Layers: 8, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, Vocab: 151936,
		Weight: ggml.Q4_0, Embed: ggml.Q4_0, Output: ggml.Q4_0, Experts: 64, ExpertsUsed: 8, ExpertFFN: 768, ExpertWeight: ggml.Q4_0}
	qwen3MoELayer = traffic.Shape{Name: "qwen3moe-layer", Layers: 1, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, Vocab: 151936,
		Weight: ggml.Q4_0, Embed: ggml.Q4_0, Output: ggml.Q4_0, Experts: 128, ExpertsUsed: 8, ExpertFFN: 768, ExpertWeight: ggml.Q4_0}
)

// moeBlock encodes one decode token's mixture of experts from the normed
// hidden state h into out, as the Metal backend's backend.Experts ops
// issue it: the F32 router, the route kernel, gate and up by id, SwiGLU
// over the k slots, down by id (x per slot), the weighted sum. It returns
// the weight bytes a step reads (the router, the chosen experts' share).
func moeBlock(r *Recorder, e *encoder.Encoder, s traffic.Shape, out, h encoder.Region) int {
	f := func(n int) encoder.Region { return region(r, 4*n) }
	k, ff := s.ExpertsUsed, s.ExpertFFN
	router := weight(r, ggml.F32, s.Experts, s.Hidden)
	wg, wu := weight(r, s.ExpertWeight, s.Experts*ff, s.Hidden), weight(r, s.ExpertWeight, s.Experts*ff, s.Hidden)
	wd := weight(r, s.ExpertWeight, s.Experts*s.Hidden, ff)
	logits, ids, wts := f(s.Experts), f(k), f(k)
	gate, up, act, y := f(k*ff), f(k*ff), f(k*ff), f(k*s.Hidden)
	e.MatMul(logits, router, h, 1)
	e.Route(ids, wts, logits, 1, &backend.Router{Experts: s.Experts, Used: k, Gating: backend.GatingSoftmax, Norm: true})
	e.MatMulID(gate, wg, s.Experts, h, ids, 1, k, false)
	e.MatMulID(up, wu, s.Experts, h, ids, 1, k, false)
	e.SwiGLU(act, gate, up, k*ff)
	e.MatMulID(y, wd, s.Experts, act, ids, 1, k, true)
	e.SumExperts(out, y, wts, 1, k, s.Hidden)
	return router.Len + (wg.Len+wu.Len+wd.Len)/s.Experts*k
}

// moeLayerTrace: one decode token's MoE block of a layer (norm, experts,
// residual), the unit the traffic model's bytes are held to.
func moeLayerTrace(dir string, s traffic.Shape) error {
	r, e, err := newRecorder()
	if err != nil {
		return err
	}
	x, h, out := region(r, 4*s.Hidden), region(r, 4*s.Hidden), region(r, 4*s.Hidden)
	n := weight(r, ggml.F32, 1, s.Hidden)
	e.RMSNorm(h, x, n, 1e-6, 1)
	active := n.Len + moeBlock(r, e, s, out, h)
	e.Add(x, out, s.Hidden)
	if err := e.Err(); err != nil {
		return err
	}
	if err := r.Submit(e.List()); err != nil {
		return err
	}
	step := moeLayerStep(s)
	return r.Write(dir, "moe-"+s.Name, map[string]string{
		"weight_bytes": fmt.Sprint(active),
		"model_bytes":  fmt.Sprint(step.Bytes()),
		"unique_bytes": fmt.Sprint(step.Bytes()),
	})
}

// moeLayerStep is the traffic model of moeLayerTrace's dispatches.
func moeLayerStep(s traffic.Shape) traffic.Step {
	var st traffic.Step
	st.Norm(s.Hidden)
	st.Experts(s)
	st.Add(s.Hidden)
	return st
}

// TestExportMoE writes kernels.cu, the MoE timing traces (one Qwen3-30B-A3B
// layer's MoE block; one decode step of the synth Qwen3-MoE model at 4096
// positions, q4 cache) and, with -moe-out and the emulator, check-moe: the
// MoE and MXFP4 kernels on random inputs, run on the emulator, for the
// harness to compare the GPU's results with.
func TestExportMoE(t *testing.T) {
	dir := *moeOut
	if dir == "" {
		dir = t.TempDir()
	}
	if _, err := WriteKernels(dir); err != nil {
		t.Fatal(err)
	}
	if err := moeLayerTrace(dir, qwen3MoELayer); err != nil {
		t.Fatal(err)
	}
	if err := decodeStepTrace(dir, qwen3MoESynth, kv.Q4, 4096); err != nil {
		t.Fatal(err)
	}
	if *moeOut == "" {
		return
	}
	if err := emulator.Available(); err != nil {
		emutest.Unavailable(t, err)
	}
	emu, err := emulator.New(emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	tee, err := NewTee(emu, dir, "check-moe", 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := moeKernelsRun(tee); err != nil {
		t.Fatal(err)
	}
	if err := tee.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("check-moe trace: %d dispatches run, %d recorded", tee.Ran, tee.Recorded)
}

// moeKernelsRun runs every MoE kernel and the MXFP4 weight kernels on
// random inputs through tee.
func moeKernelsRun(tee *TeeDevice) error {
	srcs, err := shaders.Sources()
	if err != nil {
		return err
	}
	lib, err := tee.NewLibrary(srcs)
	if err != nil {
		return err
	}
	e := encoder.New(tee, lib)
	defer e.Close()
	rng := rand.New(rand.NewSource(23))
	buf := func(b []byte) encoder.Region {
		d, err := tee.NewBuffer(len(b))
		if err != nil {
			panic(err)
		}
		copy(d.Bytes(), b)
		return encoder.Region{Buf: d, Len: len(b)}
	}
	floats := func(n int) encoder.Region {
		b := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64())))
		}
		return buf(b)
	}
	run := func() error {
		if err := e.Err(); err != nil {
			return err
		}
		if err := tee.Submit(e.List()); err != nil {
			return err
		}
		if err := tee.Sync(); err != nil {
			return err
		}
		e.Reset()
		return nil
	}
	const experts, k, cols, outs = 32, 4, 256, 96
	for _, g := range []backend.Gating{backend.GatingSoftmax, backend.GatingSoftmaxTopK, backend.GatingSigmoid} {
		e.Route(floats(9*k), floats(9*k), floats(9*experts), 9, &backend.Router{Experts: experts, Used: k, Gating: g, Norm: g == backend.GatingSoftmax})
	}
	ids := floats(9 * k)
	e.Route(ids, floats(9*k), floats(9*experts), 9, &backend.Router{Experts: experts, Used: k})
	if err := run(); err != nil {
		return err
	}
	x, dst := floats(9*k*cols), floats(9*k*outs)
	for _, t := range []ggml.Type{ggml.Q4_0, ggml.MXFP4, ggml.Q4_K, ggml.F16} {
		wb, err := randomWeight(rng, t, experts*outs, cols)
		if err != nil {
			return fmt.Errorf("%v: %w", t, err)
		}
		w := &encoder.Weight{Region: buf(wb), Type: t, Rows: experts * outs, Cols: cols}
		e.MatMulID(dst, w, experts, x, ids, 1, k, false)
		e.MatMulID(dst, w, experts, x, ids, 2, k, true)
		e.MatMulID(dst, w, experts, x, ids, 9, k, false)
		e.MatMulID(dst, w, experts, x, ids, 9, k, true)
		if t == ggml.MXFP4 {
			// The first expert's matrix as a plain weight.
			w1 := &encoder.Weight{Region: w.Sub(0, outs*t.RowBytes(cols)), Type: t, Rows: outs, Cols: cols}
			e.Embed(dst, w1, []int32{3, 0, outs - 1, 17})
			e.MatMul(dst, w1, x, 1)
			e.MatMul(dst, w1, x, 3)
			e.MatMul(dst, w1, x, 9)
		}
		if err := run(); err != nil {
			return fmt.Errorf("%v: %w", t, err)
		}
	}
	bias := &encoder.Weight{Region: floats(experts * 64), Type: ggml.F32, Rows: experts, Cols: 64}
	e.AddBiasID(x, bias, experts, ids, 9*k)
	e.SumExperts(dst, x, floats(9*k), 9, k, 64)
	e.SumExperts(dst, x, floats(9*k), 3, k, 7)
	e.SwiGLUClamped(dst, x, x.Sub(4*64, 4*6*64), 6*64, 1.702, 7)
	e.SwiGLUClamped(dst, x, x.Sub(4*64, 4*7), 7, 1.702, 7)
	return run()
}
