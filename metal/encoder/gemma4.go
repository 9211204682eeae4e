package encoder

import (
	"nibble/engine/ggml"
	"nibble/metal/device"
)

// The ops Gemma 4 needs beyond the common ones (backend.Gemma4Ops).

// CopyRowsArgs is copy_rows_args (elementwise.metal).
type CopyRowsArgs struct {
	N         uint32 `msl:"n"`
	SrcStride uint32 `msl:"src_stride"`
	DstStride uint32 `msl:"dst_stride"`
}

// Bytes are the arguments as the kernel reads them.
func (a CopyRowsArgs) Bytes() []byte { return argBytes(a) }

// ScaleIDArgs is scale_id_args (elementwise.metal).
type ScaleIDArgs struct {
	Slots   uint32 `msl:"slots"`
	Experts uint32 `msl:"experts"`
}

// Bytes are the arguments as the kernel reads them.
func (a ScaleIDArgs) Bytes() []byte { return argBytes(a) }

// RMSNormPlain: dst[r] = x[r] / sqrt(mean(x[r]²) + eps) for rows rows of n
// floats, no weight (kernel_rms_norm_plain_f32: a threadgroup per row, a
// thread per float4 up to 1024). dst may be x.
func (e *Encoder) RMSNormPlain(dst, x Region, eps float32, rows, n int) {
	switch {
	case rows < 0 || n <= 0 || n%4 != 0:
		e.Failf("rms_norm_plain: %d rows of %d (a multiple of 4)", rows, n)
		return
	case !ewVec4(n, dst, x):
		e.Failf("rms_norm_plain: offsets %d and %d must be multiples of 16 (float4 loads)", dst.Off, x.Off)
		return
	case !e.ewCheck("rms_norm_plain", rows*n, dst, x) || rows == 0:
		return
	}
	e.dispatch(device.Dispatch{
		Pipeline:    e.pipeline("kernel_rms_norm_plain_f32"),
		Groups:      [3]int{rows, 1, 1},
		Threads:     [3]int{min(1024, (n/4+31)&^31), 1, 1},
		Inline:      []device.Inline{{Index: 0, Data: RMSNormArgs{N: u32(n), SrcStride: u32(4 * n), DstStride: u32(4 * n), Eps: eps}.Bytes()}},
		Buffers:     []device.Binding{x.bind(1), dst.bind(3)},
		Threadgroup: []int{32 * 4},
	})
}

// CopyRows copies rows blocks of n floats, block r from src at float
// offset srcOff + r·srcStride to dst at dstOff + r·dstStride
// (kernel_copy_rows_f32). dst and src must not overlap.
func (e *Encoder) CopyRows(dst Region, dstOff, dstStride int, src Region, srcOff, srcStride, rows, n int) {
	end := func(off, stride int) int { return off + (rows-1)*stride + n }
	switch {
	case rows < 0 || n < 0 || dstOff < 0 || srcOff < 0 || dstStride < 0 || srcStride < 0:
		e.Failf("copy_rows: %d rows of %d, offsets %d and %d, strides %d and %d", rows, n, dstOff, srcOff, dstStride, srcStride)
		return
	case rows == 0 || n == 0:
		return
	case 4*end(dstOff, dstStride) > dst.Len || 4*end(srcOff, srcStride) > src.Len:
		e.Failf("copy_rows: %d rows of %d (dst %d+r·%d of %d bytes, src %d+r·%d of %d bytes) out of range",
			rows, n, dstOff, dstStride, dst.Len, srcOff, srcStride, src.Len)
		return
	}
	d, s := dst.Sub(4*dstOff, 4*(end(dstOff, dstStride)-dstOff)), src.Sub(4*srcOff, 4*(end(srcOff, srcStride)-srcOff))
	if d.Buf == s.Buf && d.Off < s.Off+s.Len && s.Off < d.Off+d.Len {
		e.Failf("copy_rows: overlapping spans (bytes %d and %d)", s.Off, d.Off)
		return
	}
	if !e.ewCheck("copy_rows", 0, d, s) {
		return
	}
	threads := min(256, (n+31)&^31)
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline("kernel_copy_rows_f32"),
		Groups:   [3]int{(n + threads - 1) / threads, rows, 1},
		Threads:  [3]int{threads, 1, 1},
		Inline:   []device.Inline{{Index: 0, Data: CopyRowsArgs{N: u32(n), SrcStride: u32(srcStride), DstStride: u32(dstStride)}.Bytes()}},
		Buffers:  []device.Binding{d.bind(1), s.bind(2)},
	})
}

// ScaleByExpert: x[s] *= w[ids[s]] for s < slots, w one F32 row of experts
// factors, ids floats as the router writes them (kernel_scale_id_f32).
func (e *Encoder) ScaleByExpert(x Region, w *Weight, experts int, ids Region, slots int) {
	switch {
	case w == nil || w.Buf == nil:
		e.Failf("scale_by_expert: no factors")
		return
	case w.Type != ggml.F32 || w.Rows*w.Cols != experts || experts <= 0:
		e.Failf("scale_by_expert: factors of %d×%d %s for %d experts (F32, one each)", w.Rows, w.Cols, w.Type, experts)
		return
	case slots < 0:
		e.Failf("scale_by_expert: %d slots", slots)
		return
	}
	if !e.ewCheck("scale_by_expert", experts, w.Region) || !e.ewCheck("scale_by_expert", slots, x, ids) || slots == 0 {
		return
	}
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline("kernel_scale_id_f32"),
		Groups:   [3]int{(slots + 255) / 256, 1, 1},
		Threads:  [3]int{min(256, (slots+31)&^31), 1, 1},
		Inline:   []device.Inline{{Index: 0, Data: ScaleIDArgs{Slots: u32(slots), Experts: u32(experts)}.Bytes()}},
		Buffers:  []device.Binding{x.bind(1), w.bind(2), ids.bind(3)},
	})
}
