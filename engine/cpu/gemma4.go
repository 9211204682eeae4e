package cpu

import (
	"fmt"
	"math"

	"nibble/engine/backend"
)

var _ backend.Gemma4Ops = (*Backend)(nil)

// RMSNormPlain is RMSNorm without a weight (backend.Gemma4Ops), summed in
// float64 as RMSNorm is.
func (b *Backend) RMSNormPlain(dst, x backend.Tensor, eps float32, rows, n int) {
	d, s := f(dst), f(x)
	if n <= 0 || rows < 0 || rows*n > len(s) || rows*n > len(d) {
		b.fail(fmt.Errorf("rms norm: %d rows of %d do not fit tensors of %d and %d floats", rows, n, len(s), len(d)))
		return
	}
	b.pool.For(rows, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row, out := s[r*n:(r+1)*n], d[r*n:(r+1)*n]
			var sum float64
			for _, v := range row {
				sum += float64(v) * float64(v)
			}
			scale := float32(1 / math.Sqrt(sum/float64(n)+float64(eps)))
			for i, v := range row {
				out[i] = v * scale
			}
		}
	})
}

// CopyRows is a strided block copy (backend.Gemma4Ops).
func (b *Backend) CopyRows(dst backend.Tensor, dstOff, dstStride int, src backend.Tensor, srcOff, srcStride, rows, n int) {
	d, s := f(dst), f(src)
	if rows <= 0 || n <= 0 {
		return
	}
	last := func(off, stride int) int { return off + (rows-1)*stride + n }
	if dstOff < 0 || srcOff < 0 || dstStride < 0 || srcStride < 0 || last(dstOff, dstStride) > len(d) || last(srcOff, srcStride) > len(s) {
		b.fail(fmt.Errorf("copy rows: %d rows of %d (dst %d+r·%d of %d, src %d+r·%d of %d) out of range",
			rows, n, dstOff, dstStride, len(d), srcOff, srcStride, len(s)))
		return
	}
	for r := 0; r < rows; r++ {
		copy(d[dstOff+r*dstStride:dstOff+r*dstStride+n], s[srcOff+r*srcStride:srcOff+r*srcStride+n])
	}
}

var _ backend.ExpertScaler = (*Backend)(nil)

// ScaleByExpert multiplies each slot's value by its expert's factor
// (backend.ExpertScaler).
func (b *Backend) ScaleByExpert(x backend.Tensor, w backend.Weight, experts int, ids backend.Tensor, slots int) {
	id, err := expertIDs(ids, slots, experts)
	v := b.vector(w)
	if err == nil && len(v) != experts {
		err = fmt.Errorf("%d factors for %d experts", len(v), experts)
	}
	if err == nil && slots > len(f(x)) {
		err = fmt.Errorf("%d slots in a tensor of %d", slots, len(f(x)))
	}
	if err != nil {
		b.fail(fmt.Errorf("scale-by-expert %s: %w", w.Desc().Name, err))
		return
	}
	d := f(x)
	for s, e := range id {
		d[s] *= v[int(e)]
	}
}
