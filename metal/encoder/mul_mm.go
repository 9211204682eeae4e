package encoder

import (
	"math"

	"nibble/metal/device"
)

// The tiling of kernel_mul_mm (mul_mm.metal): a threadgroup of mulMMThreads
// threads computes mulMMOuts outputs of mulMMRows batch rows, mulMMCols
// columns at a time.
const (
	mulMMOuts    = 64
	mulMMRows    = 32
	mulMMCols    = 32
	mulMMThreads = 128
)

// mulMMMinRows is the smallest batch MatMul gives to the mat-mat kernel.
// Below it the mat-vec kernel is faster: kernel_mul_mm pads each batch tile
// to 32 rows, so for a few rows most of its arithmetic is wasted, and it
// runs only ceil(outputs/64) threadgroups per batch tile, too few to keep
// the GPU's memory busy on a decode-sized matrix; kernel_mul_mv spreads the
// W rows over many simdgroups and reads W once per four x rows, so up to 8
// rows it streams W at most twice (llama.cpp's Metal backend switches to
// its mat-mat kernel at about the same batch size).
const mulMMMinRows = 8

// mulMMFits reports why kernel_mul_mm cannot compute dst = W·x, or "" when it
// can: its type (weightTypes: every one has a kernel_mul_mm_<type>), whole
// 32-column steps, and x rows 16-byte aligned (it reads them as float4).
func mulMMFits(w *Weight, x Region) string {
	switch {
	case !weightTypes[w.Type]:
		return "no mul_mm kernel for " + w.Type.String()
	case w.Cols%mulMMCols != 0:
		return "columns not a multiple of 32"
	case x.Off%16 != 0:
		return "x not 16-byte aligned"
	}
	return ""
}

// mulMM encodes dst[r] = W·x[r] for r < rows with the mat-mat kernel
// (prefill batches): x is rows×W.Cols floats, dst rows×W.Rows, both
// row-major and contiguous. W.Cols must be a multiple of 32 and x 16-byte
// aligned (MatMul takes the mat-vec kernel otherwise).
func (e *Encoder) mulMM(dst Region, w *Weight, x Region, rows int) {
	if why := mulMMFits(w, x); why != "" {
		e.Failf("mul_mm: %s (W %d×%d)", why, w.Rows, w.Cols)
		return
	}
	rb := w.RowBytes()
	switch {
	case rows <= 0 || w.Rows <= 0:
		e.Failf("mul_mm: %d rows of W %d×%d", rows, w.Rows, w.Cols)
		return
	case w.Len < w.Rows*rb:
		e.Failf("mul_mm: W %d×%d of %s needs %d bytes, its region has %d", w.Rows, w.Cols, w.Type, w.Rows*rb, w.Len)
		return
	case x.Len < 4*rows*w.Cols:
		e.Failf("mul_mm: x of %d rows of %d needs %d bytes, its region has %d", rows, w.Cols, 4*rows*w.Cols, x.Len)
		return
	case dst.Len < 4*rows*w.Rows:
		e.Failf("mul_mm: dst of %d rows of %d needs %d bytes, its region has %d", rows, w.Rows, 4*rows*w.Rows, dst.Len)
		return
	case int64(rb) > math.MaxUint32 || 4*int64(w.Cols) > math.MaxUint32 || 4*int64(w.Rows) > math.MaxUint32:
		e.Failf("mul_mm: W %d×%d: row strides beyond 32 bits", w.Rows, w.Cols)
		return
	}
	name := "kernel_mul_mm_" + KernelSuffix(w.Type)
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline(name),
		Groups:   [3]int{(rows + mulMMRows - 1) / mulMMRows, (w.Rows + mulMMOuts - 1) / mulMMOuts, 1},
		Threads:  [3]int{mulMMThreads, 1, 1},
		Inline: []device.Inline{{Index: 0, Data: MulMMArgs{Cols: uint32(w.Cols), Outs: uint32(w.Rows), Rows: uint32(rows),
			WStride: uint32(rb), XStride: uint32(4 * w.Cols), DStride: uint32(4 * w.Rows)}.Bytes()}},
		Buffers: []device.Binding{w.bind(1), x.bind(2), dst.bind(3)},
	})
}

// MatMul encodes dst[r] = W·x[r] for r < rows (backend.Backend's MatMul):
// the mat-vec kernel for fewer than mulMMMinRows rows (decode, short
// batches) or where the mat-mat kernel does not fit, the mat-mat kernel
// otherwise.
func (e *Encoder) MatMul(dst Region, w *Weight, x Region, rows int) {
	if rows < mulMMMinRows || mulMMFits(w, x) != "" {
		e.mulMV(dst, w, x, rows)
		return
	}
	e.mulMM(dst, w, x, rows)
}
