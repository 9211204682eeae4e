package encoder

import "nibble/metal/device"

// mul_mv.metal's shape: rows of W per simdgroup, rows of x per threadgroup
// at most (the function constant's range) and its index.
const (
	mulMVRowsPerSimdgroup = 4
	mulMVMaxX             = 4
	fcMulMVNX             = 600
	// Two simdgroups: eight rows of W per threadgroup keeps a decode
	// matmul of a few thousand rows at hundreds of threadgroups.
	mulMVSimdgroups = 2
)

// mulMV: dst[r] = W·x[r], r < rows (mat-vec; small row counts). x and dst
// are rows×Cols and rows×Rows floats, row after row.
//
// kernel_mul_mv_<type> (mul_mv.metal): grid (ceil(W.Rows/8), ceil(rows/nx))
// of two simdgroups, nx = min(rows, 4) rows of x per threadgroup so each
// weight is read once for up to four of them.
func (e *Encoder) mulMV(dst Region, w *Weight, x Region, rows int) {
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
	perGroup := mulMVRowsPerSimdgroup * mulMVSimdgroups
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline("kernel_mul_mv_"+KernelSuffix(w.Type), device.Constant{Index: fcMulMVNX, Value: int16(nx)}),
		Groups:   [3]int{(w.Rows + perGroup - 1) / perGroup, (rows + nx - 1) / nx, 1},
		Threads:  [3]int{32 * mulMVSimdgroups, 1, 1},
		Inline: []device.Inline{{Index: 0, Data: MulMVArgs{Cols: u32(w.Cols), Rows: u32(w.Rows), XRows: u32(rows),
			WStride: u32(w.RowBytes()), XStride: u32(4 * w.Cols), DStride: u32(4 * w.Rows)}.Bytes()}},
		Buffers: []device.Binding{w.bind(1), x.bind(2), dst.bind(3)},
	})
}
