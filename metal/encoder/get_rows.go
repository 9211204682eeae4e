package encoder

import (
	"encoding/binary"
	"fmt"
	"strings"

	"nibble/engine/ggml"
	"nibble/metal/device"
)

// weightTypes are the types common.metal has a block struct and a
// dequantizer for, so get_rows, mul_mv and mul_mm have a kernel for each.
var weightTypes = map[ggml.Type]bool{
	ggml.F32: true, ggml.F16: true, ggml.BF16: true,
	ggml.Q4_0: true, ggml.Q4_1: true, ggml.Q5_0: true, ggml.Q5_1: true, ggml.Q8_0: true, ggml.MXFP4: true,
	ggml.Q2_K: true, ggml.Q3_K: true, ggml.Q4_K: true, ggml.Q5_K: true, ggml.Q6_K: true,
}

// SupportsWeight reports whether get_rows and mat-vec have kernels for t.
func SupportsWeight(t ggml.Type) error {
	if !weightTypes[t] {
		return fmt.Errorf("no Metal kernels for weights of type %s", t)
	}
	return nil
}

// KernelSuffix is t's part of a kernel name: kernel_get_rows_q4_k.
func KernelSuffix(t ggml.Type) string { return strings.ToLower(t.String()) }

// weightAlign is the alignment a weight's offset needs: the float types
// are read as float4/half4/ushort4 (16 bytes), the block types a byte or
// two at a time, and a binding's offset is a multiple of 4. (A view of a
// fused expert tensor, its up half, starts wherever the gate half ends.)
func weightAlign(t ggml.Type) int {
	if t.BlockSize() == 1 {
		return 16
	}
	return 4
}

// checkWeight records an error unless w is a matrix the weight kernels can
// read: a supported type, whole 16-element chunks (the float types' blocks
// in common.metal), and an offset its loads allow (weightAlign).
func (e *Encoder) checkWeight(op string, w *Weight) bool {
	switch {
	case w == nil || w.Buf == nil:
		e.Failf("%s: no weight", op)
	case SupportsWeight(w.Type) != nil:
		e.Failf("%s: %v", op, SupportsWeight(w.Type))
	case w.Rows <= 0 || w.Cols <= 0 || w.Cols%16 != 0 || w.Cols%w.Type.BlockSize() != 0:
		e.Failf("%s: a %s weight of %d×%d: rows must be whole blocks and multiples of 16 elements", op, w.Type, w.Rows, w.Cols)
	case w.Off%weightAlign(w.Type) != 0:
		e.Failf("%s: a %s weight at offset %d, not a multiple of %d", op, w.Type, w.Off, weightAlign(w.Type))
	case w.Len < w.Rows*w.RowBytes():
		e.Failf("%s: a %s weight of %d×%d in %d bytes", op, w.Type, w.Rows, w.Cols, w.Len)
	default:
		return true
	}
	return false
}

// Embed: dst row i = dequantized row tokens[i] of table (get_rows). The
// token ids are copied now.
//
// kernel_get_rows_<type> (get_rows.metal): one thread per 16-element chunk,
// grid (tokens, chunk groups).
func (e *Encoder) Embed(dst Region, table *Weight, tokens []int32) {
	if !e.checkWeight("embed", table) || len(tokens) == 0 {
		return
	}
	n := table.Cols
	switch {
	case dst.Off%16 != 0:
		e.Failf("embed: destination at offset %d, not a multiple of 16", dst.Off)
		return
	case dst.Len < 4*n*len(tokens):
		e.Failf("embed: %d rows of %d floats into %d bytes", len(tokens), n, dst.Len)
		return
	}
	ids := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		if t < 0 || int(t) >= table.Rows {
			e.Failf("embed: token %d outside the table's %d rows", t, table.Rows)
			return
		}
		binary.LittleEndian.PutUint32(ids[4*i:], uint32(t))
	}
	chunks := n / 16
	threads := min(256, (chunks+31)&^31)
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline("kernel_get_rows_" + KernelSuffix(table.Type)),
		Groups:   [3]int{len(tokens), (chunks + threads - 1) / threads, 1},
		Threads:  [3]int{threads, 1, 1},
		Inline:   []device.Inline{{Index: 0, Data: GetRowsArgs{N: u32(n), SrcStride: u32(table.RowBytes()), DstStride: u32(4 * n)}.Bytes()}},
		Buffers:  []device.Binding{table.bind(1), e.upload(ids).bind(2), dst.bind(3)},
	})
}
