// Package traffic is a model of the memory traffic of the Metal backend's
// decode step: for a model shape, a context length and a KV cache type, the
// bytes each kernel reads and writes per generated token (following the
// dispatches metal/encoder makes, with its split and threadgroup choices),
// and the time those bytes take at the unified-memory bandwidths Apple
// publishes for M1-M4 chips. A decode step is bandwidth-bound when every
// byte is read once (weights and KV cache dominate); the model is the
// floor a kernel design can approach, and `nibble bench metal-model`
// prints it.
//
// It counts each buffer a kernel reads once (activations re-read by many
// threadgroups come from cache), as the profiler's DRAM bytes do when the
// caches are cold; metal/internal/gpu's README compares it with ncu on an H100.
package traffic

import (
	"fmt"
	"strings"

	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/metal/encoder"
)

// Shape is a Llama-style decoder's geometry and weight types.
type Shape struct {
	Name                                    string
	Layers, Hidden, Heads, KVHeads, HeadDim int
	FFN, Vocab                              int
	Weight, Embed, Output                   ggml.Type // Output is read once per step
	QKVBias                                 bool
	// Mixture of experts (Experts > 0): each layer's feed-forward block is
	// an F32 router (Experts×Hidden, as llama.cpp keeps ffn_gate_inp) that
	// chooses ExpertsUsed experts, each a gate, up and down of ExpertFFN
	// rows of ExpertWeight; FFN is then a dense feed-forward beside the
	// experts (a shared expert), 0 for none.
	Experts, ExpertsUsed, ExpertFFN int       `json:",omitempty"`
	ExpertWeight                    ggml.Type `json:",omitempty"`
	// PerLayer gives each layer's attention where layers differ (Gemma 4's
	// sliding and global head shapes, sliding windows, layers that read
	// another's K/V); nil: every layer is KVHeads × HeadDim over the whole
	// context.
	PerLayer []Layer `json:",omitempty"`
	// PerLayerEmbd is the width of each layer's per-layer input (Gemma 4's
	// E models: a table of Layers×PerLayerEmbd per token, of which a step
	// reads one row, projected from the embedding and fed through a gate
	// and a projection in every layer); 0 none.
	PerLayerEmbd int `json:",omitempty"`
}

// Layer is one layer's attention geometry.
type Layer struct {
	KVHeads, HeadDim int
	// Window is the positions a sliding-window layer attends over (its
	// cache is a ring of them); 0: the whole context.
	Window int `json:",omitempty"`
	// SharesKV: the layer attends over an earlier layer's cache, so it has
	// no k and v matrices and stores nothing.
	SharesKV bool `json:",omitempty"`
}

// Layer is layer il's attention geometry.
func (m Shape) Layer(il int) Layer {
	if il >= 0 && il < len(m.PerLayer) {
		return m.PerLayer[il]
	}
	return Layer{KVHeads: m.KVHeads, HeadDim: m.HeadDim}
}

// positions is what layer l attends over with ctx positions cached.
func (l Layer) positions(ctx int) int {
	if l.Window > 0 {
		return min(l.Window, ctx)
	}
	return ctx
}

// WeightBytes is the weights of the model: resident (every matrix, every
// expert: a MoE model's whole file is mapped) and active (what one decode
// step reads: only the chosen experts' matrices, the output once, one
// embedding row).
func WeightBytes(m Shape) (resident, active int64) {
	mat := func(t ggml.Type, rows, cols int) int64 { return int64(rows) * int64(t.RowBytes(cols)) }
	h := m.Hidden
	for il := range m.Layers {
		l := m.Layer(il)
		qd, kd := m.Heads*l.HeadDim, l.KVHeads*l.HeadDim
		if l.SharesKV {
			kd = 0
		}
		layer := mat(m.Weight, qd, h) + 2*mat(m.Weight, kd, h) + mat(m.Weight, h, qd) + 3*mat(m.Weight, m.FFN, h)
		if m.QKVBias {
			layer += 4 * int64(qd+2*kd)
		}
		if w := m.PerLayerEmbd; w > 0 {
			layer += mat(m.Weight, w, h) + mat(m.Weight, h, w)
		}
		resident += layer
		active += layer
		if m.Experts > 0 {
			expert := 3 * mat(m.ExpertWeight, m.ExpertFFN, h)
			router := mat(ggml.F32, m.Experts, h)
			resident += router + int64(m.Experts)*expert
			active += router + int64(m.ExpertsUsed)*expert
		}
	}
	out := mat(m.Output, m.Vocab, h)
	resident += mat(m.Embed, m.Vocab, h) + out
	active += int64(m.Embed.RowBytes(h)) + out
	if w := m.Layers * m.PerLayerEmbd; w > 0 {
		proj := mat(m.Weight, w, h)
		resident += mat(m.Embed, m.Vocab, w) + proj
		active += int64(m.Embed.RowBytes(w)) + proj
	}
	return resident, active
}

// Cache is the KV cache: type and metadata group size (q4, q8).
type Cache struct {
	Type      kv.Type
	GroupSize int
}

// Kernel is one kernel's traffic per decode step, summed over its
// dispatches.
type Kernel struct {
	Name    string `json:"name"`
	Count   int    `json:"dispatches"`
	Read    int64  `json:"read_bytes"`
	Written int64  `json:"written_bytes"`
	// FLOPs counts multiply-adds as two (matmuls and attention only).
	FLOPs int64 `json:"flops"`
}

// Step is a decode step's traffic, by kernel in first-dispatch order.
type Step struct {
	Kernels []Kernel `json:"kernels"`
	Read    int64    `json:"read_bytes"`
	Written int64    `json:"written_bytes"`
	FLOPs   int64    `json:"flops"`
}

func (s *Step) add(name string, read, written, flops int64) {
	s.Read, s.Written, s.FLOPs = s.Read+read, s.Written+written, s.FLOPs+flops
	for i := range s.Kernels {
		if k := &s.Kernels[i]; k.Name == name {
			k.Count++
			k.Read += read
			k.Written += written
			k.FLOPs += flops
			return
		}
	}
	s.Kernels = append(s.Kernels, Kernel{Name: name, Count: 1, Read: read, Written: written, FLOPs: flops})
}

// Bytes is what the step moves: read plus written.
func (s *Step) Bytes() int64 { return s.Read + s.Written }

// Filter returns the kernels whose names start with prefix, as a step.
func (s *Step) Filter(prefix string) Step {
	var out Step
	for _, k := range s.Kernels {
		if strings.HasPrefix(k.Name, prefix) {
			out.Kernels = append(out.Kernels, k)
			out.Read, out.Written, out.FLOPs = out.Read+k.Read, out.Written+k.Written, out.FLOPs+k.FLOPs
		}
	}
	return out
}

// KVBytes is one layer's K and V for n positions.
func KVBytes(kvHeads, headDim, n int, c Cache) int64 {
	return 2 * int64(kvHeads) * int64(n) * int64(kv.BytesPerTokenHead(c.Type, headDim, max(c.GroupSize, 1)))
}

// Attention adds one layer's decode attention over n positions of a cache
// of ctx positions: pass 1 reads q and K/V (once per threadgroup column:
// G/hg times) and writes the split partials; the merge reads them and
// writes the output.
func (s *Step) Attention(heads, kvHeads, d, n, ctx int, c Cache) {
	hg, sp := encoder.DecodeGrid(heads, kvHeads, d, n, ctx)
	chunks := heads / kvHeads / hg
	name := "attn_decode_" + c.Type.String()
	q := int64(4 * heads * d)
	part := int64(sp) * int64(heads) * int64(d+2) * 4
	// Per token and query head: d multiply-adds for the score, d for V.
	flops := 2 * 2 * int64(heads) * int64(d) * int64(n)
	s.add(name, q+int64(chunks)*KVBytes(kvHeads, d, n, c), part, flops)
	s.add("attn_merge", part, q, 0)
}

// DecodeStep is the traffic of one generated token at position ctx-1 (the
// cache holds ctx positions): embed; per layer norm, q/k/v, RoPE, KV store,
// attention, o, residual, norm, gate/up, SwiGLU, down (or the experts, and
// a shared expert beside them), residual; final norm, output, argmax. The
// dispatches of metal/internal/gpu's decode traces. Each layer attends in
// its own head shape over its window (Shape.PerLayer); a layer that shares
// K/V projects and stores none. Per-layer inputs (Shape.PerLayerEmbd) add
// their table row and projection before the layers, and a gate, GELU
// product, projection, norm and add in each.
func DecodeStep(m Shape, ctx int, c Cache) Step {
	return DecodeStepWith(m, ctx, c, Fusions{})
}

// Fusions are the fused kernels a decode step may use instead of a pair of
// dispatches. The Metal backend encodes neither.
type Fusions struct {
	// MatVec: the RMS norms in the mat-vecs that read them (metal/encoder's
	// MatMulNorm: kernel_mul_mv_norm_<type> reads x and the norm's weight
	// beside W, each from DRAM once, the sets of rows re-read them from the
	// cache).
	MatVec bool
	// RoPEInStore: K's RoPE in the KV store (KVStoreRoPE: the store reads
	// the pairs' angles, 8 bytes a pair).
	RoPEInStore bool
}

// DecodeStepWith is DecodeStep with the fusions f.
func DecodeStepWith(m Shape, ctx int, c Cache, f Fusions) Step {
	fused := f.MatVec
	var s Step
	h, ffn := int64(m.Hidden), int64(m.FFN)
	mv := func(t ggml.Type, rows, cols int64) {
		w := int64(t.RowBytes(int(cols))) * rows
		s.add("mul_mv_"+encoder.KernelSuffix(t), w+4*cols, 4*rows, 2*rows*cols)
	}
	// normed: the mat-vecs after an RMS norm of x (the norm's dispatch
	// unless fused).
	normed := func(t ggml.Type, cols int64, rows ...int64) {
		if !fused {
			s.Norm(m.Hidden)
			for _, r := range rows {
				mv(t, r, cols)
			}
			return
		}
		for _, r := range rows {
			w := int64(t.RowBytes(int(cols))) * r
			s.add("mul_mv_norm_"+encoder.KernelSuffix(t), w+8*cols, 4*r, 2*r*cols)
		}
	}
	s.add("get_rows_"+encoder.KernelSuffix(m.Embed), int64(m.Embed.RowBytes(m.Hidden)), 4*h, 0)
	ple, all := int64(m.PerLayerEmbd), int64(m.Layers*m.PerLayerEmbd)
	if ple > 0 {
		s.add("get_rows_"+encoder.KernelSuffix(m.Embed), int64(m.Embed.RowBytes(int(all))), 4*all, 0)
		mv(m.Weight, all, h)
		s.add("rms_norm", 8*all, 4*all, 0)
		s.add("add", 8*all, 4*all, 0)
	}
	for il := 0; il < m.Layers; il++ {
		l := m.Layer(il)
		qd, kd := int64(m.Heads*l.HeadDim), int64(l.KVHeads*l.HeadDim)
		if l.SharesKV {
			normed(m.Weight, h, qd)
		} else {
			normed(m.Weight, h, qd, kd, kd)
		}
		if m.QKVBias {
			s.add("add_bias", 4*(qd+2*kd)*2, 4*(qd+2*kd), 0)
		}
		s.add("rope", 4*qd, 4*qd, 0)
		if !l.SharesKV {
			if f.RoPEInStore {
				s.add("kv_append_"+c.Type.String(), 4*2*kd+4*int64(l.HeadDim), KVBytes(l.KVHeads, l.HeadDim, 1, c), 0)
			} else {
				s.add("rope", 4*kd, 4*kd, 0)
				s.add("kv_append_"+c.Type.String(), 4*2*kd, KVBytes(l.KVHeads, l.HeadDim, 1, c), 0)
			}
		}
		n := l.positions(ctx)
		s.Attention(m.Heads, l.KVHeads, l.HeadDim, n, n, c)
		mv(m.Weight, h, qd)
		s.add("add", 8*h, 4*h, 0)
		if m.Experts > 0 {
			s.Norm(m.Hidden)
			s.Experts(m)
		}
		if ffn > 0 {
			if m.Experts > 0 && !fused {
				mv(m.Weight, ffn, h) // the experts' norm serves the shared expert
				mv(m.Weight, ffn, h)
			} else {
				normed(m.Weight, h, ffn, ffn)
			}
			s.add("swiglu", 8*ffn, 4*ffn, 0)
			mv(m.Weight, h, ffn)
		}
		if m.Experts > 0 && ffn > 0 {
			s.Add(m.Hidden) // the shared expert's output to the experts'
		}
		s.Add(m.Hidden)
		if ple > 0 {
			mv(m.Weight, ple, h)
			s.add("geglu", 8*ple, 4*ple, 0)
			mv(m.Weight, h, ple)
			s.Norm(m.Hidden)
			s.Add(m.Hidden)
		}
	}
	normed(m.Output, h, int64(m.Vocab))
	s.add("argmax", 4*int64(m.Vocab), 4, 0)
	return s
}

// Norm adds an RMS norm of one row of n floats (its F32 weight read).
func (s *Step) Norm(n int) { s.add("rms_norm", 8*int64(n), 4*int64(n), 0) }

// Add adds the residual add of n floats.
func (s *Step) Add(n int) { s.add("add", 8*int64(n), 4*int64(n), 0) }

// Experts adds one layer's decode mixture of experts, the Metal backend's
// backend.Experts dispatches: the router's matmul (F32), the route kernel
// (logits in, ids and weights out), gate and up by id (kernel_mul_mv_id:
// only the k chosen experts' rows, x once), SwiGLU over the k slots, down
// by id (x per slot), and the weighted sum of the k outputs.
func (s *Step) Experts(m Shape) {
	h, e, k, f := int64(m.Hidden), int64(m.Experts), int64(m.ExpertsUsed), int64(m.ExpertFFN)
	s.add("mul_mv_f32", e*int64(ggml.F32.RowBytes(m.Hidden))+4*h, 4*e, 2*e*h)
	s.add("moe_route", 4*e, 8*k, 0)
	id := "mul_mv_id_" + encoder.KernelSuffix(m.ExpertWeight)
	gateUp := k * f * int64(m.ExpertWeight.RowBytes(m.Hidden))
	s.add(id, gateUp+4*h+4*k, 4*k*f, 2*k*f*h)
	s.add(id, gateUp+4*h+4*k, 4*k*f, 2*k*f*h)
	s.add("swiglu", 8*k*f, 4*k*f, 0)
	s.add(id, k*h*int64(m.ExpertWeight.RowBytes(m.ExpertFFN))+4*k*f+4*k, 4*k*h, 2*k*f*h)
	s.add("sum_experts", 4*k*h+4*k, 4*h, 0)
}

// Device is an Apple GPU's unified-memory bandwidth (and, where Apple
// published it, its FP32 throughput).
type Device struct {
	Name   string  `json:"name"`
	GBs    float64 `json:"bandwidth_gb_s"`
	TFLOPS float64 `json:"fp32_tflops,omitempty"`
	Source string  `json:"source"`
}

// Devices are Apple's published figures: memory bandwidth from the chips'
// announcements (Apple Newsroom) and spec pages; FP32 TFLOPS where the
// announcement gives it (M1 and M2 families). M1's 68.25 GB/s is its
// LPDDR4X-4266 on a 128-bit bus (Apple's page names the memory, not the
// figure).
var Devices = []Device{
	{"M1", 68.25, 2.6, "Apple M1 (Nov 2020): LPDDR4X-4266, 128-bit; 2.6 TFLOPS"},
	{"M1 Pro", 200, 5.2, "Apple Newsroom, 18 Oct 2021: 200GB/s, 5.2 TFLOPS"},
	{"M1 Max", 400, 10.4, "Apple Newsroom, 18 Oct 2021: 400GB/s, 10.4 TFLOPS"},
	{"M1 Ultra", 800, 21, "Apple Newsroom, 8 Mar 2022: 800GB/s, 21 TFLOPS"},
	{"M2", 100, 3.6, "Apple Newsroom, 6 Jun 2022: 100GB/s, 3.6 TFLOPS"},
	{"M2 Pro", 200, 6.8, "Apple Newsroom, 17 Jan 2023: 200GB/s, 6.8 TFLOPS"},
	{"M2 Max", 400, 13.6, "Apple Newsroom, 17 Jan 2023: 400GB/s, 13.6 TFLOPS"},
	{"M2 Ultra", 800, 27.2, "Apple Newsroom, 5 Jun 2023: 800GB/s, 27.2 TFLOPS"},
	{"M3", 100, 0, "Apple MacBook Pro (M3) tech specs: 100GB/s"},
	{"M3 Pro", 150, 0, "Apple Newsroom, 30 Oct 2023: 150GB/s"},
	{"M3 Max", 400, 0, "Apple Newsroom, 30 Oct 2023: up to 400GB/s (16-core CPU; 300GB/s with 14)"},
	{"M3 Ultra", 819, 0, "Apple Newsroom, 5 Mar 2025: over 800GB/s (819GB/s in the Mac Studio specs)"},
	{"M4", 120, 0, "Apple Newsroom, 7 May 2024: 120GB/s"},
	{"M4 Pro", 273, 0, "Apple Newsroom, 30 Oct 2024: 273GB/s"},
	{"M4 Max", 546, 0, "Apple Newsroom, 30 Oct 2024: 546GB/s (16-core CPU; 410GB/s with 14)"},
}

// DeviceByName finds a device by name, in any case ("m1 max").
// gpuCores are the GPU cores of each chip's largest configuration (Apple's
// spec pages: the bandwidths above are those configurations' too).
var gpuCores = map[string]int{
	"M1": 8, "M1 Pro": 16, "M1 Max": 32, "M1 Ultra": 64,
	"M2": 10, "M2 Pro": 19, "M2 Max": 38, "M2 Ultra": 76,
	"M3": 10, "M3 Pro": 18, "M3 Max": 40, "M3 Ultra": 80,
	"M4": 10, "M4 Pro": 20, "M4 Max": 40,
}

// Cores is the chip's GPU cores (its largest configuration), the count
// metal/encoder sizes grids for; 0 for a name it does not know.
func (d Device) Cores() int { return gpuCores[d.Name] }

// CoresByName is the GPU cores of the chip Metal names ("Apple M1 Max"):
// the device layer's count where the system does not say.
func CoresByName(name string) int {
	return gpuCores[strings.TrimSpace(strings.TrimPrefix(name, "Apple "))]
}

// MatVecSplit is the split of metal/encoder's mat-vec grid (simdgroups
// sharing a set of rows) for W rows×cols of type t on d: 1 where the
// type's rows per simdgroup already give d's cores enough simdgroups.
func (d Device) MatVecSplit(t ggml.Type, rows, cols int) int {
	return encoder.MatVecGrid(t, rows, cols, 1, max(d.Cores(), 1), encoder.MatVecSimdgroupsPerCore).Split
}

func DeviceByName(name string) (Device, error) {
	for _, d := range Devices {
		if strings.EqualFold(d.Name, name) {
			return d, nil
		}
	}
	return Device{}, fmt.Errorf("traffic: no device %q", name)
}

// Seconds is the time moving b bytes takes at d's bandwidth.
func (d Device) Seconds(b int64) float64 { return float64(b) / (d.GBs * 1e9) }

// ComputeSeconds is the time flops take at d's FP32 peak (0 when Apple
// published none).
func (d Device) ComputeSeconds(flops int64) float64 {
	if d.TFLOPS == 0 {
		return 0
	}
	return float64(flops) / (d.TFLOPS * 1e12)
}

// TokensPerSecond is the decode rate when every byte of s moves at d's
// bandwidth: the ceiling the picker shows as a model's expected speed.
func (d Device) TokensPerSecond(s Step) float64 {
	if b := s.Bytes(); b > 0 {
		return d.GBs * 1e9 / float64(b)
	}
	return 0
}
