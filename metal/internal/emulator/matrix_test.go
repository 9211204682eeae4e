//go:build linux

package emulator

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"nibble/engine/half"
	"nibble/metal/device"
)

// mat8 is an 8x8 matrix, [row][column].
type mat8 [8][8]float32

// fma32 is a float32 fused multiply-add (float64's is exact for the
// product of two float32s; the sum is rounded twice, which differs from one
// rounding only on exact float32 midpoints).
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// mulAdd is the emulator's simdgroup product: c + a·b, k from 0 to 7, one
// fma each.
func mulAdd(a, b, c mat8) mat8 {
	var d mat8
	for m := range 8 {
		for n := range 8 {
			acc := c[m][n]
			for k := range 8 {
				acc = fma32(a[m][k], b[k][n], acc)
			}
			d[m][n] = acc
		}
	}
	return d
}

// block is the 8x8 matrix at (column x, row y) of a matrix with stride
// elements per row, transposed when t.
func block(src []float32, stride, x, y int, t bool) mat8 {
	var d mat8
	for r := range 8 {
		for c := range 8 {
			if t {
				d[r][c] = src[(y+c)*stride+x+r]
			} else {
				d[r][c] = src[(y+r)*stride+x+c]
			}
		}
	}
	return d
}

// appleElement is the (row, column) of element i of lane's
// thread_elements(), Apple's layout.
func appleElement(lane, i int) (int, int) {
	q := lane / 4
	return (q & 4) + (lane/2)%4, (q&2)*2 + (lane%2)*2 + i
}

// TestSimdgroupMatrix runs matrix.metal's matrix_ops (two simdgroups) in
// both orders against the Go reference, value for value.
func TestSimdgroupMatrix(t *testing.T) {
	d, l := testDevice(t)
	r := rand.New(rand.NewPCG(31, 32))
	f, c := randFloats(r, 2*256), randFloats(r, 2*64)
	fh, ch := make([]uint16, 2*256), make([]uint16, 2*64)
	fhf, chf := make([]float32, len(fh)), make([]float32, len(ch))
	for i := range fh {
		fh[i] = half.FromFloat32(float32(r.NormFloat64()))
		fhf[i] = half.ToFloat32(fh[i])
	}
	for i := range ch {
		ch[i] = half.FromFloat32(float32(r.NormFloat64()))
		chf[i] = half.ToFloat32(ch[i])
	}
	u16 := func(v []uint16) device.Buffer {
		b := zeroBuffer(t, d, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(b.Bytes()[2*i:], x)
		}
		return b
	}
	for _, o := range orders {
		out, oh := zeroBuffer(t, d, 4*2*512), zeroBuffer(t, d, 2*2*64)
		err := run(t, d, o, device.Dispatch{
			Pipeline: pipe(t, l, "matrix_ops"), Groups: [3]int{1, 1, 1}, Threads: [3]int{64, 1, 1},
			Buffers: []device.Binding{{Index: 0, Buffer: f32Buffer(t, d, f)}, {Index: 1, Buffer: f32Buffer(t, d, c)},
				{Index: 2, Buffer: u16(fh)}, {Index: 3, Buffer: u16(ch)}, {Index: 4, Buffer: out}, {Index: 5, Buffer: oh}},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := f32s(out)
		for sg := range 2 {
			F, O := f[sg*256:], got[sg*512:]
			check := func(what string, g, w float32) {
				t.Helper()
				if math.Float32bits(g) != math.Float32bits(w) {
					t.Fatalf("%v simdgroup %d: %s = %v, want %v", o, sg, what, g, w)
				}
			}
			a := block(F, 16, 3, 2, false)
			dm := mulAdd(a, block(F, 16, 5, 7, true), block(c[sg*64:], 8, 0, 0, false))
			want := make([]float32, 128)
			for m := range 8 {
				for n := range 8 {
					want[(1+n)*10+1+m] = dm[m][n] // stored transposed, stride 10, origin (1, 1)
				}
			}
			for i, w := range want {
				check("stored d["+strconv.Itoa(i)+"]", O[i], w)
			}
			ah, bh := block(fhf[sg*256:], 16, 0, 0, false), block(fhf[sg*256+8:], 16, 0, 0, true)
			e := mulAdd(ah, bh, mat8{})
			hc := block(chf[sg*64:], 8, 0, 0, false)
			hm := mulAdd(ah, bh, hc)
			var filled, diag mat8
			for m := range 8 {
				for n := range 8 {
					filled[m][n] = 2.5
					if m == n {
						diag[m][n] = 1.5
					}
				}
			}
			mm := mulAdd(filled, diag, a)
			for m := range 8 {
				for n := range 8 {
					check("a·b (half)", O[128+8*m+n], e[m][n])
					check("filled·diag + a", O[192+8*m+n], mm[m][n])
					h := binary.LittleEndian.Uint16(oh.Bytes()[2*(sg*64+8*m+n):])
					if w := half.FromFloat32(hm[m][n]); h != w {
						t.Fatalf("%v simdgroup %d: half c + a·b [%d][%d] = %#x, want %#x", o, sg, m, n, h, w)
					}
				}
			}
			for lane := range 32 {
				for i := range 2 {
					m, n := appleElement(lane, i)
					check("thread_elements", O[256+2*lane+i], a[m][n])
				}
				j, k := (lane*7+3)%64, (lane*13+5)%64
				check("stored to threadgroup", O[320+lane], dm[j/8][j%8])
				check("stored to threadgroup", O[352+lane], dm[k/8][k%8])
			}
		}
	}
}

func TestSimdgroupMatrixNeedsAllLanes(t *testing.T) {
	d, l := testDevice(t)
	for _, o := range orders {
		err := run(t, d, o, device.Dispatch{
			Pipeline: pipe(t, l, "matrix_partial"), Groups: [3]int{1, 1, 1}, Threads: [3]int{32, 1, 1},
			Buffers: []device.Binding{{Index: 0, Buffer: zeroBuffer(t, d, 256)}, {Index: 1, Buffer: zeroBuffer(t, d, 256)}},
		})
		want := "matrix.metal:" + strconv.Itoa(lineOf(t, "matrix.metal", "MARK partial"))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "all 32 lanes") {
			t.Fatalf("%v: %v, want an error at %s", o, err, want)
		}
	}
}
