package encoder

import (
	"nibble/engine/ggml"
	"nibble/metal/device"
)

// RMSNorm: dst[r] = x[r] / sqrt(mean(x[r]²) + eps) ∘ w for r < rows, rows
// as wide as the F32 or F16 weight w (kernel_rms_norm_{f32,f16}: a
// threadgroup per row, a thread per float4 up to 1024). dst may be x.
func (e *Encoder) RMSNorm(dst, x Region, w *Weight, eps float32, rows int) {
	switch {
	case w == nil || w.Buf == nil:
		e.Failf("rms_norm: no weight")
		return
	case w.Type != ggml.F32 && w.Type != ggml.F16:
		e.Failf("rms_norm: a weight of type %s (F32 or F16 only)", w.Type)
		return
	case rows < 0:
		e.Failf("rms_norm: %d rows", rows)
		return
	}
	n := w.Rows * w.Cols
	switch {
	case n%4 != 0:
		e.Failf("rms_norm: rows of %d, not a multiple of 4", n)
		return
	case !ewVec4(n, dst, x, w.Region):
		e.Failf("rms_norm: offsets %d, %d and %d must be multiples of 16 (float4 loads)", dst.Off, x.Off, w.Off)
		return
	case w.Len < w.RowBytes()*w.Rows:
		e.Failf("rms_norm: a weight of %d elements in %d bytes", n, w.Len)
		return
	case !e.ewCheck("rms_norm", rows*n, dst, x) || rows == 0 || n == 0:
		return
	}
	e.dispatch(device.Dispatch{
		Pipeline:    e.pipeline("kernel_rms_norm_" + KernelSuffix(w.Type)),
		Groups:      [3]int{rows, 1, 1},
		Threads:     [3]int{min(1024, (n/4+31)&^31), 1, 1},
		Inline:      []device.Inline{{Index: 0, Data: RMSNormArgs{N: u32(n), SrcStride: u32(4 * n), DstStride: u32(4 * n), Eps: eps}.Bytes()}},
		Buffers:     []device.Binding{x.bind(1), w.bind(2), dst.bind(3)},
		Threadgroup: []int{32 * 4},
	})
}
