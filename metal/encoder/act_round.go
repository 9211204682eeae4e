package encoder

import (
	"nibble/engine/ggml"
	"nibble/metal/device"
)

// actForm is the form the CPU backend's matmul (engine/quant) rounds its
// activations to before it meets weights of type t, as act_round.metal's
// kernel suffix; "" for F32 weights, whose activations stay as they are.
func actForm(t ggml.Type) string {
	switch t {
	case ggml.F16:
		return "f16"
	case ggml.BF16:
		return "bf16"
	case ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0:
		return "q8_0"
	case ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K:
		return "q8_k"
	}
	return ""
}

// RoundsActivations reports whether RoundActivations has work for weights
// of type t (every supported type but F32).
func RoundsActivations(t ggml.Type) bool { return actForm(t) != "" }

// RoundActivations writes to dst the rows×cols floats of x rounded as the
// CPU backend's matmul rounds activations for weights of type t (fp16,
// bf16, or Q8_0/Q8_K blocks expanded back to f32). MulMV and MulMM of such
// weights on dst then give the CPU's products up to summation order, which
// keeps the Metal backend's logits on the CPU backend's. dst and x may not
// overlap. For F32 weights it does nothing (use x).
//
// kernel_act_round_<form> (act_round.metal): one thread per float4 (f16,
// bf16), one simdgroup per 32-block (q8_0) or 256-block (q8_k).
func (e *Encoder) RoundActivations(dst, x Region, t ggml.Type, rows, cols int) {
	form := actForm(t)
	if form == "" {
		if SupportsWeight(t) != nil {
			e.Failf("act_round: %v", SupportsWeight(t))
		}
		return
	}
	switch {
	case rows <= 0 || cols <= 0 || cols%t.BlockSize() != 0 || cols%16 != 0:
		e.Failf("act_round: %d rows of %d for %s weights", rows, cols, t)
		return
	case x.Off%16 != 0 || dst.Off%16 != 0:
		e.Failf("act_round: offsets %d and %d, not multiples of 16", x.Off, dst.Off)
		return
	case x.Len < 4*rows*cols || dst.Len < 4*rows*cols:
		e.Failf("act_round: %d rows of %d floats in regions of %d and %d bytes", rows, cols, x.Len, dst.Len)
		return
	case x.Buf == dst.Buf && x.Off < dst.Off+dst.Len && dst.Off < x.Off+x.Len:
		e.Failf("act_round: x and dst overlap")
		return
	}
	var groups, threads int
	switch form {
	case "f16", "bf16":
		threads = min(256, (cols/4+31)&^31)
		groups = (cols/4 + threads - 1) / threads
	case "q8_0":
		sgs := min(8, cols/32)
		threads, groups = 32*sgs, (cols/32+sgs-1)/sgs
	case "q8_k":
		sgs := min(4, cols/256)
		threads, groups = 32*sgs, (cols/256+sgs-1)/sgs
	}
	e.Dispatch(device.Dispatch{
		Pipeline: e.Pipeline("kernel_act_round_" + form),
		Groups:   [3]int{groups, rows, 1},
		Threads:  [3]int{threads, 1, 1},
		Inline:   []device.Inline{{Index: 0, Data: Args(cols, 4*cols, 4*cols)}},
		Buffers:  []device.Binding{x.bind(1), dst.bind(2)},
	})
}
