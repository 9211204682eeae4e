package encoder

import (
	"math"

	"nibble/engine/ggml"
	"nibble/metal/device"
)

// The elementwise ops (elementwise.metal): one thread per float, or per
// float4 when the count and every offset allow it, in threadgroups of
// ewThreads.
const ewThreads = 256

// ewVec4 reports whether n floats at each region can be read as float4s.
func ewVec4(n int, rs ...Region) bool {
	if n%4 != 0 {
		return false
	}
	for _, r := range rs {
		if r.Off%16 != 0 {
			return false
		}
	}
	return true
}

// ewCheck records an error unless each region holds n floats.
func (e *Encoder) ewCheck(op string, n int, rs ...Region) bool {
	if n < 0 {
		e.Failf("%s: %d elements", op, n)
		return false
	}
	for _, r := range rs {
		if r.Buf == nil || r.Len < 4*n {
			e.Failf("%s: %d floats in a region of %d bytes", op, n, r.Len)
			return false
		}
	}
	return true
}

// ewDispatch runs kernel_<op>_f32[_4] over n floats of each of rows rows,
// with regions bound at buffer(1), buffer(2), ...
func (e *Encoder) ewDispatch(op string, n, rows int, rs ...Region) {
	e.ewDispatchArgs(op, n, rows, func(count uint32) []byte { return EWArgs{N: count}.Bytes() }, rs...)
}

// ewDispatchArgs is ewDispatch for a kernel whose argument struct has more
// after the count (ew_scalar_args): args packs it for a count.
func (e *Encoder) ewDispatchArgs(op string, n, rows int, args func(count uint32) []byte, rs ...Region) {
	name, count := "kernel_"+op+"_f32", n
	if ewVec4(n, rs...) {
		name, count = name+"_4", n/4
	}
	b := make([]device.Binding, len(rs))
	for i, r := range rs {
		b[i] = r.bind(i + 1)
	}
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline(name),
		Groups:   [3]int{(count + ewThreads - 1) / ewThreads, rows, 1},
		Threads:  [3]int{ewThreads, 1, 1},
		Inline:   []device.Inline{{Index: 0, Data: args(u32(count))}},
		Buffers:  b,
	})
}

// Add: dst[i] += x[i] for i < n (kernel_add_f32).
func (e *Encoder) Add(dst, x Region, n int) {
	if e.ewCheck("add", n, dst, x) && n > 0 {
		e.ewDispatch("add", n, 1, dst, x)
	}
}

// SwiGLU: dst[i] = silu(gate[i])·up[i] for i < n, the CPU backend's formula
// (kernel_swiglu_f32).
func (e *Encoder) SwiGLU(dst, gate, up Region, n int) {
	if e.ewCheck("swiglu", n, dst, gate, up) && n > 0 {
		e.ewDispatch("swiglu", n, 1, dst, gate, up)
	}
}

// GeluGLU: dst[i] = gelu_tanh(gate[i])·up[i] for i < n, the CPU backend's
// formula (fastmath.GeluTanh; kernel_gelu_glu_f32).
func (e *Encoder) GeluGLU(dst, gate, up Region, n int) {
	if e.ewCheck("gelu_glu", n, dst, gate, up) && n > 0 {
		e.ewDispatch("gelu_glu", n, 1, dst, gate, up)
	}
}

// Scale: x[i] *= s for i < n (kernel_scale_f32).
func (e *Encoder) Scale(x Region, s float32, n int) {
	if e.ewCheck("scale", n, x) && n > 0 {
		e.ewDispatchArgs("scale", n, 1, func(count uint32) []byte { return EWScalarArgs{N: count, S: s}.Bytes() }, x)
	}
}

// Softcap: x[i] = c·tanh(x[i]/c) for i < n, c > 0 and finite
// (kernel_softcap_f32).
func (e *Encoder) Softcap(x Region, c float32, n int) {
	if !(c > 0) || math.IsInf(float64(c), 0) {
		e.Failf("softcap: cap %g must be positive and finite", c)
		return
	}
	if e.ewCheck("softcap", n, x) && n > 0 {
		e.ewDispatchArgs("softcap", n, 1, func(count uint32) []byte { return EWScalarArgs{N: count, S: c}.Bytes() }, x)
	}
}

// AddBias adds the one-row F32 weight b (all its elements: GGUF biases are
// F32 vectors) to each of rows rows of x (kernel_add_bias_f32).
func (e *Encoder) AddBias(x Region, b *Weight, rows int) {
	switch {
	case b == nil || b.Buf == nil:
		e.Failf("add_bias: no bias")
		return
	case b.Type != ggml.F32:
		e.Failf("add_bias: a bias of type %s (F32 only)", b.Type)
		return
	case rows < 0:
		e.Failf("add_bias: %d rows", rows)
		return
	}
	n := b.Rows * b.Cols
	if !e.ewCheck("add_bias", n, b.Region) || !e.ewCheck("add_bias", rows*n, x) || rows == 0 || n == 0 {
		return
	}
	e.ewDispatch("add_bias", n, rows, x, b.Region)
}

// Copy copies n floats from src at float offset srcOff to dst at dstOff
// (kernel_copy_f32). The two spans must not overlap.
func (e *Encoder) Copy(dst Region, dstOff int, src Region, srcOff, n int) {
	if dstOff < 0 || srcOff < 0 || n < 0 || 4*(dstOff+n) > dst.Len || 4*(srcOff+n) > src.Len {
		e.Failf("copy: %d floats from offset %d of %d bytes to offset %d of %d bytes", n, srcOff, src.Len, dstOff, dst.Len)
		return
	}
	d, s := dst.Sub(4*dstOff, 4*n), src.Sub(4*srcOff, 4*n)
	if n == 0 || d == s {
		return
	}
	if d.Buf == s.Buf && d.Off < s.Off+s.Len && s.Off < d.Off+d.Len {
		// The threads would race: each reads what another may have
		// written.
		e.Failf("copy: overlapping spans (bytes %d and %d, %d long)", s.Off, d.Off, 4*n)
		return
	}
	if e.ewCheck("copy", n, d, s) {
		e.ewDispatch("copy", n, 1, d, s)
	}
}

// Argmax writes, for each of rows rows of x (n wide), the index of its
// largest element into dst[r] as a float: the first on ties, NaN never, 0
// when none is above -Inf (kernel_argmax_f32[_4]: a threadgroup per row, a
// simd reduction then one across simdgroups).
func (e *Encoder) Argmax(dst, x Region, rows, n int) {
	switch {
	case rows < 0 || n <= 0 || n > 1<<24:
		// Indices are written as floats: exact below 2^24.
		e.Failf("argmax: %d rows of %d elements", rows, n)
		return
	case !e.ewCheck("argmax", rows, dst) || !e.ewCheck("argmax", rows*n, x) || rows == 0:
		return
	}
	name, count := "kernel_argmax_f32", n
	if ewVec4(n, x) {
		name, count = name+"_4", n/4
	}
	e.dispatch(device.Dispatch{
		Pipeline:    e.pipeline(name),
		Groups:      [3]int{rows, 1, 1},
		Threads:     [3]int{min(1024, (count+31)&^31), 1, 1},
		Inline:      []device.Inline{{Index: 0, Data: EWArgs{N: u32(n)}.Bytes()}},
		Buffers:     []device.Binding{x.bind(1), dst.bind(2)},
		Threadgroup: []int{64 * 4}, // 32 values, then 32 indices
	})
}
