//go:build linux

package gpu

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"nibble/metal/internal/emulator/emutest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine"
	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/half"
	"nibble/engine/kv"
	"nibble/engine/quant"
	"nibble/internal/testdata"
	"nibble/metal"
	"nibble/metal/device"
	"nibble/metal/encoder"
	"nibble/metal/internal/emulator"
	"nibble/metal/internal/msltoc"
	"nibble/metal/msl"
	"nibble/metal/shaders"
	"nibble/metal/traffic"
)

var outDir = flag.String("out", "", "TestExport: write kernels.cu and the traces here")

const exportPrompt = "Nibble keeps its KV cache in four bits because memory, not arithmetic, " +
	"bounds decoding on a laptop: every generated token reads the whole cache once."

// TestExport writes what metal/internal/gpu/run.sh needs on the GPU machine:
// kernels.cu, the check trace (the test models' forward passes on the
// emulator with three cache types, up to 3 dispatches per pipeline) and the
// timing traces (decode attention of one Llama-3.1-70B layer at 8K, 32K and
// 128K for q4, q8 and f16 caches; one decode step of a Llama-3.2-1B-shaped
// model). Without -out it writes the timing traces to a temporary
// directory only.
func TestExport(t *testing.T) {
	dir := *outDir
	full := dir != ""
	if !full {
		dir = t.TempDir()
	}
	if _, err := WriteKernels(dir); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []kv.Type{kv.Q4, kv.Q8, kv.F16} {
		for _, n := range []int{8 << 10, 32 << 10, 128 << 10} {
			if err := attentionTrace(dir, typ, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The matrix-unit kernels with the H200's core count: float and half
	// operands.
	for _, typ := range []kv.Type{kv.Q4, kv.Q8, kv.F16} {
		for _, n := range []int{8 << 10, 32 << 10, 128 << 10} {
			for _, k := range []encoder.AttnKernel{encoder.AttnMatrix, encoder.AttnMatrixHalf} {
				name := fmt.Sprintf("attn70b-mma-%s-%dk-h200", typ, n>>10)
				if k == encoder.AttnMatrixHalf {
					name = fmt.Sprintf("attn70b-mmah-%s-%dk-h200", typ, n>>10)
				}
				if err := attentionTraceOn(dir, name, typ, n, h200Cores, k); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, typ := range []kv.Type{kv.Q4, kv.F16} {
		for _, v := range [][2]int{{8, 32}, {8, 64}, {8, 128}, {4, 32}, {4, 64}, {2, 32}} {
			if err := attentionVariant(dir, typ, 128<<10, 64, v[0], v[1]); err != nil {
				t.Fatal(err)
			}
		}
		// GQA 1 (8 query heads on the 8 kv heads): the same K/V bytes with
		// an eighth of the arithmetic.
		if err := attentionVariant(dir, typ, 128<<10, 8, 1, 32); err != nil {
			t.Fatal(err)
		}
	}
	if err := bugsTrace(dir); err != nil {
		t.Fatal(err)
	}
	if err := staleTraces(dir); err != nil {
		t.Fatal(err)
	}
	if err := decodeStepTrace(dir, llama1B, kv.Q4, 4096); err != nil {
		t.Fatal(err)
	}
	if err := decodeStepTrace(dir, llama1B, kv.F16, 4096); err != nil {
		t.Fatal(err)
	}
	if !full {
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
	tee, err := NewTee(emu, dir, "check", 3)
	if err != nil {
		t.Fatal(err)
	}
	models := []string{"tiny-llama-spm-q4_k_m", "tiny-qwen2-q4_0", "tiny-llama-spm-q4_0"}
	configs := []kv.Config{
		{Type: kv.F16},
		{Type: kv.Q4, GroupSize: 32, Smooth: true},
		{Type: kv.Q8, GroupSize: 32},
		{Type: kv.Q4, GroupSize: 64, Rotate: true},
	}
	for _, name := range models {
		path := filepath.Join(testdata.Dir(t), "models", name+".gguf")
		if _, err := os.Stat(path); err != nil {
			t.Logf("skipping %s: %v", name, err)
			continue
		}
		for _, c := range configs {
			if err := forwardPass(tee, path, c); err != nil {
				t.Fatalf("%s %v: %v", name, c.Type, err)
			}
		}
	}
	if err := kernelsRun(tee); err != nil {
		t.Fatal(err)
	}
	if err := matVecRun(tee); err != nil {
		t.Fatal(err)
	}
	if err := tee.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("check trace: %d dispatches run on the emulator, %d recorded; %d MB of blobs", tee.Ran, tee.Recorded, tee.t.bytes>>20)
}

// forwardPass runs the prompt in two prefill batches and two decode steps.
func forwardPass(dev *TeeDevice, path string, c kv.Config) error {
	b, err := metal.New(dev)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := engine.LoadModel(path, b)
	if err != nil {
		return err
	}
	defer m.Close()
	ids := m.EncodePrompt(exportPrompt)
	const batch = 16
	c.Ctx = len(ids) + 4
	st, err := m.NewState(c, batch)
	if err != nil {
		return err
	}
	defer st.Close()
	logits := make([]float32, m.HP.Vocab)
	for pos := 0; pos < len(ids); pos += batch {
		if err := st.Forward(ids[pos:min(len(ids), pos+batch)], pos, logits); err != nil {
			return fmt.Errorf("prefill at %d: %w", pos, err)
		}
	}
	for i := 0; i < 2; i++ {
		if err := st.Forward([]int32{int32(i + 1)}, len(ids)+i, logits); err != nil {
			return fmt.Errorf("decode %d: %w", i, err)
		}
	}
	return nil
}

// recorderLibrary is a recorder and the shaders' library on it.
func recorderLibrary() (*Recorder, device.Library, error) {
	r := NewRecorder()
	srcs, err := shaders.Sources()
	if err != nil {
		return nil, nil, err
	}
	lib, err := r.NewLibrary(srcs)
	return r, lib, err
}

func newRecorder() (*Recorder, *encoder.Encoder, error) {
	r, lib, err := recorderLibrary()
	if err != nil {
		return nil, nil, err
	}
	return r, encoder.New(r, lib), nil
}

func region(r *Recorder, n int) encoder.Region {
	b, _ := r.NewBuffer(n)
	return encoder.Region{Buf: b, Len: n}
}

func kvLayer(r *Recorder, cfg kv.Config) *encoder.KVLayer {
	c := &encoder.KVLayer{Cfg: cfg}
	c.K = region(r, c.PlaneBytes())
	c.V = region(r, c.PlaneBytes())
	return c
}

// attentionTrace: decode attention (pass 1 and merge) of one layer of
// Llama-3.1-70B (64 query heads, 8 kv heads, D 128) over n positions, as
// the encoder lays it out for a GPU of unknown core count.
func attentionTrace(dir string, typ kv.Type, n int) error {
	return attentionTraceOn(dir, fmt.Sprintf("attn70b-%s-%dk", typ, n>>10), typ, n, 0, encoder.AttnScalar)
}

// h200Cores is the H200's SM count: the core count the encoder sizes
// decode attention's splits for in the traces timed there.
const h200Cores = 132

// attentionTraceOn is attentionTrace for a GPU of cores cores with pass 1
// kernel k.
func attentionTraceOn(dir, name string, typ kv.Type, n, cores int, k encoder.AttnKernel) error {
	r, e, err := newRecorder()
	if err != nil {
		return err
	}
	e.SetCores(cores)
	e.SetAttnKernel(k)
	cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: 8, HeadDim: 128, Ctx: n}
	if typ == kv.F16 {
		cfg.GroupSize = 0
	}
	a := &backend.Attention{Heads: 64, KVHeads: 8, HeadDim: 128, Scale: float32(1 / math.Sqrt(128))}
	c := kvLayer(r, cfg)
	q, out := region(r, 64*128*4), region(r, 64*128*4)
	ws := region(r, encoder.WorkspaceBytes(cfg, a.Heads, 0))
	e.AttendDecode(out, q, c, n, a, ws)
	if err := e.Err(); err != nil {
		return err
	}
	if err := r.Submit(e.List()); err != nil {
		return err
	}
	unique := 2*c.PlaneBytes() + 2*64*128*4
	return r.Write(dir, name, map[string]string{
		"unique_bytes": fmt.Sprint(unique),
		"kv_bytes":     fmt.Sprint(2 * c.PlaneBytes()),
	})
}

var llama1B = traffic.Shape{Name: "llama3.2-1b", Layers: 16, Hidden: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 8192, Vocab: 128256,
	Weight: ggml.Q4_K, Embed: ggml.Q6_K, Output: ggml.Q6_K}

func weight(r *Recorder, t ggml.Type, rows, cols int) *encoder.Weight {
	n := t.RowBytes(cols) * rows
	return &encoder.Weight{Region: region(r, n), Type: t, Rows: rows, Cols: cols}
}

// decodeStepTrace: the dispatches of one decode step (one token at position
// ctx-1 over a cache of ctx positions), as the engine's Llama forward pass
// issues them: embed; per layer norm, q/k/v, RoPE, store, attention, o,
// residual, norm, gate/up, SwiGLU, down (or the experts, moeBlock, and a
// shared expert beside them), residual; final norm, output, argmax. With
// stepOptions.fused the norms before mat-vecs go into the mat-vecs
// (MatMulNorm); the backend does not (on the H200 the fused step, then
// with SwiGLU fused into the down projection as well, took 2.95 ms against
// 1.62 ms: each set of rows re-reads x and the norm's weight from L2).
func decodeStepTrace(dir string, s traffic.Shape, typ kv.Type, ctx int) error {
	return decodeStepTraceWith(dir, s, typ, ctx, stepOptions{})
}

// stepOptions: fused, the RMS norms in the mat-vecs that read them
// (MatMulNorm), else each op its dispatch; perCore, the mat-vec grids' simdgroups a core
// (encoder.MatVecSimdgroupsPerCore when 0); suffix, the trace name's.
type stepOptions struct {
	fused   bool
	ropeKV  bool // K's RoPE in the KV store (KVStoreRoPE)
	perCore int
	suffix  string
}

func decodeStepTraceWith(dir string, s traffic.Shape, typ kv.Type, ctx int, opt stepOptions) error {
	r, e, err := newRecorder()
	if err != nil {
		return err
	}
	if opt.perCore > 0 {
		e.TuneMatVec(opt.perCore)
	}
	cfg := kv.Config{Type: typ, GroupSize: 32, Layers: s.Layers, KVHeads: s.KVHeads, HeadDim: s.HeadDim, Ctx: ctx}
	if typ == kv.F16 {
		cfg.GroupSize = 0
	}
	a := &backend.Attention{Heads: s.Heads, KVHeads: s.KVHeads, HeadDim: s.HeadDim, Scale: float32(1 / math.Sqrt(float64(s.HeadDim)))}
	rope := &backend.RoPE{Dims: s.HeadDim, Base: 500000, PosScale: 1}
	f := func(n int) encoder.Region { return region(r, 4*n) }
	x, h, q, k, v, att, o := f(s.Hidden), f(s.Hidden), f(s.Heads*s.HeadDim), f(s.KVHeads*s.HeadDim), f(s.KVHeads*s.HeadDim), f(s.Heads*s.HeadDim), f(s.Hidden)
	gate, up, act, down, logits, tok := f(max(s.FFN, 1)), f(max(s.FFN, 1)), f(max(s.FFN, 1)), f(s.Hidden), f(s.Vocab), f(4)
	ws := region(r, encoder.WorkspaceBytes(cfg, s.Heads, 1))
	embed := weight(r, s.Embed, s.Vocab, s.Hidden)
	// normed: dsts[i] = ws[i]·RMSNorm(x) (h holds the norm when unfused).
	normed := func(x encoder.Region, n *encoder.Weight, dsts []encoder.Region, ws ...*encoder.Weight) {
		if opt.fused {
			for i := range dsts {
				e.MatMulNorm(dsts[i], ws[i], x, n, 1e-5, 1)
			}
			return
		}
		e.RMSNorm(h, x, n, 1e-5, 1)
		for i := range dsts {
			e.MatMul(dsts[i], ws[i], h, 1)
		}
	}
	pos := ctx - 1
	e.Embed(x, embed, []int32{128000})
	weightBytes := embed.Type.RowBytes(s.Hidden) // one row read
	for l := 0; l < s.Layers; l++ {
		wq, wk, wv, wo := weight(r, s.Weight, s.Heads*s.HeadDim, s.Hidden), weight(r, s.Weight, s.KVHeads*s.HeadDim, s.Hidden),
			weight(r, s.Weight, s.KVHeads*s.HeadDim, s.Hidden), weight(r, s.Weight, s.Hidden, s.Heads*s.HeadDim)
		n1, n2 := weight(r, ggml.F32, 1, s.Hidden), weight(r, ggml.F32, 1, s.Hidden)
		for _, w := range []*encoder.Weight{wq, wk, wv, wo, n1, n2} {
			weightBytes += w.Len
		}
		c := kvLayer(r, cfg)
		normed(x, n1, []encoder.Region{q, k, v}, wq, wk, wv)
		e.RoPE(q, s.Heads, s.HeadDim, 1, []int32{int32(pos)}, rope)
		if opt.ropeKV {
			e.KVStoreRoPE(c, k, v, pos, 1, rope)
		} else {
			e.RoPE(k, s.KVHeads, s.HeadDim, 1, []int32{int32(pos)}, rope)
			e.KVStore(c, k, v, pos, 1)
		}
		e.AttendDecode(att, q, c, pos+1, a, ws)
		e.MatMul(o, wo, att, 1)
		e.Add(x, o, s.Hidden)
		if s.Experts > 0 {
			e.RMSNorm(h, x, n2, 1e-5, 1)
			weightBytes += moeBlock(r, e, s, down, h)
		}
		if s.FFN > 0 {
			wg, wu, wd := weight(r, s.Weight, s.FFN, s.Hidden), weight(r, s.Weight, s.FFN, s.Hidden), weight(r, s.Weight, s.Hidden, s.FFN)
			weightBytes += wg.Len + wu.Len + wd.Len
			shared := down
			if s.Experts > 0 {
				shared = f(s.Hidden)
			}
			normed(x, n2, []encoder.Region{gate, up}, wg, wu)
			e.SwiGLU(act, gate, up, s.FFN)
			e.MatMul(shared, wd, act, 1)
			if s.Experts > 0 {
				e.Add(down, shared, s.Hidden)
			}
		}
		e.Add(x, down, s.Hidden)
	}
	nf := weight(r, ggml.F32, 1, s.Hidden)
	out := weight(r, s.Output, s.Vocab, s.Hidden)
	weightBytes += nf.Len + out.Len
	normed(x, nf, []encoder.Region{logits}, out)
	e.Argmax(tok, logits, 1, s.Vocab)
	if err := e.Err(); err != nil {
		return err
	}
	if err := r.Submit(e.List()); err != nil {
		return err
	}
	kvBytes := int64(s.Layers) * traffic.KVBytes(s.KVHeads, s.HeadDim, ctx, traffic.Cache{Type: typ, GroupSize: cfg.GroupSize})
	return r.Write(dir, fmt.Sprintf("decode-%s-%s-%dk%s", s.Name, typ, ctx>>10, opt.suffix), map[string]string{
		"weight_bytes": fmt.Sprint(weightBytes),
		"kv_bytes":     fmt.Sprint(kvBytes),
	})
}

// attentionVariant is the decode attention of attentionTrace (or, with
// heads other than 64, of heads query heads on the same 8 kv heads)
// dispatched with other shapes than the encoder picks: hg query heads per threadgroup
// (G/hg threadgroups per kv head, each reading the group's K/V) and
// splits splits per kv head. The kernels are the same; hg is a function
// constant (a build of its own).
func attentionVariant(dir string, typ kv.Type, n, heads, hg, splits int) error {
	r, lib, err := recorderLibrary()
	if err != nil {
		return err
	}
	const kvHeads, d = 8, 128
	cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: kvHeads, HeadDim: d, Ctx: n}
	c := kvLayer(r, cfg)
	q, out := region(r, heads*d*4), region(r, heads*d*4)
	partO, partML := region(r, splits*heads*d*4), region(r, splits*heads*2*4)
	g := heads / kvHeads
	chunks := g / hg
	chunk := (n + splits - 1) / splits
	// No residual window: the ring starts at the end (Tail = N).
	args := encoder.AttnArgs{Heads: uint32(heads), Group: uint32(g), Chunks: uint32(chunks), Ctx: uint32(n), N: uint32(n),
		Chunk: uint32(chunk), Splits: uint32(splits), KVHeads: kvHeads,
		QScale: float32(1 / math.Sqrt(d) * 1.4426950408889634), Norm: float32(1 / math.Sqrt(d)), Tail: uint32(n)}.Bytes()
	consts := []device.Constant{{Index: 100, Value: uint32(d)}, {Index: 101, Value: uint32(32)}, {Index: 102, Value: uint32(hg)},
		{Index: 103, Value: false}, {Index: 104, Value: false}, {Index: 105, Value: false}}
	p1, err := lib.Pipeline("kernel_attn_decode_"+typ.String(), consts...)
	if err != nil {
		return err
	}
	p2, err := lib.Pipeline("kernel_attn_merge_f32", consts...)
	if err != nil {
		return err
	}
	meta := c.CodesBytes()
	km, vm := c.K.Sub(meta, 0), c.V.Sub(meta, 0)
	if typ == kv.F16 {
		km, vm = c.K, c.V
	}
	bind := func(i int, x encoder.Region) device.Binding {
		return device.Binding{Index: i, Buffer: x.Buf, Offset: x.Off}
	}
	const nsg, bt = 8, 64
	shared := 4 * (hg*d + hg*16 + max(nsg*hg*bt, nsg*d) + 2*nsg)
	var l device.CommandList
	l.Add(device.Dispatch{Pipeline: p1, Groups: [3]int{kvHeads * chunks, splits, 1}, Threads: [3]int{256, 1, 1},
		Buffers: []device.Binding{bind(1, q), bind(2, c.K), bind(3, km), bind(4, c.V), bind(5, vm), bind(6, c.K), bind(7, c.K),
			bind(8, partO), bind(9, partML), bind(10, partO)},
		Inline: []device.Inline{{Index: 0, Data: args}}, Threadgroup: []int{(shared + 15) &^ 15}})
	l.Add(device.Dispatch{Pipeline: p2, Groups: [3]int{heads, 1, 1}, Threads: [3]int{d, 1, 1},
		Buffers: []device.Binding{bind(1, partO), bind(2, partML), bind(3, out)},
		Inline:  []device.Inline{{Index: 0, Data: args}}})
	if err := r.Submit(&l); err != nil {
		return err
	}
	name := fmt.Sprintf("attn70b-%s-%dk-hg%d-s%d", typ, n>>10, hg, splits)
	if heads != 64 {
		name = fmt.Sprintf("attn-g%d-%s-%dk-hg%d-s%d", heads/kvHeads, typ, n>>10, hg, splits)
	}
	return r.Write(dir, name, map[string]string{
		"unique_bytes": fmt.Sprint(2*c.PlaneBytes() + 2*heads*d*4),
	})
}

// staleTraces writes two traces the harness must refuse (run.sh check
// runs them): stale-args, a 70B-shaped decode attention whose argument
// blocks are cut to 52 bytes (the struct before the ring fields, which
// the kernels now read as 72), and stale-format, a valid trace under
// format 1's header.
func staleTraces(dir string) error {
	r, e, err := newRecorder()
	if err != nil {
		return err
	}
	cfg := kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: 8, HeadDim: 128, Ctx: 4096}
	a := &backend.Attention{Heads: 64, KVHeads: 8, HeadDim: 128, Scale: float32(1 / math.Sqrt(128))}
	c := kvLayer(r, cfg)
	q, out := region(r, 64*128*4), region(r, 64*128*4)
	e.AttendDecode(out, q, c, 4096, a, region(r, encoder.WorkspaceBytes(cfg, a.Heads, 0)))
	if err := e.Err(); err != nil {
		return err
	}
	if err := r.Submit(e.List()); err != nil {
		return err
	}
	if err := r.Write(dir, "stale-format", nil); err != nil {
		return err
	}
	path := filepath.Join(dir, "stale-format.trace")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	first := fmt.Sprintf("nibble-trace %d\n", traceFormat)
	if !strings.HasPrefix(string(b), first) {
		return fmt.Errorf("%s: no %q header", path, first)
	}
	if err := os.WriteFile(path, []byte("nibble-trace 1\n"+string(b[len(first):])), 0o644); err != nil {
		return err
	}
	for i := range r.list {
		for j := range r.list[i].d.Inline {
			in := &r.list[i].d.Inline[j]
			in.Data = in.Data[:min(len(in.Data), 52)]
		}
	}
	return r.Write(dir, "stale-args", nil)
}

// bugsTrace writes dir/bugs: the CUDA translation of the emulator's
// planted-bug kernels (metal/internal/emulator/testdata/bugs.metal) and a trace of
// those compute-sanitizer should flag: a missing barrier
// (shift_missing_barrier), a clear and a write of the same slots without a
// barrier between (clear_then_write), and two different barriers in the
// two branches of an if (two_barriers).
func bugsTrace(dir string) error {
	text, err := os.ReadFile(filepath.Join("..", "emulator", "testdata", "bugs.metal"))
	if err != nil {
		return err
	}
	srcs := []msl.Source{{Name: "bugs.metal", Text: string(text)}}
	c, err := msltoc.TranslateCUDA(srcs)
	if err != nil {
		return err
	}
	dir = filepath.Join(dir, "bugs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels.cu"), []byte(c.Code), 0o644); err != nil {
		return err
	}
	r := NewRecorder()
	lib, err := r.NewLibrary(srcs)
	if err != nil {
		return err
	}
	x, y := region(r, 4*256), region(r, 4*256)
	bind := func(i int, x encoder.Region) device.Binding {
		return device.Binding{Index: i, Buffer: x.Buf, Offset: x.Off}
	}
	var l device.CommandList
	for _, k := range []struct {
		name    string
		threads int
		bufs    []device.Binding
		tg      []int
	}{
		{"shift_missing_barrier", 64, []device.Binding{bind(0, x), bind(1, y)}, []int{256}},
		{"clear_then_write", 128, []device.Binding{bind(0, y)}, []int{128}},
		{"two_barriers", 64, []device.Binding{bind(0, y)}, nil},
	} {
		p, err := lib.Pipeline(k.name)
		if err != nil {
			return err
		}
		l.Add(device.Dispatch{Pipeline: p, Groups: [3]int{1, 1, 1}, Threads: [3]int{k.threads, 1, 1}, Buffers: k.bufs, Threadgroup: k.tg})
	}
	if err := r.Submit(&l); err != nil {
		return err
	}
	return r.Write(dir, "bugs", nil)
}

// halfFields are the byte offsets of the half scales in each block type
// (common.metal's structs), set to small values in random blocks.
var halfFields = map[ggml.Type][]int{
	ggml.Q4_1: {0, 2}, ggml.Q5_0: {0}, ggml.Q5_1: {0, 2}, ggml.Q2_K: {80, 82}, ggml.Q3_K: {108},
	ggml.Q4_K: {0, 2}, ggml.Q5_K: {0, 2}, ggml.Q6_K: {208},
}

// randomWeight is rows×cols of type t: quantized from random floats where
// engine/quant can, else random blocks with sane half scales.
func randomWeight(rng *rand.Rand, t ggml.Type, rows, cols int) ([]byte, error) {
	rb := t.RowBytes(cols)
	out := make([]byte, rows*rb)
	x := make([]float32, cols)
	for r := 0; r < rows; r++ {
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		if err := quant.Quantize(t, out[r*rb:(r+1)*rb], x); err == nil {
			continue
		}
		rng.Read(out[r*rb : (r+1)*rb])
	}
	if f, ok := halfFields[t]; ok {
		bs := t.RowBytes(256) / (256 / t.BlockSize())
		for b := 0; b+bs <= len(out); b += bs {
			for _, off := range f {
				binary.LittleEndian.PutUint16(out[b+off:], half.FromFloat32(0.002+0.02*rng.Float32()))
			}
		}
	}
	return out, nil
}

// kernelsRun adds to the check trace the kernels the test models do not
// use: get_rows, mul_mv (one and three rows of x) and mul_mm for every
// weight type, rms_norm with an f16 weight, argmax and the scalar forms of
// the element-wise kernels, on random inputs.
func kernelsRun(tee *TeeDevice) error {
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
	rng := rand.New(rand.NewSource(7))
	buf := func(b []byte) (encoder.Region, error) {
		d, err := tee.NewBuffer(len(b))
		if err != nil {
			return encoder.Region{}, err
		}
		copy(d.Bytes(), b)
		return encoder.Region{Buf: d, Len: len(b)}, nil
	}
	floats := func(n int) []byte {
		b := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64())))
		}
		return b
	}
	const rows, cols = 64, 512
	x, err := buf(floats(9 * cols))
	if err != nil {
		return err
	}
	dst, err := buf(make([]byte, 4*9*rows+4*4*cols))
	if err != nil {
		return err
	}
	for _, t := range []ggml.Type{ggml.F32, ggml.F16, ggml.BF16, ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0,
		ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K} {
		wb, err := randomWeight(rng, t, rows, cols)
		if err != nil {
			return err
		}
		wr, err := buf(wb)
		if err != nil {
			return err
		}
		w := &encoder.Weight{Region: wr, Type: t, Rows: rows, Cols: cols}
		e.Embed(dst, w, []int32{3, 0, 63, 17})
		e.MatMul(dst, w, x, 1)
		e.MatMul(dst, w, x, 3)
		e.MatMul(dst, w, x, 9)
		if t == ggml.F16 {
			nw := &encoder.Weight{Region: wr.Sub(0, 2*cols), Type: t, Rows: 1, Cols: cols}
			e.RMSNorm(dst, x, nw, 1e-5, 2)
		}
		if err := e.Err(); err != nil {
			return fmt.Errorf("%v: %w", t, err)
		}
		if err := tee.Submit(e.List()); err != nil {
			return err
		}
		if err := tee.Sync(); err != nil {
			return err
		}
		e.Reset()
	}
	if err := attnMatrixRun(tee, e, rng, buf); err != nil {
		return err
	}
	e.Argmax(dst, x, 2, 1000)
	e.Argmax(dst, x, 3, 333)
	// The element-wise kernels' scalar forms: lengths that are not
	// multiples of 4.
	e.Add(dst, x, 7)
	e.SwiGLU(dst, x, x.Sub(64, 4*cols), 7)
	e.Copy(dst, 1, x, 3, 5)
	e.AddBias(dst, &encoder.Weight{Region: x.Sub(0, 4*7), Type: ggml.F32, Rows: 1, Cols: 7}, 3)
	if err := e.Err(); err != nil {
		return err
	}
	if err := tee.Submit(e.List()); err != nil {
		return err
	}
	return tee.Sync()
}

var decodeOut = flag.String("decode-out", "", "TestExportDecode: write kernels.cu and the decode-step traces here")

// TestExportDecode writes kernels.cu and the 1B decode-step traces alone
// (q4 KV at depth 4096, Q4_K and Q4_0 weights; f16 KV with Q4_K; the
// fused step and other mat-vec grids as variants), for
// `run.sh decode` and `run.sh ncu-decode`: the kernels of one tree against
// another's (DIR=old, DIR=new) without the emulator's check trace.
func TestExportDecode(t *testing.T) {
	if *decodeOut == "" {
		t.Skip("no -decode-out")
	}
	dir := *decodeOut
	if _, err := WriteKernels(dir); err != nil {
		t.Fatal(err)
	}
	q40 := llama1B
	q40.Name, q40.Weight = "llama3.2-1b-q4_0", ggml.Q4_0
	for _, c := range []struct {
		s   traffic.Shape
		typ kv.Type
		opt stepOptions
	}{
		{llama1B, kv.Q4, stepOptions{}}, {llama1B, kv.F16, stepOptions{}}, {q40, kv.Q4, stepOptions{}},
		// With the fusions, and other mat-vec grids.
		{llama1B, kv.Q4, stepOptions{fused: true, suffix: "-fused"}}, {q40, kv.Q4, stepOptions{fused: true, suffix: "-fused"}},
		{llama1B, kv.Q4, stepOptions{ropeKV: true, suffix: "-ropekv"}}, {q40, kv.Q4, stepOptions{ropeKV: true, suffix: "-ropekv"}},
		{llama1B, kv.Q4, stepOptions{perCore: 4, suffix: "-pc4"}},
		{llama1B, kv.Q4, stepOptions{perCore: 8, suffix: "-pc8"}},
		{llama1B, kv.Q4, stepOptions{perCore: 32, suffix: "-pc32"}},
		{llama1B, kv.Q4, stepOptions{perCore: 64, suffix: "-pc64"}},
	} {
		if err := decodeStepTraceWith(dir, c.s, c.typ, 4096, c.opt); err != nil {
			t.Fatal(err)
		}
	}
	// check-mv: the mat-vecs on the H200's grids, checked against the
	// emulator (run.sh decode-compare).
	if err := emulator.Available(); err != nil {
		emutest.Unavailable(t, err)
	}
	emu, err := emulator.New(emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	tee, err := NewTee(emu, dir, "check-mv", 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := matVecRun(tee); err != nil {
		t.Fatal(err)
	}
	if err := tee.Close(); err != nil {
		t.Fatal(err)
	}
}

// matVecRun adds to a check trace the mat-vecs on the H200's grids (the
// tee reports its core count: rows split between simdgroups), plain,
// with the RMS norm fused, one and three rows of x, and
// mul_mv_id, for the weight types of the decode traces and a few others.
func matVecRun(tee *TeeDevice) error {
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
	rng := rand.New(rand.NewSource(9))
	buf := func(b []byte) (encoder.Region, error) {
		d, err := tee.NewBuffer(len(b))
		if err != nil {
			return encoder.Region{}, err
		}
		copy(d.Bytes(), b)
		return encoder.Region{Buf: d, Len: len(b)}, nil
	}
	floats := func(n int, scale float64) []byte {
		b := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(scale*rng.NormFloat64())))
		}
		return b
	}
	for _, t := range []ggml.Type{ggml.Q4_K, ggml.Q4_0, ggml.Q6_K, ggml.Q8_0, ggml.F16, ggml.Q5_K} {
		for _, shape := range [][2]int{{70, 2048}, {40, 8192}} {
			rows, cols := shape[0], shape[1]
			wb, err := randomWeight(rng, t, 2*rows, cols) // two experts for mul_mv_id
			if err != nil {
				return err
			}
			wr, err := buf(wb)
			if err != nil {
				return err
			}
			w := &encoder.Weight{Region: wr.Sub(0, len(wb)/2), Type: t, Rows: rows, Cols: cols}
			x, err := buf(floats(3*cols, 2))
			if err != nil {
				return err
			}
			nb, err := buf(floats(cols, 1))
			if err != nil {
				return err
			}
			ids, err := buf(floats(2, 0)) // expert 0, then 1 below
			if err != nil {
				return err
			}
			binary.LittleEndian.PutUint32(ids.Buf.Bytes()[4:], math.Float32bits(1))
			norm := &encoder.Weight{Region: nb, Type: ggml.F32, Rows: 1, Cols: cols}
			dst, err := buf(make([]byte, 4*3*rows))
			if err != nil {
				return err
			}
			for _, n := range []int{1, 3} {
				e.MatMul(dst, w, x, n)
				e.MatMulNorm(dst, w, x, norm, 1e-5, n)
			}
			all := &encoder.Weight{Region: wr, Type: t, Rows: 2 * rows, Cols: cols}
			e.MatMulID(dst, all, 2, x, ids, 1, 2, false)
			if err := e.Err(); err != nil {
				return fmt.Errorf("%v %v: %w", t, shape, err)
			}
			if err := tee.Submit(e.List()); err != nil {
				return err
			}
			if err := tee.Sync(); err != nil {
				return err
			}
			e.Reset()
		}
	}
	// K's RoPE in the KV store, q4 (smoothed, rotated, a residual window)
	// and f16: one decode row, then a batch.
	rope := &backend.RoPE{Dims: 64, Base: 500000, PosScale: 1}
	for _, cfg := range []kv.Config{{Type: kv.Q4, GroupSize: 32, Smooth: true, Rotate: true, Residual: 16}, {Type: kv.F16}} {
		cfg.Layers, cfg.KVHeads, cfg.HeadDim, cfg.Ctx = 1, 8, 64, 4096
		c := &encoder.KVLayer{Cfg: cfg}
		var err error
		if c.K, err = buf(make([]byte, c.PlaneBytes())); err != nil {
			return err
		}
		if c.V, err = buf(make([]byte, c.PlaneBytes())); err != nil {
			return err
		}
		if cfg.Smooths() {
			ones := make([]byte, 4*8*64)
			for i := 0; i < len(ones); i += 4 {
				binary.LittleEndian.PutUint32(ones[i:], math.Float32bits(1))
			}
			if c.Lambda, err = buf(ones); err != nil {
				return err
			}
		}
		k, err := buf(floats(5*8*64, 2))
		if err != nil {
			return err
		}
		v, err := buf(floats(5*8*64, 1))
		if err != nil {
			return err
		}
		e.KVStoreRoPE(c, k, v, 4095, 1, rope)
		e.KVStoreRoPE(c, k, v, 10, 5, rope)
		if err := e.Err(); err != nil {
			return fmt.Errorf("kv store with RoPE: %w", err)
		}
		if err := tee.Submit(e.List()); err != nil {
			return err
		}
		if err := tee.Sync(); err != nil {
			return err
		}
		e.Reset()
	}
	return nil
}

// attnMatrixRun dispatches decode attention with the matrix units, float
// and half operands (the backend's passes take the scalar kernels), over
// random caches of each type: codes any bytes, metadata scales in
// [0.01, 0.1) and biases in [-0.5, 0.5), f16 values in [-1, 1).
func attnMatrixRun(tee *TeeDevice, e *encoder.Encoder, rng *rand.Rand, buf func([]byte) (encoder.Region, error)) error {
	const heads, kvHeads, d, n = 8, 2, 128, 700
	a := &backend.Attention{Heads: heads, KVHeads: kvHeads, HeadDim: d, Scale: float32(1 / math.Sqrt(d))}
	q := make([]byte, 4*heads*d)
	for i := 0; i < heads*d; i++ {
		binary.LittleEndian.PutUint32(q[4*i:], math.Float32bits(float32(rng.NormFloat64())))
	}
	for _, typ := range []kv.Type{kv.Q4, kv.Q8, kv.F16} {
		cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: kvHeads, HeadDim: d, Ctx: n}
		if typ == kv.F16 {
			cfg.GroupSize = 0
		}
		c := &encoder.KVLayer{Cfg: cfg}
		plane := func() (encoder.Region, error) {
			b := make([]byte, c.PlaneBytes())
			codes := c.CodesBytes()
			if typ == kv.F16 {
				codes = 0
			}
			rng.Read(b[:codes])
			for i := codes; i+1 < len(b); i += 2 {
				v := 2*rng.Float32() - 1
				if typ != kv.F16 {
					if (i-codes)%4 == 0 {
						v = 0.01 + 0.09*rng.Float32() // scale
					} else {
						v /= 2 // bias
					}
				}
				binary.LittleEndian.PutUint16(b[i:], half.FromFloat32(v))
			}
			return buf(b)
		}
		var err error
		if c.K, err = plane(); err != nil {
			return err
		}
		if c.V, err = plane(); err != nil {
			return err
		}
		qr, err := buf(q)
		if err != nil {
			return err
		}
		out, err := buf(make([]byte, 4*heads*d))
		if err != nil {
			return err
		}
		ws, err := buf(make([]byte, encoder.WorkspaceBytes(cfg, heads, 0)))
		if err != nil {
			return err
		}
		for _, k := range []encoder.AttnKernel{encoder.AttnMatrix, encoder.AttnMatrixHalf} {
			e.SetAttnKernel(k)
			e.AttendDecode(out, qr, c, n, a, ws)
		}
		e.SetAttnKernel(encoder.AttnScalar)
		if err := e.Err(); err != nil {
			return fmt.Errorf("attention %v: %w", typ, err)
		}
		if err := tee.Submit(e.List()); err != nil {
			return err
		}
		if err := tee.Sync(); err != nil {
			return err
		}
		e.Reset()
	}
	return nil
}
