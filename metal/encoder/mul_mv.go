package encoder

import (
	"nibble/engine/ggml"
	"nibble/metal/device"
)

// mul_mv.metal's shape: rows of x per threadgroup at most (the function
// constant's range) and its index, rows of W per simdgroup at most.
const (
	mulMVMaxX      = 4
	fcMulMVNX      = 600
	mulMVMaxRows   = 4
	mulMVMaxSplit  = 8
	mulMVMaxGroupW = 16 // simdgroups per threadgroup at most (512 threads)
	// MatVecSimdgroupsPerCore is the simdgroups in flight per GPU core a
	// mat-vec's grid aims at (before it splits rows between simdgroups):
	// enough that the loads of a memory-bound kernel cover DRAM latency.
	MatVecSimdgroupsPerCore = 16
)

// mulMVRowsPerSimdgroup is mul_mv.metal's mv_shape<B>::nr, rows of W per
// simdgroup (ggml-metal's N_R0 per type): the types whose 16-element chunks
// are cheap to decode take four, the others two.
func mulMVRowsPerSimdgroup(t ggml.Type) int {
	switch t {
	case ggml.Q8_0, ggml.MXFP4, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K:
		return 2
	}
	return 4
}

// mulMVSets is the sets of rows per threadgroup (ggml-metal's N_SG): two,
// four for Q8_0, whose rows are the cheapest to decode per byte.
func mulMVSets(t ggml.Type) int {
	if t == ggml.Q8_0 {
		return 4
	}
	return 2
}

// MatVecShape is the grid of kernel_mul_mv_<type> and kernel_mul_mv_id_<type>.
type MatVecShape struct {
	Rows   int // rows of W per simdgroup (the kernel's nr for the type)
	Sets   int // sets of rows per threadgroup
	Split  int // simdgroups per set, dividing the row's chunks between them
	Groups int // threadgroups along W's rows
}

// Threads is the threadgroup's size.
func (s MatVecShape) Threads() int { return 32 * s.Sets * s.Split }

// ThreadgroupBytes is the length of [[threadgroup(0)]] for nx rows of x:
// one float per row of W, row of x and simdgroup when split (and one per
// row of x for Σx² with the fused norm), else the smallest length Metal
// takes.
func (s MatVecShape) ThreadgroupBytes(nx int, norm bool) int {
	if s.Split == 1 {
		return 16
	}
	n := s.Rows * nx
	if norm {
		n += nx
	}
	return (4*s.Sets*s.Split*n + 15) &^ 15
}

// MatVecGrid is the grid of a mat-vec of W (rows×cols of type t) for slots
// rows of x (or slots of mul_mv_id) on a GPU of cores cores aiming at
// perCore simdgroups a core. The rows per simdgroup and sets per
// threadgroup are the type's (ggml-metal's table, which suits Apple GPUs);
// when that leaves fewer simdgroups than cores·perCore, the simdgroups of a
// set split the row's chunks between them (powers of two, each lane keeping
// at least one chunk), so a 2048-row matrix on 132 SMs runs four times the
// simdgroups instead of 4 a core.
func MatVecGrid(t ggml.Type, rows, cols, slots, cores, perCore int) MatVecShape {
	s := MatVecShape{Rows: mulMVRowsPerSimdgroup(t), Sets: mulMVSets(t), Split: 1}
	s.Groups = (rows + s.Rows*s.Sets - 1) / (s.Rows * s.Sets)
	base := s.Groups * s.Sets * max(slots, 1)
	chunks := cols / 16
	for base*s.Split < cores*perCore && 2*s.Split <= mulMVMaxSplit && 32*2*s.Split <= chunks &&
		s.Sets*2*s.Split <= mulMVMaxGroupW {
		s.Split *= 2
	}
	return s
}

// matVecGrid is MatVecGrid on the encoder's device.
func (e *Encoder) matVecGrid(t ggml.Type, rows, cols, slots int) MatVecShape {
	return MatVecGrid(t, rows, cols, slots, e.Cores(), e.mvPerCore)
}

// mvFusion is what a mat-vec does to x as it loads it (mul_mv.metal's
// kernel_mul_mv_norm_<type>): nothing, or the RMS norm with weight norm
// and eps.
type mvFusion struct {
	norm *Weight
	eps  float32
}

// mulMV: dst[r] = W·x[r], r < rows (mat-vec; small row counts). x and dst
// are rows×Cols and rows×Rows floats, row after row.
//
// kernel_mul_mv_<type> (mul_mv.metal) on MatVecGrid's threadgroups, nx =
// min(rows, 4) rows of x per threadgroup so each weight is read once for up
// to four of them.
func (e *Encoder) mulMV(dst Region, w *Weight, x Region, rows int) {
	e.mulMVFused(dst, w, x, rows, mvFusion{})
}

func (e *Encoder) mulMVFused(dst Region, w *Weight, x Region, rows int, f mvFusion) {
	if !e.checkWeight("mul_mv", w) {
		return
	}
	switch {
	case rows <= 0:
		e.Failf("mul_mv: %d rows", rows)
		return
	case x.Off%16 != 0:
		e.Failf("mul_mv: x at offset %d, not a multiple of 16", x.Off)
		return
	case dst.Off%4 != 0:
		e.Failf("mul_mv: destination at offset %d, not a multiple of 4", dst.Off)
		return
	case x.Len < 4*rows*w.Cols:
		e.Failf("mul_mv: %d rows of %d floats in x of %d bytes", rows, w.Cols, x.Len)
		return
	case dst.Len < 4*rows*w.Rows:
		e.Failf("mul_mv: %d rows of %d floats into %d bytes", rows, w.Rows, dst.Len)
		return
	}
	nx := min(rows, mulMVMaxX)
	g := e.matVecGrid(w.Type, w.Rows, w.Cols, (rows+nx-1)/nx)
	// Unused by the plain kernel, buffer 4 is bound to x (every device
	// takes a binding for each buffer a kernel declares).
	binds := []device.Binding{w.bind(1), x.bind(2), dst.bind(3), x.bind(4)}
	name := "kernel_mul_mv_"
	if f.norm != nil {
		binds[3] = f.norm.bind(4)
		name = "kernel_mul_mv_norm_"
	}
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline(name+KernelSuffix(w.Type), device.Constant{Index: fcMulMVNX, Value: int16(nx)}),
		Groups:   [3]int{g.Groups, (rows + nx - 1) / nx, 1},
		Threads:  [3]int{g.Threads(), 1, 1},
		Inline: []device.Inline{{Index: 0, Data: MulMVArgs{Cols: u32(w.Cols), Rows: u32(w.Rows), XRows: u32(rows),
			WStride: u32(w.RowBytes()), XStride: u32(4 * w.Cols), DStride: u32(4 * w.Rows), Split: u32(g.Split), Eps: f.eps}.Bytes()}},
		Buffers:     binds,
		Threadgroup: []int{g.ThreadgroupBytes(nx, f.norm != nil)},
	})
}

// MatMulNorm encodes dst[r] = W·RMSNorm(x[r]) for r < rows, the norm's
// weight norm and eps as RMSNorm's: for the mat-vec's rows with an F32
// norm as wide as W, one dispatch that normalises x as it loads it
// (kernel_mul_mv_norm_<type>); otherwise RMSNorm into scratch memory, then MatMul.
func (e *Encoder) MatMulNorm(dst Region, w *Weight, x Region, norm *Weight, eps float32, rows int) {
	if norm != nil && norm.Buf != nil && norm.Type == ggml.F32 && norm.Rows*norm.Cols == w.Cols && w.Cols%4 == 0 &&
		norm.Off%16 == 0 && norm.Len >= 4*w.Cols && (rows < mulMMMinRows || mulMMFits(w, x) != "") {
		e.mulMVFused(dst, w, x, rows, mvFusion{norm: norm, eps: eps})
		return
	}
	h := e.scratch(4 * rows * w.Cols)
	if h.Buf == nil {
		return
	}
	e.RMSNorm(h, x, norm, eps, rows)
	e.MatMul(dst, w, h, rows)
}
