package metal

import "nibble/engine/backend"

// The ops Gemma 4 needs beyond Backend (backend.Gemma4Ops, and
// backend.ExpertScaler for its mixture of experts), as the CPU backend
// computes them.

var _ backend.Gemma4Ops = (*Backend)(nil)

func (b *Backend) RMSNormPlain(dst, x backend.Tensor, eps float32, rows, n int) {
	d, s := b.region("rms_norm_plain", dst, 0, rows*n), b.region("rms_norm_plain", x, 0, rows*n)
	if b.enc.Err() != nil || rows == 0 {
		return
	}
	b.enc.RMSNormPlain(d, s, eps, rows, n)
}

func (b *Backend) CopyRows(dst backend.Tensor, dstOff, dstStride int, src backend.Tensor, srcOff, srcStride, rows, n int) {
	if rows <= 0 || n <= 0 {
		return
	}
	last := func(off, stride int) int { return off + (rows-1)*stride + n }
	d := b.region("copy_rows", dst, 0, last(dstOff, dstStride))
	s := b.region("copy_rows", src, 0, last(srcOff, srcStride))
	if b.enc.Err() != nil {
		return
	}
	b.enc.CopyRows(d, dstOff, dstStride, s, srcOff, srcStride, rows, n)
}

var _ backend.ExpertScaler = (*Backend)(nil)

func (b *Backend) ScaleByExpert(x backend.Tensor, w backend.Weight, experts int, ids backend.Tensor, slots int) {
	f := b.weight("scale_by_expert", w)
	if f == nil {
		return
	}
	d, i := b.region("scale_by_expert", x, 0, slots), b.region("scale_by_expert", ids, 0, slots)
	if b.enc.Err() != nil || slots == 0 {
		return
	}
	b.enc.ScaleByExpert(d, f, experts, i, slots)
}
