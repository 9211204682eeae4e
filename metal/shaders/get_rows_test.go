//go:build linux

package shaders

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/ggml"
	"nibble/metal/device"
	"nibble/metal/encoder"
)

func i32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// kernel_get_rows_<type> for every weight type against quant.Dequantize
// (MXFP4: its twin, dequantMXFP4)
// (this also tests common.metal's dequant16_<type> for every chunk of every
// block). Tolerance: none; the dequantizers compute the twin's float32
// products in the twin's order, and the emulator does not fuse them.
func TestGetRows(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range weightTypes {
		p := pipeline(t, l, "kernel_get_rows_"+encoder.KernelSuffix(typ))
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
			ids := make([]int32, c.rows)
			for i := range ids {
				ids[i] = int32(r.IntN(c.vocab))
			}
			ids[0] = int32(c.vocab - 1) // the last row, and repeats
			if c.rows > 2 {
				ids[2] = ids[1]
			}
			rb := typ.RowBytes(c.n)
			want := make([]float32, c.n*c.rows)
			for i, id := range ids {
				dequantize(t, typ, want[i*c.n:(i+1)*c.n], data[int(id)*rb:int(id+1)*rb])
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
						Inline:  []device.Inline{{Index: 0, Data: encoder.GetRowsArgs{N: uint32(c.n), SrcStride: uint32(rb), DstStride: uint32(dstStride)}.Bytes()}},
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
