//go:build linux

package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/half"
	"nibble/engine/kv"
	"nibble/metal/device"
	"nibble/metal/encoder"
	"nibble/metal/internal/emulator"
	"nibble/metal/internal/emulator/emutest"
	"nibble/metal/internal/msltoc"
	"nibble/metal/msl"
	"nibble/metal/shaders"
	"nibble/metal/traffic"
)

// matrixSources is the emulator's simdgroup_matrix test kernel.
func matrixSources(t *testing.T) []msl.Source {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "emulator", "testdata", "matrix.metal"))
	if err != nil {
		t.Fatal(err)
	}
	return []msl.Source{{Name: "matrix.metal", Text: string(text)}}
}

// TestTranslateMatrix translates the simdgroup_matrix test kernels to CUDA
// and, with clang++-19, checks the unit against the shim's matrix types,
// loads, stores and products (templates instantiated; the tensor-core
// path is nvcc's, on the GPU machine).
func TestTranslateMatrix(t *testing.T) {
	c, err := msltoc.TranslateCUDA(matrixSources(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Code, `extern "C" __global__ void matrix_ops(`) {
		t.Fatal("no matrix_ops entry")
	}
	clang, err := exec.LookPath("clang++-19")
	if err != nil {
		t.Skipf("no clang++-19 for the syntax check: %v", err)
	}
	file := filepath.Join(t.TempDir(), "kernels.cu")
	if err := os.WriteFile(file, []byte(c.Code), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(clang, "-std=c++17", "-fsyntax-only", "-DMSL_NO_REGISTRY", "-I", "include", "-x", "c++", file).CombinedOutput(); err != nil {
		t.Fatalf("clang: %v\n%s", err, out)
	}
}

// TestExportMatrix writes, with -out DIR, what `run.sh prefill` needs
// beside TestExport's kernels.cu and check trace: the pp512 traces of the
// 1B shape (Q4_K, Q4_0), DIR/old/kernels.cu (the per-thread mul_mm, the
// baseline) and DIR/matrix: matrix.metal's CUDA translation and a check
// trace of matrix_ops run on the emulator (float products through the
// shim's shuffles, half ones through mma.sync). Without -out it only
// writes a prefill trace to a temporary directory.
func TestExportMatrix(t *testing.T) {
	dir := *outDir
	if dir == "" {
		if err := prefillTrace(t.TempDir(), llama1B, ggml.Q4_K, 512); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, typ := range []ggml.Type{ggml.Q4_K, ggml.Q4_0} {
		if err := prefillTrace(dir, llama1B, typ, 512); err != nil {
			t.Fatal(err)
		}
	}
	writePerThreadKernels(t, filepath.Join(dir, "old"))
	srcs := matrixSources(t)
	c, err := msltoc.TranslateCUDA(srcs)
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(dir, "matrix")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels.cu"), []byte(c.Code), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := emulator.Available(); err != nil {
		emutest.Unavailable(t, err)
	}
	emu, err := emulator.New(emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	tee, err := NewTee(emu, dir, "matrix", 3)
	if err != nil {
		t.Fatal(err)
	}
	lib, err := tee.NewLibrary(srcs)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(11))
	buf := func(b []byte) device.Binding {
		d, err := tee.NewBuffer(len(b))
		if err != nil {
			t.Fatal(err)
		}
		copy(d.Bytes(), b)
		return device.Binding{Buffer: d}
	}
	floats := func(n int) []byte {
		b := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64())))
		}
		return b
	}
	halves := func(n int) []byte {
		b := make([]byte, 2*n)
		for i := range n {
			binary.LittleEndian.PutUint16(b[2*i:], half.FromFloat32(float32(rng.NormFloat64())))
		}
		return b
	}
	bs := []device.Binding{buf(floats(512)), buf(floats(128)), buf(halves(512)), buf(halves(128)), buf(make([]byte, 4*1024)), buf(make([]byte, 2*128))}
	for i := range bs {
		bs[i].Index = i
	}
	p, err := lib.Pipeline("matrix_ops")
	if err != nil {
		t.Fatal(err)
	}
	var l device.CommandList
	l.Add(device.Dispatch{Pipeline: p, Groups: [3]int{1, 1, 1}, Threads: [3]int{64, 1, 1}, Buffers: bs})
	if err := tee.Submit(&l); err != nil {
		t.Fatal(err)
	}
	if err := tee.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := tee.Close(); err != nil {
		t.Fatal(err)
	}
}

// writePerThreadKernels writes dir/kernels.cu: the shaders with
// testdata/mul_mm_perthread.metal (per-thread accumulators, the kernel
// before simdgroup matrices) in place of mul_mm.metal, the baseline of
// run.sh prefill.
func writePerThreadKernels(t *testing.T, dir string) {
	t.Helper()
	old, err := os.ReadFile(filepath.Join("testdata", "mul_mm_perthread.metal"))
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := shaders.Sources()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for i := range srcs {
		if srcs[i].Name == "mul_mm.metal" {
			srcs[i].Text, found = string(old), true
		}
	}
	if !found {
		t.Fatal("no mul_mm.metal among the shaders")
	}
	c, err := msltoc.TranslateCUDA(srcs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels.cu"), []byte(c.Code), 0o644); err != nil {
		t.Fatal(err)
	}
}

// prefillTrace: the dispatches of one prompt of rows tokens from position
// 0 (llama-bench's pp512 for rows 512) through a Llama-shaped model with
// weights of typ (embedding and output Q6_K) and an f16 cache: embed; per
// layer norm, q/k/v, RoPE, attention prefill, store, o, residual, norm,
// gate/up, SwiGLU, down, residual; the final norm and output of the last
// row (llama-bench asks for the last logits only).
func prefillTrace(dir string, s traffic.Shape, typ ggml.Type, rows int) error {
	r, e, err := newRecorder()
	if err != nil {
		return err
	}
	cfg := kv.Config{Type: kv.F16, Layers: s.Layers, KVHeads: s.KVHeads, HeadDim: s.HeadDim, Ctx: rows}
	a := &backend.Attention{Heads: s.Heads, KVHeads: s.KVHeads, HeadDim: s.HeadDim, Scale: float32(1 / math.Sqrt(float64(s.HeadDim)))}
	rope := &backend.RoPE{Dims: s.HeadDim, Base: 500000, PosScale: 1}
	f := func(n int) encoder.Region { return region(r, 4*n*rows) }
	x, h, q, k, v, att, o := f(s.Hidden), f(s.Hidden), f(s.Heads*s.HeadDim), f(s.KVHeads*s.HeadDim), f(s.KVHeads*s.HeadDim), f(s.Heads*s.HeadDim), f(s.Hidden)
	gate, up, act, down := f(s.FFN), f(s.FFN), f(s.FFN), f(s.Hidden)
	logits, tok := region(r, 4*s.Vocab), region(r, 4)
	ws := region(r, encoder.WorkspaceBytes(cfg, s.Heads, rows))
	tokens, pos := make([]int32, rows), make([]int32, rows)
	for i := range rows {
		tokens[i], pos[i] = int32(1000+i), int32(i)
	}
	e.Embed(x, weight(r, s.Embed, s.Vocab, s.Hidden), tokens)
	for l := 0; l < s.Layers; l++ {
		wq, wk, wv, wo := weight(r, typ, s.Heads*s.HeadDim, s.Hidden), weight(r, typ, s.KVHeads*s.HeadDim, s.Hidden),
			weight(r, typ, s.KVHeads*s.HeadDim, s.Hidden), weight(r, typ, s.Hidden, s.Heads*s.HeadDim)
		wg, wu, wd := weight(r, typ, s.FFN, s.Hidden), weight(r, typ, s.FFN, s.Hidden), weight(r, typ, s.Hidden, s.FFN)
		n1, n2 := weight(r, ggml.F32, 1, s.Hidden), weight(r, ggml.F32, 1, s.Hidden)
		c := kvLayer(r, cfg)
		e.RMSNorm(h, x, n1, 1e-5, rows)
		e.MatMul(q, wq, h, rows)
		e.MatMul(k, wk, h, rows)
		e.MatMul(v, wv, h, rows)
		e.RoPE(q, s.Heads, s.HeadDim, rows, pos, rope)
		e.RoPE(k, s.KVHeads, s.HeadDim, rows, pos, rope)
		e.AttendPrefill(att, q, k, v, c, 0, rows, a, ws)
		e.KVStore(c, k, v, 0, rows)
		e.MatMul(o, wo, att, rows)
		e.Add(x, o, s.Hidden*rows)
		e.RMSNorm(h, x, n2, 1e-5, rows)
		e.MatMul(gate, wg, h, rows)
		e.MatMul(up, wu, h, rows)
		e.SwiGLU(act, gate, up, s.FFN*rows)
		e.MatMul(down, wd, act, rows)
		e.Add(x, down, s.Hidden*rows)
	}
	last := x.Sub(4*s.Hidden*(rows-1), 4*s.Hidden)
	e.RMSNorm(h, last, weight(r, ggml.F32, 1, s.Hidden), 1e-5, 1)
	e.MatMul(logits, weight(r, s.Output, s.Vocab, s.Hidden), h, 1)
	e.Argmax(tok, logits, 1, s.Vocab)
	if err := e.Err(); err != nil {
		return err
	}
	if err := r.Submit(e.List()); err != nil {
		return err
	}
	return r.Write(dir, fmt.Sprintf("prefill-%s-%s-%d", s.Name, strings.ToLower(typ.String()), rows), nil)
}
