package backendtest

import (
	"fmt"
	"math"
	"strings"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/engine/quant"
)

// dequantized is the float64 value of every element of a rows×cols tensor
// of type t: the reference for get_rows and matmul.
func (h *harness) dequantized(t ggml.Type, rows, cols int, data []byte) []float64 {
	h.t.Helper()
	f := make([]float32, rows*cols)
	if err := quant.Dequantize(t, f, data); err != nil {
		h.t.Fatal(err)
	}
	out := make([]float64, len(f))
	for i, v := range f {
		out[i] = float64(v)
	}
	return out
}

// Embed (get_rows) of every weight type: rows picked in any order, repeated,
// first and last, against the dequantized table, read at an offset too.
func testEmbed(h *harness) {
	for _, typ := range ggmltest.WeightTypes {
		for _, cols := range []int{256, 512} {
			const vocab = 37
			data := ggmltest.RandomWeights(h.rng, typ, vocab, cols, 1)
			table := h.weight("token_embd", typ, vocab, cols, data)
			want := h.dequantized(typ, vocab, cols, data)
			tokens := []int32{vocab - 1, 0, 5, 5, int32(h.rng.IntN(vocab)), 17}
			dst := h.b.Alloc(len(tokens) * cols)
			h.b.Embed(dst, table, tokens)
			got := h.read(dst, 0, len(tokens)*cols)
			for i, tok := range tokens {
				row := want[int(tok)*cols : int(tok+1)*cols]
				closeTo(h.t, fmt.Sprintf("%v cols %d: row %d (token %d)", typ, cols, i, tok), got[i*cols:(i+1)*cols], row, 0, math.Ldexp(maxAbs(row), -20))
			}
			tail := make([]float32, cols-3)
			h.b.Read(tail, dst, 2*cols+3)
			closeTo(h.t, fmt.Sprintf("%v: Read at an offset", typ), tail, want[5*cols+3:6*cols], 0, math.Ldexp(maxAbs(want[5*cols:6*cols]), -20))
			h.b.Free(dst)
		}
	}
}

// MapWeights refuses descriptors whose bytes are not in the region.
func testMapWeights(h *harness) {
	region := make([]byte, 1024)
	ok := backend.WeightDesc{Name: "ok", Type: ggml.F32, Rows: 2, Cols: 8, Offset: 64}
	for _, bad := range []backend.WeightDesc{
		{Name: "past", Type: ggml.F32, Rows: 2, Cols: 8, Offset: 1024 - 60},
		{Name: "negative", Type: ggml.F32, Rows: 1, Cols: 8, Offset: -32},
		{Name: "beyond", Type: ggml.Q8_0, Rows: 1, Cols: 32, Offset: 4096},
	} {
		m, err := h.b.MapWeights(region, []backend.WeightDesc{ok, bad})
		if err == nil {
			m.Close()
			h.t.Errorf("MapWeights accepted %+v in a region of %d bytes", bad, len(region))
		} else if !strings.Contains(err.Error(), bad.Name) {
			h.t.Errorf("%+v: error %q does not name the tensor", bad, err)
		}
	}
}

// matmulTolerance is c_T of the package comment: the error scale of the
// activation rounding a backend may do for weights of type t, and whether it
// is per element relative (‖w∘x‖₂) or absolute in ‖x‖∞ (‖w‖₂·‖x‖∞).
func matmulTolerance(t ggml.Type) (c float64, relative bool) {
	switch t {
	case ggml.F32:
		return 0, true
	case ggml.F16:
		return 2e-3, true
	case ggml.BF16:
		return 1.4e-2, true
	}
	return 1.4e-2, false
}

// MatMul of every weight type, mat-vec (one row) and mat-mat (prefill
// batches), output rows that are not a multiple of any kernel's tile.
func testMatMul(h *harness) {
	worst := map[ggml.Type]float64{}
	for _, typ := range ggmltest.WeightTypes {
		colsList := []int{96, 256}
		if typ.BlockSize() == ggml.QK_K {
			colsList = []int{256, 768}
		}
		for _, cols := range colsList {
			const outRows = 75
			data := ggmltest.RandomWeights(h.rng, typ, outRows, cols, 0.5)
			w := h.weight("w", typ, outRows, cols, data)
			wf := h.dequantized(typ, outRows, cols, data)
			for _, batch := range []int{1, 2, 7, 33} {
				xs := h.normals(batch*cols, 1)
				x := h.upload(xs, cols)
				dst := h.b.Alloc(batch * outRows)
				h.b.MatMul(dst, w, x, batch)
				got := h.read(dst, 0, batch*outRows)
				if again := h.read(x, 0, len(xs)); !equal(again, xs) {
					h.t.Fatalf("%v: MatMul changed its input", typ)
				}
				c, relative := matmulTolerance(typ)
				for r := 0; r < batch; r++ {
					xr := xs[r*cols : (r+1)*cols]
					xInf := maxAbs(xr)
					for i := 0; i < outRows; i++ {
						var want, sumAbs, wx2, w2 float64
						for j, wij := range wf[i*cols : (i+1)*cols] {
							p := wij * float64(xr[j])
							want += p
							sumAbs += math.Abs(p)
							wx2 += p * p
							w2 += wij * wij
						}
						tol := 1e-5*sumAbs + 1e-30
						if relative {
							tol += c * math.Sqrt(wx2)
						} else {
							tol += c*math.Sqrt(w2)*xInf + 6e-4*sumAbs
						}
						d := math.Abs(float64(got[r*outRows+i]) - want)
						worst[typ] = math.Max(worst[typ], d/tol)
						if !(d <= tol) {
							h.t.Fatalf("%v %d×%d batch %d: row %d output %d is %g, want %g (|Δ| %.3g > %.3g)",
								typ, outRows, cols, batch, r, i, got[r*outRows+i], want, d, tol)
						}
					}
				}
				h.b.Free(x)
				h.b.Free(dst)
			}
		}
	}
	var line strings.Builder
	for _, typ := range ggmltest.WeightTypes {
		fmt.Fprintf(&line, " %v %.2f", typ, worst[typ])
	}
	h.t.Logf("largest |Δ|/tolerance:%s", line.String())
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func testRMSNorm(h *harness) {
	for _, typ := range []ggml.Type{ggml.F32, ggml.F16} {
		for _, c := range []struct {
			n, rows int
			eps     float32
		}{{64, 1, 1e-5}, {2048, 5, 1e-6}, {96, 3, 1e-5}} {
			g := h.normals(c.n, 1)
			gdata := f32Bytes(g)
			if typ == ggml.F16 {
				gdata = ggmltest.RandomWeights(h.rng, ggml.F16, 1, c.n, 1)
			}
			gw := h.dequantized(typ, 1, c.n, gdata)
			w := h.weight("norm", typ, 1, c.n, gdata)
			xs := h.normals(c.rows*c.n, 3)
			// A row far from unit scale, and a zero row: eps alone keeps it finite.
			for i := 0; i < c.n; i++ {
				xs[i] *= 100
				if c.rows > 2 {
					xs[2*c.n+i] = 0
				}
			}
			x := h.upload(xs, c.n)
			dst := h.b.Alloc(len(xs))
			h.b.RMSNorm(dst, x, w, c.eps, c.rows)
			got := h.read(dst, 0, len(xs))
			for r := 0; r < c.rows; r++ {
				row := xs[r*c.n : (r+1)*c.n]
				var ss float64
				for _, v := range row {
					ss += float64(v) * float64(v)
				}
				inv := 1 / math.Sqrt(ss/float64(c.n)+float64(c.eps))
				want := make([]float64, c.n)
				for i, v := range row {
					want[i] = float64(v) * inv * gw[i]
				}
				closeTo(h.t, fmt.Sprintf("rms_norm %v n %d row %d", typ, c.n, r), got[r*c.n:(r+1)*c.n], want, 1e-5, 1e-6*maxAbs(want))
			}
			// In place, as the forward pass runs it on the last row.
			h.b.RMSNorm(x, x, w, c.eps, c.rows)
			if inPlace := h.read(x, 0, len(xs)); !equal(inPlace, got) {
				h.t.Fatalf("rms_norm %v n %d: in place differs from out of place", typ, c.n)
			}
		}
	}
}

func testAddBias(h *harness) {
	const n, rows = 96, 4
	bias := h.normals(n, 1)
	w := h.weight("bias", ggml.F32, 1, n, f32Bytes(bias))
	xs := h.normals(rows*n, 1)
	x := h.upload(xs, n)
	h.b.AddBias(x, w, rows)
	got := h.read(x, 0, len(xs))
	want := make([]float64, len(xs))
	for i := range want {
		want[i] = float64(xs[i] + bias[i%n]) // one f32 add: exact
	}
	closeTo(h.t, "add_bias", got, want, 0, 0)
}

func testSwiGLU(h *harness) {
	for _, n := range []int{1, 1000, 8195} {
		gs, us := h.normals(n, 4), h.normals(n, 1)
		gs[0] = -30 // silu underflows to -0, not NaN
		g, u := h.upload(gs, n), h.upload(us, n)
		dst := h.b.Alloc(n)
		h.b.SwiGLU(dst, g, u, n)
		got := h.read(dst, 0, n)
		want := make([]float64, n)
		for i := range want {
			x := float64(gs[i])
			want[i] = x / (1 + math.Exp(-x)) * float64(us[i])
		}
		closeTo(h.t, fmt.Sprintf("swiglu n %d", n), got, want, 1e-5, 1e-7)
		// In place on gate, as the forward pass runs it.
		h.b.SwiGLU(g, g, u, n)
		if inPlace := h.read(g, 0, n); !equal(inPlace, got) {
			h.t.Fatalf("swiglu n %d: in place differs", n)
		}
	}
}

// Add, Copy (at offsets, leaving the rest) and Read (at offsets) are exact.
func testAddCopyRead(h *harness) {
	const n = 1000
	as, bs := h.normals(n, 1), h.normals(n, 1)
	a, b := h.upload(as, n), h.upload(bs, n)
	h.b.Add(a, b, n-7)
	got := h.read(a, 0, n)
	want := make([]float64, n)
	for i := range want {
		want[i] = float64(as[i])
		if i < n-7 {
			want[i] = float64(as[i] + bs[i])
		}
	}
	closeTo(h.t, "add", got, want, 0, 0)
	h.b.Copy(a, 100, b, 500, 300)
	got = h.read(a, 0, n)
	for i := 100; i < 400; i++ {
		want[i] = float64(bs[400+i])
	}
	closeTo(h.t, "copy", got, want, 0, 0)
	part := make([]float32, 10)
	h.b.Read(part, a, 395)
	closeTo(h.t, "read at an offset", part, want[395:405], 0, 0)
}

// Argmax picks what sample.Greedy picks: the first maximum, never NaN, 0
// when nothing is above -Inf.
func testArgmax(h *harness) {
	const n = 50000
	rows := 6
	xs := h.normals(rows*n, 1)
	row := func(r int) []float32 { return xs[r*n : (r+1)*n] }
	row(0)[n-1] = 100                // last
	row(1)[7], row(1)[9000] = 50, 50 // tie: the first
	row(2)[0], row(2)[3] = float32(math.NaN()), 60
	row(2)[4] = float32(math.NaN())
	for i := range row(3) {
		row(3)[i] = float32(math.Inf(-1))
	}
	for i := range row(4) {
		row(4)[i] = float32(math.NaN())
	}
	row(5)[12345] = float32(math.Inf(1))
	want := []float32{n - 1, 7, 3, 0, 0, 12345}
	x := h.upload(xs, n)
	dst := h.b.Alloc(rows)
	h.b.Argmax(dst, x, rows, n)
	if got := h.read(dst, 0, rows); !equal(got, want) {
		h.t.Fatalf("argmax %v, want %v", got, want)
	}
	small := h.upload([]float32{-1, -3, 2.5, 2.5, -7, 0, 1, 2}, 4)
	h.b.Argmax(dst, small, 2, 4)
	if got := h.read(dst, 0, 2); !equal(got, []float32{2, 3}) {
		h.t.Fatalf("argmax of two 4-wide rows: %v, want [2 3]", got)
	}
}

// RoPE, adjacent pairs and NeoX halves, over head dims 64-256, partial
// rotation, rope_freqs divisors and a linear position scale, at positions up
// to 128K.
func testRoPE(h *harness) {
	pos := []int32{0, 1, 4095, 131071, 77}
	for _, c := range []struct {
		headDim, dims int
		base, scale   float32
		factors       bool
	}{{64, 64, 10000, 1, false}, {128, 128, 500000, 1, true}, {128, 64, 1e6, 0.25, false}, {256, 256, 10000, 1, true}, {80, 80, 10000, 1, false}} {
		for _, neox := range []bool{false, true} {
			r := &backend.RoPE{Neox: neox, Dims: c.dims, Base: c.base, PosScale: c.scale}
			if c.factors {
				r.FreqFactors = make([]float32, c.dims/2)
				for i := range r.FreqFactors {
					r.FreqFactors[i] = 1 + 7*h.rng.Float32()
				}
			}
			const heads = 3
			width := heads * c.headDim
			xs := h.normals(len(pos)*width, 1)
			x := h.upload(xs, width)
			h.b.RoPE(x, heads, c.headDim, len(pos), pos, r)
			got := h.read(x, 0, len(xs))
			half := c.dims / 2
			for row, p := range pos {
				want := make([]float64, width)
				for i := range want {
					want[i] = float64(xs[row*width+i])
				}
				for hd := 0; hd < heads; hd++ {
					v := want[hd*c.headDim:]
					for j := 0; j < half; j++ {
						theta := float64(p) * float64(c.scale) * math.Pow(float64(c.base), -2*float64(j)/float64(c.dims))
						if c.factors {
							theta /= float64(r.FreqFactors[j])
						}
						a, b := 2*j, 2*j+1
						if neox {
							a, b = j, j+half
						}
						s, co := math.Sincos(theta)
						v[a], v[b] = v[a]*co-v[b]*s, v[a]*s+v[b]*co
					}
				}
				tol := (4e-6 + 4*float64(p)*math.Ldexp(1, -23)) * maxAbs(want)
				closeTo(h.t, fmt.Sprintf("rope %+v neox=%v row %d (pos %d)", c, neox, row, p), got[row*width:(row+1)*width], want, 0, tol)
			}
		}
	}
}
