package traffic

import (
	"math"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/kv"
)

var llama1B = Shape{Name: "llama3.2-1b", Layers: 16, Hidden: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 8192, Vocab: 128256,
	Weight: ggml.Q4_K, Embed: ggml.Q6_K, Output: ggml.Q6_K}

// h100 is what ncu measured for one decode step of metal/internal/gpu's
// decode-llama3.2-1b-q4-4k trace on an H100 (caches flushed before each
// kernel): DRAM bytes read per kernel, summed over its dispatches, and the
// dispatch counts.
var h100 = map[string]struct {
	n    int
	read float64 // MB
}{
	"mul_mv_q4_k":    {112, 228.00 + 302.73 + 19.61},
	"mul_mv_q6_k":    {1, 215.51},
	"attn_decode_q4": {16, 43.03},
	"attn_merge":     {16, 2.35},
	"rms_norm":       {33, 0.72},
	"add":            {32, 0.63},
	"rope":           {32, 0.21 + 0.12},
	"kv_append_q4":   {16, 0.21},
	"swiglu":         {16, 1.12},
	"argmax":         {1, 0.52},
	"get_rows_q6_k":  {1, 0.01},
}

// TestAgainstH100: the model's dispatch counts are the trace's, and the
// bytes of the kernels that move the data (weights and KV cache: 99.7% of
// the step) are within 3% of the profiler's. The small kernels read more
// than the model counts (tens of KB each: whole 32-byte sectors, and the
// argument buffers and uploads the model leaves out); together they are
// 1 MB of 815.
func TestAgainstH100(t *testing.T) {
	s := DecodeStep(llama1B, 4096, Cache{Type: kv.Q4, GroupSize: 32})
	var model, measured float64
	for _, k := range s.Kernels {
		m, ok := h100[k.Name]
		if !ok {
			t.Errorf("kernel %s not measured", k.Name)
			continue
		}
		if k.Count != m.n {
			t.Errorf("%s: %d dispatches, the trace has %d", k.Name, k.Count, m.n)
		}
		got := float64(k.Read) / 1e6
		gap := (m.read - got) / got
		t.Logf("%-15s %4d  model %9.2f MB  ncu %9.2f MB  gap %+6.1f%%", k.Name, k.Count, got, m.read, 100*gap)
		model += got
		measured += m.read
		if got > 10 && math.Abs(gap) > 0.03 {
			t.Errorf("%s: model %.2f MB, ncu %.2f MB", k.Name, got, m.read)
		}
	}
	t.Logf("step: model %.1f MB read, ncu %.1f MB (gap %+.2f%%)", model, measured, 100*(measured-model)/model)
	if math.Abs(measured-model)/model > 0.02 {
		t.Errorf("step: model %.1f MB, ncu %.1f MB", model, measured)
	}
}

func TestAttentionBytes(t *testing.T) {
	for _, c := range []struct {
		cache Cache
		per   int // bytes per position and kv head, K or V
	}{{Cache{kv.Q4, 32}, 64 + 16}, {Cache{kv.Q8, 32}, 128 + 16}, {Cache{kv.F16, 0}, 256}} {
		var s Step
		s.Attention(64, 8, 128, 131072, 131072, c.cache)
		want := int64(2*8*131072*c.per + 4*64*128)
		if s.Kernels[0].Read != want {
			t.Errorf("%v: pass 1 reads %d, want %d", c.cache.Type, s.Kernels[0].Read, want)
		}
		if s.Kernels[1].Name != "attn_merge" || s.Kernels[1].Read != s.Kernels[0].Written {
			t.Errorf("%v: the merge reads %d, pass 1 writes %d", c.cache.Type, s.Kernels[1].Read, s.Kernels[0].Written)
		}
	}
	if _, err := DeviceByName("M1 Max"); err != nil {
		t.Fatal(err)
	}
}

// TestAttentionAgainstH100: pass 1 of one Llama-3.1-70B layer's decode
// attention at 128K, as ncu measured its DRAM reads on an H100.
func TestAttentionAgainstH100(t *testing.T) {
	for _, c := range []struct {
		cache Cache
		ncuMB float64
	}{{Cache{kv.Q4, 32}, 167.92}, {Cache{kv.F16, 0}, 537.05}} {
		var s Step
		s.Attention(64, 8, 128, 131072, 131072, c.cache)
		got := float64(s.Kernels[0].Read) / 1e6
		gap := (c.ncuMB - got) / got
		t.Logf("%v: model %.2f MB, ncu %.2f MB (%+.2f%%)", c.cache.Type, got, c.ncuMB, 100*gap)
		if math.Abs(gap) > 0.01 {
			t.Errorf("%v: model %.2f MB, ncu %.2f MB", c.cache.Type, got, c.ncuMB)
		}
	}
}

// TestTokensPerSecond: the expected decode rate of the 1B shape is each
// device's bandwidth over the step's bytes, the step the H100 table checks
// (about 815 MB at 4K with a q4 cache): about 84 tok/s on an M1, 490 on
// an M1 Max.
func TestTokensPerSecond(t *testing.T) {
	s := DecodeStep(llama1B, 4096, Cache{Type: kv.Q4, GroupSize: 32})
	var measured float64
	for _, m := range h100 {
		measured += m.read * 1e6
	}
	for _, d := range Devices {
		got := d.TokensPerSecond(s)
		if want := d.GBs * 1e9 / float64(s.Bytes()); got != want {
			t.Errorf("%s: %.1f tok/s, want %.1f", d.Name, got, want)
		}
		// Against the profiler's bytes: within the table test's 2%.
		if byTable := d.GBs * 1e9 / measured; math.Abs(got-byTable)/byTable > 0.02 {
			t.Errorf("%s: %.1f tok/s, %.1f from the measured bytes", d.Name, got, byTable)
		}
	}
	m1max, _ := DeviceByName("M1 Max")
	if got := m1max.TokensPerSecond(s); got < 470 || got > 510 {
		t.Errorf("M1 Max: %.1f tok/s, want about 490", got)
	}
	if (Device{GBs: 100}).TokensPerSecond(Step{}) != 0 {
		t.Error("an empty step has a rate")
	}
}

// qwen3MoE is the synth Qwen3-MoE shape of the CPU speed check (8 layers,
// 2048 wide, 64 experts of which 8 chosen, expert FFN 768, Q4_0).
var qwen3MoE = Shape{Name: "qwen3moe-synth", Layers: 8, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, Vocab: 151936,
	Weight: ggml.Q4_0, Embed: ggml.Q4_0, Output: ggml.Q4_0, Experts: 64, ExpertsUsed: 8, ExpertFFN: 768, ExpertWeight: ggml.Q4_0}

// A MoE decode step reads only the chosen experts: per layer 8 of 64
// experts' gate, up and down (Q4_0: 18 bytes per 32), the F32 router, and
// the weights it reads are WeightBytes' active bytes, far below the
// resident ones.
func TestMoEActiveBytes(t *testing.T) {
	s := DecodeStep(qwen3MoE, 4096, Cache{Type: kv.Q4, GroupSize: 32})
	expert := int64(3 * 768 * 2048 / 32 * 18)
	id := s.Filter("mul_mv_id_q4_0")
	if len(id.Kernels) != 1 || id.Kernels[0].Count != 3*8 {
		t.Fatalf("mul_mv_id kernels %+v, want 24 dispatches", id.Kernels)
	}
	// Weights, plus x and the ids per dispatch.
	wantID := 8*8*expert + 8*(2*(4*2048+32)+4*8*768+32)
	if id.Read != wantID {
		t.Errorf("mul_mv_id reads %d bytes, want %d", id.Read, wantID)
	}
	for _, k := range []string{"moe_route", "sum_experts", "mul_mv_f32"} {
		if n := s.Filter(k); len(n.Kernels) != 1 || n.Kernels[0].Count != 8 {
			t.Errorf("%s: %+v, want one a layer", k, n.Kernels)
		}
	}
	if got := s.Filter("mul_mv_f32").Read; got != 8*(64*2048*4+4*2048) {
		t.Errorf("router reads %d bytes", got)
	}
	resident, active := WeightBytes(qwen3MoE)
	if d := resident - active; d != 8*56*expert+int64(151935*ggml.Q4_0.RowBytes(2048)) {
		t.Errorf("resident %d - active %d = %d, want the unchosen experts and the other embedding rows", resident, active, d)
	}
	// Every weight the step reads is active, and the step reads little else
	// at 4096 positions (activations, KV cache).
	weights := s.Filter("mul_mv_").Read + s.Filter("get_rows_").Read
	if weights < active || weights > active+active/50 {
		t.Errorf("the step's matmuls and embedding read %d bytes, active weights are %d", weights, active)
	}
	t.Logf("resident %.1f MB, active %.1f MB, step %.1f MB", float64(resident)/1e6, float64(active)/1e6, float64(s.Bytes())/1e6)
}

// h200MoE is what ncu measured on an H200 (caches flushed before each
// kernel) for metal/internal/gpu's MoE traces: DRAM bytes read per kernel
// (MB), summed over its dispatches. Layer: one Qwen3-30B-A3B layer's MoE
// block (norm, router, route, gate/up by id, SwiGLU, down by id, sum,
// residual: 128 experts, 8 chosen, expert FFN 768, Q4_0); decode: one
// decode step of the synth Qwen3-MoE model at 4096 positions, q4 cache.
var h200MoE = map[string]map[string]struct {
	n    int
	read float64
}{
	"layer": {
		"rms_norm": {1, 0.022}, "mul_mv_f32": {1, 1.085}, "moe_route": {1, 0.015}, "mul_mv_id_q4_0": {3, 21.315},
		"swiglu": {1, 0.054}, "sum_experts": {1, 0.070}, "add": {1, 0.020},
	},
	"decode": {
		"get_rows_q4_0": {1, 0.006}, "rms_norm": {17, 0.369}, "mul_mv_q4_0": {33, 261.395}, "rope": {16, 0.242},
		"kv_append_q4": {8, 0.140}, "attn_decode_q4": {8, 21.727}, "attn_merge": {8, 2.221}, "add": {16, 0.313},
		"mul_mv_f32": {8, 4.490}, "moe_route": {8, 0.118}, "mul_mv_id_q4_0": {24, 170.525}, "swiglu": {8, 0.429},
		"sum_experts": {8, 0.564}, "argmax": {1, 0.614},
	},
}

// TestMoEAgainstH200: for both traces the model's dispatch counts are the
// trace's, the step's read bytes are within 2% of the profiler's (layer
// +0.45%, decode +0.63%), and those of every kernel over 10 MB within 3%
// (the experts' matmuls +0.19%: the chosen experts' rows only; attention
// +3.0% as on the H100). The small kernels read whole sectors and their
// argument buffers (the route kernel 15 KB for 0.5 KB of logits); the F32
// router reads 2.7% (128 experts) and 5.4% (64) more than its matrix.
func TestMoEAgainstH200(t *testing.T) {
	layer := qwen3MoE
	layer.Layers, layer.Experts = 1, 128
	var ls Step
	ls.Norm(layer.Hidden)
	ls.Experts(layer)
	ls.Add(layer.Hidden)
	steps := map[string]Step{"layer": ls, "decode": DecodeStep(qwen3MoE, 4096, Cache{Type: kv.Q4, GroupSize: 32})}
	for _, name := range []string{"layer", "decode"} {
		s, ms := steps[name], h200MoE[name]
		var model, measured float64
		for _, k := range s.Kernels {
			m, ok := ms[k.Name]
			if !ok {
				t.Errorf("%s: kernel %s not measured", name, k.Name)
				continue
			}
			if k.Count != m.n {
				t.Errorf("%s: %s: %d dispatches, the trace has %d", name, k.Name, k.Count, m.n)
			}
			got := float64(k.Read) / 1e6
			gap := (m.read - got) / got
			t.Logf("%-6s %-15s %4d  model %9.3f MB  ncu %9.3f MB  gap %+6.2f%%", name, k.Name, k.Count, got, m.read, 100*gap)
			model += got
			measured += m.read
			if got > 10 && math.Abs(gap) > 0.03 {
				t.Errorf("%s: %s: model %.3f MB, ncu %.3f MB", name, k.Name, got, m.read)
			}
		}
		gap := (measured - model) / model
		t.Logf("%s: model %.3f MB read, ncu %.3f MB (gap %+.2f%%)", name, model, measured, 100*gap)
		if math.Abs(gap) > 0.02 {
			t.Errorf("%s: model %.3f MB, ncu %.3f MB", name, model, measured)
		}
	}
}

// Layers of their own attention shape (Gemma 4): a PerLayer that repeats
// the model-wide shape changes nothing; otherwise each layer reads its own
// K/V (over its window where it slides), a layer that shares K/V has no k
// and v matrices and stores nothing, and per-layer inputs add their
// projections and one table row to what a token reads.
func TestPerLayerShapes(t *testing.T) {
	c := Cache{Type: kv.Q4, GroupSize: 32}
	same := llama1B
	same.PerLayer = make([]Layer, same.Layers)
	for il := range same.PerLayer {
		same.PerLayer[il] = Layer{KVHeads: 8, HeadDim: 64}
	}
	a, b := DecodeStep(llama1B, 4096, c), DecodeStep(same, 4096, c)
	if a.Read != b.Read || a.Written != b.Written || len(a.Kernels) != len(b.Kernels) {
		t.Errorf("uniform PerLayer: %d/%d bytes, without %d/%d", b.Read, b.Written, a.Read, a.Written)
	}
	g := Shape{Name: "gemma4", Layers: 6, Hidden: 1024, Heads: 8, KVHeads: 4, HeadDim: 256, FFN: 4096, Vocab: 1000,
		Weight: ggml.Q4_0, Embed: ggml.Q4_0, Output: ggml.Q4_0}
	sliding, global := Layer{KVHeads: 4, HeadDim: 256, Window: 512}, Layer{KVHeads: 1, HeadDim: 512}
	g.PerLayer = []Layer{sliding, sliding, global, sliding, {KVHeads: 4, HeadDim: 256, Window: 512, SharesKV: true}, {KVHeads: 1, HeadDim: 512, SharesKV: true}}
	s := DecodeStep(g, 4096, c)
	var want int64
	for _, l := range g.PerLayer {
		var one Step
		one.Attention(g.Heads, l.KVHeads, l.HeadDim, l.positions(4096), l.positions(4096), c)
		want += one.Filter("attn_decode_").Read
	}
	attn := s.Filter("attn_decode_")
	if attn.Read != want || attn.Kernels[0].Count != 6 {
		t.Errorf("attention reads %d bytes in %d dispatches, want %d in 6", attn.Read, attn.Kernels[0].Count, want)
	}
	// Global layers (1 × 512) read the whole context, sliding ones (4 × 256) their window.
	if full, win := KVBytes(1, 512, 4096, c), KVBytes(4, 256, 512, c); want < 2*full+4*win {
		t.Errorf("attention reads %d bytes, less than the layers' K/V %d", want, 2*full+4*win)
	}
	if n := s.Filter("kv_append_").Kernels[0].Count; n != 4 {
		t.Errorf("%d layers store K/V, want 4", n)
	}
	resident, active := WeightBytes(g)
	q4 := func(rows, cols int) int64 { return int64(rows * ggml.Q4_0.RowBytes(cols)) }
	// Per layer q and o of heads × its head dim, k and v where it stores them.
	attnW := 3*(2*q4(8*256, 1024)+2*q4(4*256, 1024)) + q4(8*512, 1024) + q4(1024, 8*512) + 2*q4(512, 1024) +
		q4(8*256, 1024) + q4(1024, 8*256) + q4(8*512, 1024) + q4(1024, 8*512)
	wantActive := attnW + 6*3*q4(4096, 1024) + int64(ggml.Q4_0.RowBytes(1024)) + q4(1000, 1024)
	if active != wantActive || resident != wantActive-int64(ggml.Q4_0.RowBytes(1024))+q4(1000, 1024) {
		t.Errorf("weights resident %d active %d, want %d and %d", resident, active, wantActive-int64(ggml.Q4_0.RowBytes(1024))+q4(1000, 1024), wantActive)
	}
	g.PerLayerEmbd = 64
	r2, a2 := WeightBytes(g)
	perLayer := 6*(q4(64, 1024)+q4(1024, 64)) + q4(6*64, 1024)
	if a2-active != perLayer+int64(ggml.Q4_0.RowBytes(6*64)) || r2-resident != perLayer+q4(1000, 6*64) {
		t.Errorf("per-layer inputs add %d active, %d resident bytes; want %d and %d", a2-active, r2-resident,
			perLayer+int64(ggml.Q4_0.RowBytes(6*64)), perLayer+q4(1000, 6*64))
	}
	if s2 := DecodeStep(g, 4096, c); s2.Filter("mul_mv_").Read-s.Filter("mul_mv_").Read < perLayer {
		t.Errorf("the step's matmuls read %d more bytes with per-layer inputs, want at least %d", s2.Filter("mul_mv_").Read-s.Filter("mul_mv_").Read, perLayer)
	}
}

// h200FusedNorm is what ncu measured on an H200 (caches flushed before
// each kernel) for the RMS-norm-fused mat-vecs of metal/internal/gpu's
// decode-llama3.2-1b-q4-4k-fused trace, the mat-vecs on the H200's grids
// (rows split between simdgroups): dispatches and DRAM bytes read per
// kernel (MB), summed over its dispatches. The trace was measured with
// SwiGLU fused into the down projection as well (since removed), so only
// the norm kernels' figures still describe the fused step.
var h200FusedNorm = map[string]struct {
	n    int
	read float64
}{
	"mul_mv_norm_q4_k": {80, 361.068}, "mul_mv_norm_q6_k": {1, 215.504},
}

// TestFusedAgainstH200: the fused step's norm-fused mat-vecs have the
// trace's dispatch counts and their read bytes are within 1% of the
// profiler's (x and the norm's weight come from DRAM once, however many
// sets of rows read them); the rest of the step is the plain one's less
// its RMS norms (one before q/k/v and one before gate/up in each layer, and
// the final one), its read bytes within 2 MB of the plain step's (each
// fused mat-vec reads x and the norm's weight where the plain ones read x
// and the norm its input once: 0.12 MB more for the 1B step; the fusion
// saves dispatches, not bytes).
func TestFusedAgainstH200(t *testing.T) {
	s := DecodeStepWith(llama1B, 4096, Cache{Type: kv.Q4, GroupSize: 32}, Fusions{MatVec: true})
	plain := DecodeStep(llama1B, 4096, Cache{Type: kv.Q4, GroupSize: 32})
	seen := 0
	for _, k := range s.Kernels {
		m, ok := h200FusedNorm[k.Name]
		if !ok {
			continue
		}
		seen++
		if k.Count != m.n {
			t.Errorf("%s: %d dispatches, the trace has %d", k.Name, k.Count, m.n)
		}
		got := float64(k.Read) / 1e6
		gap := (m.read - got) / got
		t.Logf("%-18s %4d  model %9.2f MB  ncu %9.2f MB  gap %+6.2f%%", k.Name, k.Count, got, m.read, 100*gap)
		if math.Abs(gap) > 0.01 {
			t.Errorf("%s: model %.2f MB, ncu %.2f MB", k.Name, got, m.read)
		}
	}
	if seen != len(h200FusedNorm) {
		t.Errorf("%d of the %d measured norm-fused kernels in the step", seen, len(h200FusedNorm))
	}
	count := func(st Step, name string) int {
		n := 0
		for _, k := range st.Kernels {
			if name == "" || k.Name == name {
				n += k.Count
			}
		}
		return n
	}
	norms := 2*llama1B.Layers + 1
	if got, want := count(s, ""), count(plain, "")-norms; got != want {
		t.Errorf("the fused step has %d dispatches, want the plain step's %d less its %d norms", got, count(plain, ""), norms)
	}
	if n := count(s, "rms_norm"); n != 0 {
		t.Errorf("the fused step has %d rms_norm dispatches", n)
	}
	if d := s.Read - plain.Read; d < -2<<20 || d > 2<<20 {
		t.Errorf("the fused step reads %d bytes more than the plain one, want within 2 MB", d)
	}
}

// Every device has its core count, and the mat-vec grids split rows only
// where the cores outnumber the rows: the 1B shape's 512-row k projection
// on an M1 Max, never the 8192-row gate on an M1.
func TestDeviceCores(t *testing.T) {
	for _, d := range Devices {
		if d.Cores() < 7 || CoresByName("Apple "+d.Name) != d.Cores() {
			t.Errorf("%s: %d cores", d.Name, d.Cores())
		}
	}
	m1, _ := DeviceByName("M1")
	max, _ := DeviceByName("M1 Max")
	if s := m1.MatVecSplit(ggml.Q4_K, 8192, 2048); s != 1 {
		t.Errorf("M1, 8192 rows: split %d", s)
	}
	if s := max.MatVecSplit(ggml.Q4_K, 512, 2048); s < 2 {
		t.Errorf("M1 Max, 512 rows: split %d", s)
	}
}

// K's RoPE in the KV store: 16 dispatches fewer for the 1B step (260, as
// the -ropekv trace), the store reading the angles (a head's pairs, 8 bytes
// each) in their place.
func TestRoPEInStore(t *testing.T) {
	c := Cache{Type: kv.Q4, GroupSize: 32}
	plain, fused := DecodeStep(llama1B, 4096, c), DecodeStepWith(llama1B, 4096, c, Fusions{RoPEInStore: true})
	count := func(s Step) (n int) {
		for _, k := range s.Kernels {
			n += k.Count
		}
		return n
	}
	if count(plain) != 276 || count(fused) != 260 {
		t.Errorf("%d and %d dispatches, want 276 and 260", count(plain), count(fused))
	}
	if d := plain.Read - fused.Read; d != 16*(4*512-4*64) {
		t.Errorf("the fused step reads %d bytes fewer, want %d", d, 16*(4*512-4*64))
	}
}
