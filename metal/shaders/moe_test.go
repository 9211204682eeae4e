//go:build linux

package shaders

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/fastmath"
	"nibble/engine/ggml"
	"nibble/metal/device"
	"nibble/metal/encoder"
	"nibble/metal/internal/emulator"
)

const log2e = 1.4426950408889634

// routeTwin is kernel_moe_route_f32's Go twin for one row: the k largest
// logits (descending, the lower id first on ties, NaN last), their
// weights by the gating, renormalised when norm, times scale; e^x is
// fastmath.Exp2(x·log2 e) as in the kernel.
func routeTwin(x []float32, k int, g backend.Gating, norm bool, scale float32) (ids []int, w []float32) {
	taken := make([]bool, len(x))
	chosen := make([]float32, k)
	for j := 0; j < k; j++ {
		best := -1
		for i, v := range x {
			if taken[i] || math.IsNaN(float64(v)) && best >= 0 {
				continue
			}
			if best < 0 || v > x[best] || math.IsNaN(float64(x[best])) && !math.IsNaN(float64(v)) {
				best = i
			}
		}
		taken[best] = true
		ids = append(ids, best)
		chosen[j] = x[best]
		if math.IsNaN(float64(chosen[j])) {
			chosen[j] = float32(math.Inf(-1))
		}
	}
	exp := func(v float32) float32 { return fastmath.Exp2(v * log2e) }
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m { // NaN is no maximum (Metal's max, fmax)
			m = v
		}
	}
	w = make([]float32, k)
	var denom float32 = 1
	switch g {
	case backend.GatingSigmoid:
		for j, v := range chosen {
			w[j] = 1 / (1 + exp(-v))
		}
	case backend.GatingSoftmaxTopK:
		denom = 0
		for j, v := range chosen {
			w[j] = exp(v - chosen[0])
			denom += w[j]
		}
	default:
		denom = 0
		for j, v := range chosen {
			w[j] = exp(v - m)
		}
		for _, v := range x {
			denom += exp(v - m)
		}
	}
	var sum float32
	for j := range w {
		w[j] /= denom
		sum += w[j]
	}
	sum = max(sum, 6.103515625e-5) // llama.cpp's clamp: fp16's smallest normal
	for j := range w {
		if norm {
			w[j] /= sum
		}
		w[j] *= scale
	}
	return ids, w
}

// kernel_moe_route_f32 against routeTwin: the same ids, weights within
// 1e-6 relative (the kernel sums in lane order, then simd_sum's; the twin
// in id order). The logits have ties (repeated values), -Inf and a NaN.
func TestMoERoute(t *testing.T) {
	d, l := emu(t)
	p := pipeline(t, l, "kernel_moe_route_f32")
	r := rand.New(rand.NewPCG(41, 42))
	type shape struct{ experts, k, rows int }
	for _, c := range []shape{{8, 2, 5}, {32, 4, 3}, {64, 8, 4}, {128, 8, 7}, {256, 8, 2}, {40, 32, 2}, {1024, 16, 2}, {3, 3, 2}, {16, 2, 2}} {
		logits := ewRandom(r, c.rows*c.experts, 2)
		if c.experts == 16 {
			// Sigmoid weights of about 1e-13: the renormalisation's sum is
			// clamped.
			for i := range logits {
				logits[i] -= 30
			}
		}
		for row := 0; row < c.rows; row++ {
			x := logits[row*c.experts : (row+1)*c.experts]
			// Ties: a run of equal values, the largest among them in
			// some rows.
			v := x[r.IntN(c.experts)]
			if row%2 == 0 {
				v = 10
			}
			for i := 0; i < min(c.experts, 5); i++ {
				x[r.IntN(c.experts)] = v
			}
			if c.experts > 4 {
				x[r.IntN(c.experts)] = float32(math.Inf(-1))
				x[r.IntN(c.experts)] = float32(math.NaN())
			}
		}
		for _, g := range []backend.Gating{backend.GatingSoftmax, backend.GatingSoftmaxTopK, backend.GatingSigmoid} {
			for _, norm := range []bool{false, true} {
				scale := float32(1)
				if norm {
					scale = 2.5
				}
				for _, o := range orders {
					t.Run(fmt.Sprintf("e%d_k%d_g%d_norm%v_%v", c.experts, c.k, g, norm, o), func(t *testing.T) {
						ids := buffer(t, d, make([]byte, 4*c.rows*c.k))
						ws := buffer(t, d, make([]byte, 4*c.rows*c.k))
						norm32 := uint32(0)
						if norm {
							norm32 = 1
						}
						run(t, d, o, device.Dispatch{
							Pipeline: p, Groups: [3]int{c.rows, 1, 1}, Threads: [3]int{32, 1, 1},
							Inline: []device.Inline{{Index: 0, Data: encoder.MoERouteArgs{Experts: uint32(c.experts), K: uint32(c.k),
								Gating: uint32(g), Norm: norm32, Scale: scale}.Bytes()}},
							Buffers: []device.Binding{{Index: 1, Buffer: buffer(t, d, f32Bytes(logits))}, {Index: 2, Buffer: ids}, {Index: 3, Buffer: ws}},
						})
						gotIDs, gotW := f32s(ids.Bytes()), f32s(ws.Bytes())
						for row := 0; row < c.rows; row++ {
							wantIDs, wantW := routeTwin(logits[row*c.experts:(row+1)*c.experts], c.k, g, norm, scale)
							for j := 0; j < c.k; j++ {
								s := row*c.k + j
								if gotIDs[s] != float32(wantIDs[j]) {
									t.Fatalf("row %d choice %d: expert %v, want %d (ids %v, want %v)", row, j, gotIDs[s], wantIDs[j], gotIDs[row*c.k:(row+1)*c.k], wantIDs)
								}
								if e := math.Abs(float64(gotW[s] - wantW[j])); !(e <= 1e-6*math.Abs(float64(wantW[j]))) {
									t.Fatalf("row %d choice %d: weight %v, want %v", row, j, gotW[s], wantW[j])
								}
							}
						}
					})
				}
			}
		}
	}
}

// randomIDs are rows·k expert ids, each row's k distinct (as the router
// writes them), as floats; expert hot takes a slot of every row when ≥ 0.
func randomIDs(r *rand.Rand, rows, k, experts, hot int) []float32 {
	ids := make([]float32, rows*k)
	for row := 0; row < rows; row++ {
		perm := r.Perm(experts)
		if hot >= 0 {
			for i, e := range perm {
				if e == hot {
					perm[0], perm[i] = perm[i], perm[0]
				}
			}
			r.Shuffle(k, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		}
		for j := 0; j < k; j++ {
			ids[row*k+j] = float32(perm[j])
		}
	}
	return ids
}

// matMulIDRef is the float64 product W_e·x for every slot (the MatMulID
// contract), Σ|w·x| per output and mul_mm_id's twin (mmTwin) with
// Σ(|w|+|x|) (for mmFloor).
func matMulIDRef(typ ggml.Type, wf, x, ids []float32, outs, cols, k int, perSlot bool) (want, scale []float64, twin []float32, ops []float64) {
	slots := len(ids)
	want, scale, twin = make([]float64, slots*outs), make([]float64, slots*outs), make([]float32, slots*outs)
	ops = make([]float64, slots*outs)
	for s := 0; s < slots; s++ {
		xr := s / k
		if perSlot {
			xr = s
		}
		xv := x[xr*cols : (xr+1)*cols]
		e := int(ids[s])
		for o := 0; o < outs; o++ {
			var sum, a float64
			for c, w := range wf[(e*outs+o)*cols : (e*outs+o+1)*cols] {
				p := float64(w) * float64(xv[c])
				sum += p
				a += math.Abs(p)
				ops[s*outs+o] += math.Abs(float64(w)) + math.Abs(float64(xv[c]))
			}
			want[s*outs+o], scale[s*outs+o] = sum, a
			twin[s*outs+o] = mmTwin(typ, wf[(e*outs+o)*cols:(e*outs+o+1)*cols], xv)
		}
	}
	return want, scale, twin, ops
}

// idCase is one expert matmul: experts matrices of outs×cols, rows rows of
// x, k slots each.
type idCase struct {
	typ                          ggml.Type
	experts, outs, cols, rows, k int
	perSlot                      bool
	hot                          int // an expert in every row, or -1
}

func (c idCase) String() string {
	return fmt.Sprintf("%v_e%d_%dx%d_rows%d_k%d_slot%v_hot%d", c.typ, c.experts, c.outs, c.cols, c.rows, c.k, c.perSlot, c.hot)
}

func (c idCase) data(r *rand.Rand) (w []byte, wf, x, ids []float32) {
	w = randomWeights(r, c.typ, c.experts*c.outs, c.cols, 0.5)
	wf = make([]float32, c.experts*c.outs*c.cols)
	xrows := c.rows
	if c.perSlot {
		xrows *= c.k
	}
	x = ewRandom(r, xrows*c.cols, 1)
	return w, wf, x, randomIDs(r, c.rows, c.k, c.experts, c.hot)
}

// checkID compares dst (slots rows of outs floats, dStride bytes apart)
// with the reference; tolerance tol·Σ|w·x|, and the row padding untouched.
func checkID(t *testing.T, b []byte, dStride, outs int, want, scale []float64, tol float64) float64 {
	t.Helper()
	worst := 0.0
	for s := 0; s < len(want)/outs; s++ {
		got := f32s(b[s*dStride : s*dStride+4*outs])
		for o, v := range got {
			e := math.Abs(float64(v) - want[s*outs+o])
			worst = max(worst, e/(tol*scale[s*outs+o]))
			if !(e <= tol*scale[s*outs+o]) {
				t.Fatalf("slot %d output %d: %v, want %v", s, o, v, want[s*outs+o])
			}
		}
		if string(b[s*dStride+4*outs:(s+1)*dStride]) != string(make([]byte, dStride-4*outs)) {
			t.Fatalf("slot %d: bytes after the row were written", s)
		}
	}
	return worst
}

// kernel_mul_mv_id_<type> for every weight type against the float64
// product of the chosen experts' dequantized rows: kernel_mul_mv's
// tolerance, 1e-6·Σ|w·x|.
func TestMulMVID(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(43, 44))
	for _, typ := range weightTypes {
		cols := 256
		if typ.BlockSize() < ggml.QK_K {
			cols = 96
		}
		cases := []idCase{{typ, 8, 20, cols, 1, 2, false, -1}, {typ, 16, 33, 2 * cols, 3, 4, true, -1}, {typ, 4, 9, cols, 2, 4, false, 3},
			{typ, 4, 7, 1024, 1, 2, false, -1}}
		if typ == ggml.Q4_0 || typ == ggml.MXFP4 {
			cases = append(cases, idCase{typ, 64, 96, 2048, 1, 8, false, -1}, idCase{typ, 64, 64, 768, 1, 8, true, -1})
		}
		worst := 0.0
		for _, c := range cases {
			w, wf, x, ids := c.data(r)
			dequantize(t, typ, wf, w)
			want, scale, _, _ := matMulIDRef(typ, wf, x, ids, c.outs, c.cols, c.k, c.perSlot)
			slots := c.rows * c.k
			// 8 cores: the type's sets and rows; 1000: split where the
			// row's chunks allow.
			for _, cores := range []int{8, 1000} {
				g := encoder.MatVecGrid(typ, c.outs, c.cols, slots, cores, encoder.MatVecSimdgroupsPerCore)
				for _, o := range orders {
					t.Run(fmt.Sprintf("%s_split%d_%v", c, g.Split, o), func(t *testing.T) {
						dStride := 4*c.outs + 16
						dst := buffer(t, d, make([]byte, dStride*slots))
						perSlot := uint32(0)
						if c.perSlot {
							perSlot = 1
						}
						rb := typ.RowBytes(c.cols)
						run(t, d, o, device.Dispatch{
							Pipeline: pipeline(t, l, "kernel_mul_mv_id_"+encoder.KernelSuffix(typ)),
							Groups:   [3]int{g.Groups, slots, 1}, Threads: [3]int{g.Threads(), 1, 1},
							Threadgroup: []int{g.ThreadgroupBytes(1, false)},
							Inline: []device.Inline{{Index: 0, Data: encoder.MulMVIDArgs{Cols: uint32(c.cols), Rows: uint32(c.outs), Experts: uint32(c.experts),
								K: uint32(c.k), XPerSlot: perSlot, WStride: uint32(rb), ExpertStride: uint64(rb * c.outs),
								XStride: uint32(4 * c.cols), DStride: uint32(dStride), Split: uint32(g.Split)}.Bytes()}},
							Buffers: []device.Binding{{Index: 1, Buffer: buffer(t, d, w)}, {Index: 2, Buffer: buffer(t, d, f32Bytes(x))},
								{Index: 3, Buffer: buffer(t, d, f32Bytes(ids))}, {Index: 4, Buffer: dst}},
						})
						worst = max(worst, checkID(t, dst.Bytes(), dStride, c.outs, want, scale, 1e-6))
					})
				}
			}
		}
		t.Logf("%v: largest error/tolerance %.3f", typ, worst)
	}
}

// mapTwin is kernel_mul_mm_id_map_f32's Go twin: each expert's slots in
// ascending order.
func mapTwin(ids []float32, experts int) [][]uint32 {
	lists := make([][]uint32, experts)
	for s, id := range ids {
		lists[int(id)] = append(lists[int(id)], uint32(s))
	}
	return lists
}

// kernel_mul_mm_id_map_f32 and kernel_mul_mm_id_<type> for every weight
// type: the map's lists against mapTwin exactly, the products against
// mmTwin bit for bit and the float64 reference within mul_mm's tolerance
// (mmTolerance·Σ|w·x| + mmFloor·Σ(|w|+|x|): the operands are rounded to
// half). An expert in
// every row of a 40-row batch has two tiles of slots; most experts have
// none.
func TestMulMMID(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(45, 46))
	for _, typ := range weightTypes {
		cols := 256
		if typ.BlockSize() < ggml.QK_K {
			cols = 64
		}
		cases := []idCase{{typ, 8, 70, cols, 9, 2, false, -1}, {typ, 16, 33, cols, 40, 4, true, 5}}
		if typ == ggml.Q4_0 || typ == ggml.MXFP4 {
			cases = append(cases, idCase{typ, 64, 128, 1024, 64, 8, false, -1})
		}
		worst := 0.0
		for _, c := range cases {
			w, wf, x, ids := c.data(r)
			dequantize(t, typ, wf, w)
			want, scale, twin, ops := matMulIDRef(typ, wf, x, ids, c.outs, c.cols, c.k, c.perSlot)
			for i := range scale {
				scale[i] += mmFloor / mmTolerance(typ) * ops[i]
			}
			lists := mapTwin(ids, c.experts)
			slots := c.rows * c.k
			for _, o := range orders {
				t.Run(c.String()+"_"+o.String(), func(t *testing.T) {
					count := buffer(t, d, make([]byte, 4*c.experts))
					list := buffer(t, d, make([]byte, 4*c.experts*c.rows))
					dStride := 4*c.outs + 16
					dst := buffer(t, d, make([]byte, dStride*slots))
					perSlot := uint32(0)
					if c.perSlot {
						perSlot = 1
					}
					rb := typ.RowBytes(c.cols)
					idb := buffer(t, d, f32Bytes(ids))
					var cl device.CommandList
					cl.Add(device.Dispatch{
						Pipeline: pipeline(t, l, "kernel_mul_mm_id_map_f32"), Groups: [3]int{(c.experts + 31) / 32, 1, 1}, Threads: [3]int{32, 1, 1},
						Inline:  []device.Inline{{Index: 0, Data: encoder.MulMMIDMapArgs{Experts: uint32(c.experts), Slots: uint32(slots), Rows: uint32(c.rows)}.Bytes()}},
						Buffers: []device.Binding{{Index: 1, Buffer: idb}, {Index: 2, Buffer: count}, {Index: 3, Buffer: list}},
					})
					cl.Add(device.Dispatch{
						Pipeline: pipeline(t, l, "kernel_mul_mm_id_"+encoder.KernelSuffix(typ)),
						Groups:   [3]int{(c.rows + 31) / 32, (c.outs + 63) / 64, c.experts}, Threads: [3]int{128, 1, 1},
						Inline: []device.Inline{{Index: 0, Data: encoder.MulMMIDArgs{Cols: uint32(c.cols), Outs: uint32(c.outs), Rows: uint32(c.rows),
							K: uint32(c.k), XPerSlot: perSlot, WStride: uint32(rb), ExpertStride: uint64(rb * c.outs),
							XStride: uint32(4 * c.cols), DStride: uint32(dStride)}.Bytes()}},
						Buffers: []device.Binding{{Index: 1, Buffer: buffer(t, d, w)}, {Index: 2, Buffer: buffer(t, d, f32Bytes(x))},
							{Index: 3, Buffer: count}, {Index: 4, Buffer: list}, {Index: 5, Buffer: dst}},
					})
					submit(t, d, o, &cl)
					counts, lb := u32s(count.Bytes()), u32s(list.Bytes())
					for e, want := range lists {
						got := lb[e*c.rows : e*c.rows+int(counts[e])]
						if fmt.Sprint(got) != fmt.Sprint(want) && len(want)+len(got) > 0 {
							t.Fatalf("expert %d: slots %v, want %v", e, got, want)
						}
					}
					for s := 0; s < slots; s++ {
						for o, v := range f32s(dst.Bytes()[s*dStride : s*dStride+4*c.outs]) {
							if math.Float32bits(v) != math.Float32bits(twin[s*c.outs+o]) {
								t.Fatalf("slot %d output %d: %v, twin %v", s, o, v, twin[s*c.outs+o])
							}
						}
					}
					worst = max(worst, checkID(t, dst.Bytes(), dStride, c.outs, want, scale, mmTolerance(typ)))
				})
			}
		}
		t.Logf("%v: largest error/tolerance %.3f", typ, worst)
	}
}

func u32s(b []byte) []uint32 {
	v := make([]uint32, len(b)/4)
	for i := range v {
		v[i] = uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
	}
	return v
}

// ewRunArgs is ewRun with an argument struct of the caller's (count: the
// floats or float4s per row).
func ewRunArgs(t *testing.T, d *emulator.Device, o emulator.Order, name string, vec bool, n, rows int, args func(count uint32) []byte, bufs ...device.Buffer) {
	t.Helper()
	_, l := emu(t)
	count := n
	if vec {
		name += "_4"
		count = n / 4
	}
	var b []device.Binding
	for i, buf := range bufs {
		b = append(b, device.Binding{Index: i + 1, Buffer: buf})
	}
	run(t, d, o, device.Dispatch{
		Pipeline: pipeline(t, l, name), Groups: [3]int{(count + 255) / 256, rows, 1}, Threads: [3]int{256, 1, 1},
		Inline:  []device.Inline{{Index: 0, Data: args(uint32(count))}},
		Buffers: b,
	})
}

// kernel_add_bias_id and kernel_sum_experts against their loops: exact
// (one add; the products summed in slot order from the first).
func TestBiasIDSumExperts(t *testing.T) {
	d, _ := emu(t)
	r := rand.New(rand.NewPCG(47, 48))
	type shape struct{ n, rows, k, experts int }
	for _, c := range []shape{{2880, 3, 4, 32}, {7, 2, 2, 8}, {2048, 1, 8, 128}, {64, 5, 1, 4}} {
		slots := c.rows * c.k
		ids := randomIDs(r, c.rows, c.k, c.experts, -1)
		x, bias := ewRandom(r, slots*c.n, 1), ewRandom(r, c.experts*c.n, 1)
		wts := ewRandom(r, slots, 0.5)
		wantBias := make([]float32, len(x))
		wantSum := make([]float32, c.rows*c.n)
		for s := 0; s < slots; s++ {
			for i := 0; i < c.n; i++ {
				wantBias[s*c.n+i] = x[s*c.n+i] + bias[int(ids[s])*c.n+i]
			}
		}
		for row := 0; row < c.rows; row++ {
			for i := 0; i < c.n; i++ {
				acc := wts[row*c.k] * x[row*c.k*c.n+i]
				for j := 1; j < c.k; j++ {
					acc += wts[row*c.k+j] * x[(row*c.k+j)*c.n+i]
				}
				wantSum[row*c.n+i] = acc
			}
		}
		for _, vec := range []bool{false, true} {
			if vec && c.n%4 != 0 {
				continue
			}
			for _, o := range orders {
				t.Run(fmt.Sprintf("n%d_rows%d_k%d_vec%v_%v", c.n, c.rows, c.k, vec, o), func(t *testing.T) {
					xb := buffer(t, d, f32Bytes(x))
					ewRunArgs(t, d, o, "kernel_add_bias_id_f32", vec, c.n, slots, func(n uint32) []byte {
						return encoder.MoEBiasIDArgs{N: n, Experts: uint32(c.experts)}.Bytes()
					}, xb, buffer(t, d, f32Bytes(bias)), buffer(t, d, f32Bytes(ids)))
					for i, v := range f32s(xb.Bytes()) {
						if v != wantBias[i] {
							t.Fatalf("bias: slot %d element %d: %v, want %v", i/c.n, i%c.n, v, wantBias[i])
						}
					}
					dst := buffer(t, d, make([]byte, 4*c.rows*c.n))
					ewRunArgs(t, d, o, "kernel_sum_experts_f32", vec, c.n, c.rows, func(n uint32) []byte {
						return encoder.MoESumArgs{N: n, K: uint32(c.k)}.Bytes()
					}, dst, buffer(t, d, f32Bytes(x)), buffer(t, d, f32Bytes(wts)))
					for i, v := range f32s(dst.Bytes()) {
						if v != wantSum[i] {
							t.Fatalf("sum: row %d element %d: %v, want %v", i/c.n, i%c.n, v, wantSum[i])
						}
					}
				})
			}
		}
	}
}

// swigluClampedTwin is kernel_swiglu_clamped's Go twin.
func swigluClampedTwin(g, u, alpha, limit float32) float32 {
	g = min(g, limit)
	u = min(max(u, -limit), limit)
	return g / (1 + fastmath.Exp2(-(alpha*g)*log2e)) * (u + 1)
}

// kernel_swiglu_clamped against its twin: exact (the same float32
// operations in the same order), on gpt-oss's alpha 1.702 and limit 7,
// values past the limit and the polynomial's edges included.
func TestSwiGLUClamped(t *testing.T) {
	d, _ := emu(t)
	r := rand.New(rand.NewPCG(49, 50))
	for _, n := range []int{1, 7, 2880, 4 * 2880} {
		g, u := ewRandom(r, n, 6), ewRandom(r, n, 6)
		for i, v := range []float32{0, -0.5, 7, 7.5, -7.5, -60, -80, 100, float32(math.Inf(-1))} {
			if i < n {
				g[i] = v
				u[(i+1)%n] = v
			}
		}
		for _, vec := range []bool{false, true} {
			if vec && n%4 != 0 {
				continue
			}
			for _, o := range orders {
				t.Run(fmt.Sprintf("n%d_vec%v_%v", n, vec, o), func(t *testing.T) {
					dst := buffer(t, d, make([]byte, 4*n))
					ewRunArgs(t, d, o, "kernel_swiglu_clamped_f32", vec, n, 1, func(c uint32) []byte {
						return encoder.MoESwiGLUArgs{N: c, Alpha: 1.702, Limit: 7}.Bytes()
					}, dst, buffer(t, d, f32Bytes(g)), buffer(t, d, f32Bytes(u)))
					for i, v := range f32s(dst.Bytes()) {
						if want := swigluClampedTwin(g[i], u[i], 1.702, 7); math.Float32bits(v) != math.Float32bits(want) {
							t.Fatalf("element %d: gate %v up %v: %v, want %v", i, g[i], u[i], v, want)
						}
					}
				})
			}
		}
	}
}
