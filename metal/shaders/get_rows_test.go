//go:build linux

package shaders

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/half"
	"nibble/engine/quant"
	"nibble/metal/device"
)

// weightTypes is every tensor type the engine computes with (common.metal
// has a block struct and a dequantizer for each).
var weightTypes = []ggml.Type{
	ggml.F32, ggml.F16, ggml.BF16, ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0,
	ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K,
}

// suffix is a type's kernel name suffix: f32, q4_0, q6_k.
func suffix(t ggml.Type) string { return strings.ToLower(t.String()) }

// scaleOffsets are the byte offsets of a block's fp16 scales, set to finite
// values so that every dequantized value is finite.
var scaleOffsets = map[ggml.Type][]int{
	ggml.Q4_0: {0}, ggml.Q4_1: {0, 2}, ggml.Q5_0: {0}, ggml.Q5_1: {0, 2}, ggml.Q8_0: {0},
	ggml.Q2_K: {80, 82}, ggml.Q3_K: {108}, ggml.Q4_K: {0, 2}, ggml.Q5_K: {0, 2}, ggml.Q6_K: {208},
}

// randomWeights is rows×cols elements of t: random quant bits (so every bit
// pattern of the block format occurs) with finite fp16 scales of either
// sign; floats normal with standard deviation mag.
func randomWeights(r *rand.Rand, t ggml.Type, rows, cols int, mag float64) []byte {
	n := rows * cols
	b := make([]byte, t.RowBytes(cols)*rows)
	switch t {
	case ggml.F32:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r.NormFloat64()*mag)))
		}
		return b
	case ggml.F16, ggml.BF16:
		for i := 0; i < n; i++ {
			v := float32(r.NormFloat64() * mag)
			h := half.FromFloat32(v)
			if t == ggml.BF16 {
				h = half.BF16FromFloat32(v)
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return b
	}
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	ts := t.TypeSize()
	for blk := 0; blk < len(b)/ts; blk++ {
		for _, off := range scaleOffsets[t] {
			v := float32(mag * (0.01 + r.Float64()) / 16)
			if r.IntN(4) == 0 {
				v = -v
			}
			binary.LittleEndian.PutUint16(b[blk*ts+off:], half.FromFloat32(v))
		}
	}
	return b
}

func i32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// kernel_get_rows_<type> for every weight type against quant.DequantizeRow
// (this also tests common.metal's dequant16_<type> for every chunk of every
// block). Tolerance: none; the dequantizers compute the twin's float32
// products in the twin's order, and the emulator does not fuse them.
func TestGetRows(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range weightTypes {
		p := pipeline(t, l, "kernel_get_rows_"+suffix(typ))
		type shape struct{ n, vocab, rows, threads int }
		cases := []shape{{256, 7, 1, 32}, {768, 50, 9, 32}, {4096, 40, 5, 256}}
		if typ.BlockSize() < ggml.QK_K {
			cases = append(cases, shape{32, 300, 17, 64}, shape{2080, 33, 4, 128})
		}
		if typ.BlockSize() == 1 {
			cases = append(cases, shape{48, 5, 3, 32})
		}
		for _, c := range cases {
			data := randomWeights(r, typ, c.vocab, c.n, 1)
			rb := typ.RowBytes(c.n)
			ids := make([]int32, c.rows)
			for i := range ids {
				ids[i] = int32(r.IntN(c.vocab))
			}
			ids[0] = int32(c.vocab - 1) // the last row, and repeats
			if c.rows > 2 {
				ids[2] = ids[1]
			}
			m := quant.Matrix{Type: typ, Rows: c.vocab, Cols: c.n, Data: data}
			want := make([]float32, c.n*c.rows)
			for i, id := range ids {
				if err := quant.DequantizeRow(m, int(id), want[i*c.n:(i+1)*c.n]); err != nil {
					t.Fatal(err)
				}
			}
			for _, o := range orders {
				t.Run(fmt.Sprintf("%s_n%d_rows%d_%v", typ, c.n, c.rows, o), func(t *testing.T) {
					// Output rows 16 bytes apart from each other, to check the
					// stride.
					dstStride := 4*c.n + 16
					dst := buffer(t, d, make([]byte, dstStride*c.rows))
					chunks := (c.n/16 + c.threads - 1) / c.threads
					run(t, d, o, device.Dispatch{
						Pipeline: p, Groups: [3]int{c.rows, chunks, 1}, Threads: [3]int{c.threads, 1, 1},
						Inline:  []device.Inline{{Index: 0, Data: args(c.n, rb, dstStride)}},
						Buffers: []device.Binding{{Index: 1, Buffer: buffer(t, d, data)}, {Index: 2, Buffer: buffer(t, d, i32Bytes(ids))}, {Index: 3, Buffer: dst}},
					})
					for row := 0; row < c.rows; row++ {
						got := f32s(dst.Bytes()[row*dstStride : row*dstStride+4*c.n])
						for i, v := range got {
							if w := want[row*c.n+i]; math.Float32bits(v) != math.Float32bits(w) {
								t.Fatalf("row %d (id %d) element %d: %v, want %v", row, ids[row], i, v, w)
							}
						}
						if pad := dst.Bytes()[row*dstStride+4*c.n : (row+1)*dstStride]; string(pad) != string(make([]byte, 16)) {
							t.Fatalf("row %d: the bytes after the row were written", row)
						}
					}
				})
			}
		}
	}
}
