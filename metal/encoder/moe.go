package encoder

import (
	"math"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/metal/device"
)

// The mixture-of-experts ops (backend.Experts): the router's top k and
// weights, the expert matmuls by id, the biases by id, the weighted sum of
// a token's expert outputs and gpt-oss's clamped SwiGLU. Expert ids stay
// on the device as floats, so a layer needs no trip to the host.

// Route limits (moe.metal's kernel_moe_route_f32: one simdgroup per row,
// 32 bits of "taken" per lane, the k choices in the first k lanes).
const (
	RouteMaxExperts = 32 * 32
	RouteMaxUsed    = 32
)

// Route writes the top r.Used experts of each of rows rows of logits
// (r.Experts wide) to ids and their weights to weights (rows·Used floats
// each), by r.Gating, r.Norm and r.Scale (kernel_moe_route_f32: a
// simdgroup per row).
func (e *Encoder) Route(ids, weights, logits Region, rows int, r *backend.Router) {
	switch {
	case r == nil:
		e.Failf("route: no router")
		return
	case r.Experts <= 0 || r.Experts > RouteMaxExperts:
		e.Failf("route: %d experts (1 to %d)", r.Experts, RouteMaxExperts)
		return
	case r.Used <= 0 || r.Used > r.Experts || r.Used > RouteMaxUsed:
		e.Failf("route: %d of %d experts chosen (1 to %d)", r.Used, r.Experts, min(r.Experts, RouteMaxUsed))
		return
	case r.Gating != backend.GatingSoftmax && r.Gating != backend.GatingSoftmaxTopK && r.Gating != backend.GatingSigmoid:
		e.Failf("route: unknown gating %d", r.Gating)
		return
	case rows < 0:
		e.Failf("route: %d rows", rows)
		return
	case !e.ewCheck("route", rows*r.Experts, logits) || !e.ewCheck("route", rows*r.Used, ids, weights) || rows == 0:
		return
	}
	scale := r.Scale
	if scale == 0 {
		scale = 1
	}
	norm := uint32(0)
	if r.Norm {
		norm = 1
	}
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline("kernel_moe_route_f32"),
		Groups:   [3]int{rows, 1, 1},
		Threads:  [3]int{32, 1, 1},
		Inline: []device.Inline{{Index: 0, Data: MoERouteArgs{Experts: u32(r.Experts), K: u32(r.Used), Gating: u32(int(r.Gating)),
			Norm: norm, Scale: scale}.Bytes()}},
		Buffers: []device.Binding{logits.bind(1), ids.bind(2), weights.bind(3)},
	})
}

// MatMulID: dst[s] = W_e·x[s/k] (xPerSlot: x[s]), e = ids[s], for the
// rows·k slots; w stacks experts matrices of w.Rows/experts rows. Fewer
// than mulMMMinRows rows (decode) take kernel_mul_mv_id_<type>, one
// threadgroup row per slot, reading only the chosen experts' rows; larger
// batches kernel_mul_mm_id_map_f32, which lists each expert's slots, then
// kernel_mul_mm_id_<type>, whose tiles read each chosen expert's matrix
// once per 32 of its slots.
func (e *Encoder) MatMulID(dst Region, w *Weight, experts int, x, ids Region, rows, k int, xPerSlot bool) {
	if !e.checkWeight("matmul_id", w) {
		return
	}
	switch {
	case experts <= 0 || w.Rows%experts != 0:
		e.Failf("matmul_id: %d rows of W are not %d experts' matrices", w.Rows, experts)
		return
	case rows <= 0 || k <= 0 || k > experts:
		e.Failf("matmul_id: %d rows of %d slots (%d experts)", rows, k, experts)
		return
	case x.Off%16 != 0:
		e.Failf("matmul_id: x at offset %d, not a multiple of 16", x.Off)
		return
	case dst.Off%4 != 0:
		e.Failf("matmul_id: destination at offset %d, not a multiple of 4", dst.Off)
		return
	}
	outs, slots, xrows := w.Rows/experts, rows*k, rows
	if xPerSlot {
		xrows = slots
	}
	rb := w.RowBytes()
	switch {
	case !e.ewCheck("matmul_id", slots, ids):
		return
	case x.Len < 4*xrows*w.Cols:
		e.Failf("matmul_id: %d rows of %d floats in x of %d bytes", xrows, w.Cols, x.Len)
		return
	case dst.Len < 4*slots*outs:
		e.Failf("matmul_id: %d slots of %d floats into %d bytes", slots, outs, dst.Len)
		return
	case int64(rb) > math.MaxUint32 || 4*int64(w.Cols) > math.MaxUint32 || 4*int64(outs) > math.MaxUint32:
		e.Failf("matmul_id: W %d×%d: row strides beyond 32 bits", w.Rows, w.Cols)
		return
	}
	perSlot := uint32(0)
	if xPerSlot {
		perSlot = 1
	}
	suffix := KernelSuffix(w.Type)
	if rows < mulMMMinRows || mulMMFits(w, x) != "" {
		g := e.matVecGrid(w.Type, outs, w.Cols, slots)
		e.dispatch(device.Dispatch{
			Pipeline: e.pipeline("kernel_mul_mv_id_" + suffix),
			Groups:   [3]int{g.Groups, slots, 1},
			Threads:  [3]int{g.Threads(), 1, 1},
			Inline: []device.Inline{{Index: 0, Data: MulMVIDArgs{Cols: u32(w.Cols), Rows: u32(outs), Experts: u32(experts), K: u32(k),
				XPerSlot: perSlot, WStride: u32(rb), ExpertStride: uint64(outs) * uint64(rb), XStride: u32(4 * w.Cols),
				DStride: u32(4 * outs), Split: u32(g.Split)}.Bytes()}},
			Buffers:     []device.Binding{w.bind(1), x.bind(2), ids.bind(3), dst.bind(4)},
			Threadgroup: []int{g.ThreadgroupBytes(1, false)},
		})
		return
	}
	// Each expert's list holds at most rows slots: a token's k slots name
	// k different experts.
	count, list := e.scratch(4*experts), e.scratch(4*experts*rows)
	if count.Buf == nil || list.Buf == nil {
		return
	}
	mapThreads := min(256, (experts+31)&^31)
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline("kernel_mul_mm_id_map_f32"),
		Groups:   [3]int{(experts + mapThreads - 1) / mapThreads, 1, 1},
		Threads:  [3]int{mapThreads, 1, 1},
		Inline:   []device.Inline{{Index: 0, Data: MulMMIDMapArgs{Experts: u32(experts), Slots: u32(slots), Rows: u32(rows)}.Bytes()}},
		Buffers:  []device.Binding{ids.bind(1), count.bind(2), list.bind(3)},
	})
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline("kernel_mul_mm_id_" + suffix),
		Groups:   [3]int{(rows + mulMMRows - 1) / mulMMRows, (outs + mulMMOuts - 1) / mulMMOuts, experts},
		Threads:  [3]int{mulMMThreads, 1, 1},
		Inline: []device.Inline{{Index: 0, Data: MulMMIDArgs{Cols: u32(w.Cols), Outs: u32(outs), Rows: u32(rows), K: u32(k),
			XPerSlot: perSlot, WStride: u32(rb), ExpertStride: uint64(outs) * uint64(rb), XStride: u32(4 * w.Cols),
			DStride: u32(4 * outs)}.Bytes()}},
		Buffers: []device.Binding{w.bind(1), x.bind(2), count.bind(3), list.bind(4), dst.bind(5)},
	})
}

// AddBiasID: x[s] += b[ids[s]] for s < slots; b is an F32 weight of
// experts rows (kernel_add_bias_id_f32[_4]).
func (e *Encoder) AddBiasID(x Region, b *Weight, experts int, ids Region, slots int) {
	switch {
	case b == nil || b.Buf == nil:
		e.Failf("add_bias_id: no bias")
		return
	case b.Type != ggml.F32:
		e.Failf("add_bias_id: a bias of type %s (F32 only)", b.Type)
		return
	case experts <= 0 || (b.Rows*b.Cols)%experts != 0:
		e.Failf("add_bias_id: a bias of %d×%d is not %d experts' rows", b.Rows, b.Cols, experts)
		return
	case slots < 0:
		e.Failf("add_bias_id: %d slots", slots)
		return
	}
	n := b.Rows * b.Cols / experts
	if !e.ewCheck("add_bias_id", experts*n, b.Region) || !e.ewCheck("add_bias_id", slots*n, x) || !e.ewCheck("add_bias_id", slots, ids) ||
		slots == 0 {
		return
	}
	name, count := "kernel_add_bias_id_f32", n
	if ewVec4(n, x, b.Region) {
		name, count = name+"_4", n/4
	}
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline(name),
		Groups:   [3]int{(count + ewThreads - 1) / ewThreads, slots, 1},
		Threads:  [3]int{ewThreads, 1, 1},
		Inline:   []device.Inline{{Index: 0, Data: MoEBiasIDArgs{N: u32(count), Experts: u32(experts)}.Bytes()}},
		Buffers:  []device.Binding{x.bind(1), b.bind(2), ids.bind(3)},
	})
}

// SumExperts: dst[row] = Σ_j weights[row·k+j]·y[row·k+j], j from 0, for
// rows rows of n floats (kernel_sum_experts_f32[_4]).
func (e *Encoder) SumExperts(dst, y, weights Region, rows, k, n int) {
	switch {
	case rows < 0 || k <= 0 || n < 0:
		e.Failf("sum_experts: %d rows of %d slots of %d", rows, k, n)
		return
	case !e.ewCheck("sum_experts", rows*n, dst) || !e.ewCheck("sum_experts", rows*k*n, y) || !e.ewCheck("sum_experts", rows*k, weights) ||
		rows == 0 || n == 0:
		return
	}
	name, count := "kernel_sum_experts_f32", n
	if ewVec4(n, dst, y) {
		name, count = name+"_4", n/4
	}
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline(name),
		Groups:   [3]int{(count + ewThreads - 1) / ewThreads, rows, 1},
		Threads:  [3]int{ewThreads, 1, 1},
		Inline:   []device.Inline{{Index: 0, Data: MoESumArgs{N: u32(count), K: u32(k)}.Bytes()}},
		Buffers:  []device.Binding{dst.bind(1), y.bind(2), weights.bind(3)},
	})
}

// SwiGLUClamped is gpt-oss's gate: g = min(gate[i], limit),
// u = clamp(up[i], −limit, limit), dst[i] = g·sigmoid(alpha·g)·(u + 1)
// (kernel_swiglu_clamped_f32[_4]).
func (e *Encoder) SwiGLUClamped(dst, gate, up Region, n int, alpha, limit float32) {
	if !(limit > 0) || math.IsNaN(float64(alpha)) {
		e.Failf("swiglu_clamped: limit %g (must be positive), alpha %g", limit, alpha)
		return
	}
	if e.ewCheck("swiglu_clamped", n, dst, gate, up) && n > 0 {
		e.ewDispatchArgs("swiglu_clamped", n, 1, func(count uint32) []byte {
			return MoESwiGLUArgs{N: count, Alpha: alpha, Limit: limit}.Bytes()
		}, dst, gate, up)
	}
}
