//go:build linux

package shaders

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/cpu/attention"
	"nibble/engine/ggml"
	"nibble/engine/half"
	"nibble/engine/kv"
	"nibble/engine/parallel"
	"nibble/metal/encoder"
	"nibble/metal/internal/emulator"
)

// Attention sinks (attn_sinks): kernel_attn_merge_f32 for decode (every
// cache format) and kernel_attn_prefill_{q4,q8,f16}, through the encoder.
//
// The twin is engine/cpu/attention with the same sinks on the same cache.
// A second reference does not share its code: the result without sinks
// times each head's (and row's) share of the softmax that the sink leaves,
// Σ_t e^(s_t) / (Σ_t e^(s_t) + e^(sink_h)), from float64 scores s_t over
// the keys the row sees (dequantized codes, the residual window's f16 ring,
// the staged new rows), soft-capped where the case caps. A sink adds a zero
// value, so that share is all it changes.

// sinkScale is Σe^s / (Σe^s + e^sink) for the scores s, in float64.
func sinkScale(scores []float64, sink float64) float64 {
	m := sink
	for _, s := range scores {
		m = math.Max(m, s)
	}
	var l float64
	for _, s := range scores {
		l += math.Exp(s - m)
	}
	return l / (l + math.Exp(sink-m))
}

// capScore is the case's soft-cap of a score (none when c.softcap is 0).
func capScore(c attnCase, s float64) float64 {
	if c.softcap > 0 {
		return float64(c.softcap) * math.Tanh(s/float64(c.softcap))
	}
	return s
}

// cacheKey is K at (kvh, pos) as attention reads it, in the original space:
// from the residual window's ring at or after tail, else from its codes.
func cacheKey(key []float32, lv *kv.LayerView, kvh, pos, tail int) {
	if pos >= tail {
		ringKey(key, lv, kvh, pos)
		return
	}
	lv.Dequantize(key, &lv.K, kvh, pos)
}

// stagedKey is a new K row of prefill as the kernels meet it: transformed
// as the cache stores K, rounded through f16, then back in the original
// space.
func stagedKey(key, k []float32, lv *kv.LayerView, kvh int) {
	x := lv.TransformKey(make([]float32, len(k)), k, kvh)
	for i, v := range x {
		key[i] = half.ToFloat32(half.FromFloat32(v))
	}
	if lv.Rot != nil {
		lv.Rot.Invert(key, key)
	}
	if lv.Lambda != nil {
		for i := range key {
			key[i] *= lv.Lambda[kvh*lv.HeadDim+i]
		}
	}
}

func dot64(a, b []float32) float64 {
	var s float64
	for i, x := range a {
		s += float64(x) * float64(b[i])
	}
	return s
}

// sinkLogits are one logit per query head near its largest scores (the
// largest of each row, averaged over the rows: scores[row][h]), so that
// each head's sink takes from a little to most of its softmax.
func sinkLogits(r *rand.Rand, scores [][][]float64) []float32 {
	s := make([]float32, len(scores[0]))
	for h := range s {
		var top float64
		for _, row := range scores {
			m := math.Inf(-1)
			for _, x := range row[h] {
				m = math.Max(m, x)
			}
			top += m / float64(len(scores))
		}
		s[h] = float32(top - 5 + 7*r.Float64())
	}
	return s
}

// sinksWeight is sinks as a device weight, the one F32 row a model file
// holds (attn_sinks).
func sinksWeight(t *testing.T, d *emulator.Device, sinks []float32) *encoder.Weight {
	return &encoder.Weight{Region: region(t, d, f32Bytes(sinks)), Type: ggml.F32, Rows: 1, Cols: len(sinks)}
}

// scaleHeads multiplies each head's block of each row of out by scale[row][h].
func scaleHeads(out []float32, scale [][]float64, heads, d int) []float32 {
	want := make([]float32, len(out))
	for i := range out {
		row, h := i/(heads*d), i%(heads*d)/d
		want[i] = float32(float64(out[i]) * scale[row][h])
	}
	return want
}

// farFrom fails unless got and ref differ by more than 20 tolerances: the
// sinks' effect is large enough that kernels without it fail the test.
func farFrom(t *testing.T, got, ref []float32) {
	t.Helper()
	var scale, diff float64
	for i, v := range got {
		scale = math.Max(scale, math.Abs(float64(v)))
		diff = math.Max(diff, math.Abs(float64(v-ref[i])))
	}
	if !(diff > 20*attnDecodeTol*scale) {
		t.Fatalf("the sinks change the output by %.2g of max|out| only: the test would not see them missing", diff/scale)
	}
}

// Decode with sinks: q4, q8 and f16 caches, one split and many, GQA 1 to
// 8 (and 12: two threadgroups of a group), the residual window's ring, a
// sliding window, a sliding-window ring (gpt-oss's local layers keep 128
// positions) and a soft-cap. Tolerance: attnDecodeTol of max|out|.
func TestAttnSinksDecode(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(61, 62))
	cases := []attnCase{
		{typ: kv.Q4, gs: 32, d: 64, kvHeads: 2, g: 4, n: 1000, smooth: true, rot: true},
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 1, g: 8, n: 40},
		{typ: kv.Q4, gs: 64, d: 64, kvHeads: 1, g: 12, n: 300, window: 128, residual: 64},
		{typ: kv.Q8, gs: 32, d: 64, kvHeads: 2, g: 2, n: 600, smooth: true, residual: 32},
		{typ: kv.Q8, gs: 32, d: 128, kvHeads: 2, g: 1, n: 300, window: 128, ring: true},
		{typ: kv.F16, d: 64, kvHeads: 2, g: 4, n: 2000},
		{typ: kv.F16, d: 64, kvHeads: 1, g: 8, n: 1},
		{typ: kv.F16, d: 128, kvHeads: 2, g: 2, n: 200, window: 128, ring: true},
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 2, n: 150, smooth: true, rot: true, residual: 64, softcap: 50, qmul: 10},
	}
	for _, c := range cases {
		ctx := c.n + 3
		f := newAttnFixture(t, d, r, c, ctx, c.n)
		p := c.params()
		width := p.Heads * p.HeadDim
		q := c.query(r, 1)
		plain := make([]float32, width)
		pool := parallel.NewPool(2)
		ws := attention.NewWorkspace(p, ctx, 1, 2, nil)
		if err := attention.Decode(pool, ws, plain, q, f.cache, 0, c.n, p); err != nil {
			t.Fatal(err)
		}
		pool.Close()
		lv := f.cache.Layer(0)
		lo := 0
		if c.window > 0 {
			lo = max(0, c.n-c.window)
		}
		tail := lv.TailStart(lo, c.n)
		scale := [][]float64{make([]float64, p.Heads)}
		key := make([]float32, c.d)
		scores := make([][]float64, p.Heads)
		for pos := lo; pos < c.n; pos++ {
			for kvh := range c.kvHeads {
				cacheKey(key, lv, kvh, pos, tail)
				for j := range c.g {
					h := kvh*c.g + j
					s := dot64(q[h*c.d:(h+1)*c.d], key) * float64(p.Scale)
					scores[h] = append(scores[h], capScore(c, s))
				}
			}
		}
		sinks := sinkLogits(r, [][][]float64{scores})
		for h := range p.Heads {
			scale[0][h] = sinkScale(scores[h], float64(sinks[h]))
		}
		want := scaleHeads(plain, scale, p.Heads, p.HeadDim)
		twin := make([]float32, width)
		ps := p
		ps.Sinks = sinks
		pool = parallel.NewPool(2)
		if err := attention.Decode(pool, ws, twin, q, f.cache, 0, c.n, ps); err != nil {
			t.Fatal(err)
		}
		pool.Close()
		a := backendAttention(p)
		a.Sinks = sinksWeight(t, d, sinks)
		t.Run(fmt.Sprintf("effect_%v", c), func(t *testing.T) { farFrom(t, want, plain) })
		for _, k := range attnKernels {
			for _, o := range orders {
				t.Run(fmt.Sprintf("%v_%v%s", c, o, k.suffix), func(t *testing.T) {
					enc := encoder.New(d, l)
					defer enc.Close()
					enc.SetAttnKernel(k.kernel)
					out := region(t, d, make([]byte, 4*width))
					wsr := region(t, d, make([]byte, encoder.WorkspaceBytes(f.layer.Cfg, p.Heads, 1)))
					enc.AttendDecode(out, region(t, d, f32Bytes(q)), &f.layer, c.n, a, wsr)
					runEncoded(t, d, o, enc)
					attnCompare(t, "out against the CPU", f32s(out.Buf.Bytes()), twin, p.HeadDim, k.scale*attnDecodeTol)
					attnCompare(t, "out against float64 shares", f32s(out.Buf.Bytes()), want, p.HeadDim, k.scale*attnDecodeTol)
				})
			}
		}
	}
}

// Prefill with sinks: q4, q8 and f16 caches, rows that see the cached
// prefix (codes and the residual window's ring) and the new rows, a first
// batch (no prefix), a sliding window and its ring, a soft-cap.
// Tolerance: attnDecodeTol of max|out|.
func TestAttnSinksPrefill(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(63, 64))
	cases := []attnCase{
		{typ: kv.Q4, gs: 32, d: 64, kvHeads: 2, g: 4, n: 100, rows: 20, smooth: true, rot: true, residual: 32},
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 1, g: 8, n: 0, rows: 33},
		{typ: kv.Q8, gs: 64, d: 64, kvHeads: 2, g: 2, n: 200, rows: 9, window: 128, ring: true},
		{typ: kv.F16, d: 64, kvHeads: 1, g: 8, n: 150, rows: 30, window: 128},
		{typ: kv.F16, d: 128, kvHeads: 2, g: 1, n: 10, rows: 5, softcap: 50, qmul: 10},
	}
	for _, c := range cases {
		ctx := c.n + c.rows + 1
		f := newAttnFixture(t, d, r, c, ctx, c.n)
		p := c.params()
		qw, kw := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
		q := c.query(r, c.rows)
		k := attnRows(r, c.rows, p.KVHeads, p.HeadDim, true)
		v := attnRows(r, c.rows, p.KVHeads, p.HeadDim, false)
		plain := make([]float32, c.rows*qw)
		pool := parallel.NewPool(2)
		ws := attention.NewWorkspace(p, ctx, c.rows, 2, nil)
		if err := attention.Prefill(pool, ws, plain, q, k, v, c.rows, f.cache, 0, c.n, p); err != nil {
			t.Fatal(err)
		}
		pool.Close()
		lv := f.cache.Layer(0)
		key := make([]float32, c.d)
		// staged[(row·kvHeads + kvh)·D:] is new row row's key.
		staged := make([]float32, c.rows*kw)
		for row := range c.rows {
			for kvh := range c.kvHeads {
				o := (row*c.kvHeads + kvh) * c.d
				stagedKey(staged[o:o+c.d], k[o:o+c.d], lv, kvh)
			}
		}
		rowScores := make([][][]float64, c.rows)
		for row := range c.rows {
			pos := c.n + row
			lo := 0
			if c.window > 0 {
				lo = max(0, pos+1-c.window)
			}
			scores := make([][]float64, p.Heads)
			add := func(kvh int, key []float32) {
				for j := range c.g {
					h := kvh*c.g + j
					s := dot64(q[row*qw+h*c.d:row*qw+(h+1)*c.d], key) * float64(p.Scale)
					scores[h] = append(scores[h], capScore(c, s))
				}
			}
			tail := c.n
			if lo < c.n {
				tail = lv.TailStart(lo, c.n)
			}
			for t := lo; t < c.n; t++ {
				for kvh := range c.kvHeads {
					cacheKey(key, lv, kvh, t, tail)
					add(kvh, key)
				}
			}
			for j := max(lo, c.n) - c.n; j <= row; j++ {
				for kvh := range c.kvHeads {
					add(kvh, staged[(j*c.kvHeads+kvh)*c.d:(j*c.kvHeads+kvh+1)*c.d])
				}
			}
			rowScores[row] = scores
		}
		sinks := sinkLogits(r, rowScores)
		scale := make([][]float64, c.rows)
		for row, scores := range rowScores {
			scale[row] = make([]float64, p.Heads)
			for h := range p.Heads {
				scale[row][h] = sinkScale(scores[h], float64(sinks[h]))
			}
		}
		want := scaleHeads(plain, scale, p.Heads, p.HeadDim)
		twin := make([]float32, c.rows*qw)
		ps := p
		ps.Sinks = sinks
		pool = parallel.NewPool(2)
		if err := attention.Prefill(pool, ws, twin, q, k, v, c.rows, f.cache, 0, c.n, ps); err != nil {
			t.Fatal(err)
		}
		pool.Close()
		a := backendAttention(p)
		a.Sinks = sinksWeight(t, d, sinks)
		t.Run(fmt.Sprintf("effect_%v", c), func(t *testing.T) { farFrom(t, want, plain) })
		for _, o := range orders {
			t.Run(fmt.Sprintf("%v_%v", c, o), func(t *testing.T) {
				enc := encoder.New(d, l)
				defer enc.Close()
				out := region(t, d, make([]byte, 4*c.rows*qw))
				wsr := region(t, d, make([]byte, encoder.WorkspaceBytes(f.layer.Cfg, p.Heads, c.rows)))
				enc.AttendPrefill(out, region(t, d, f32Bytes(q)), region(t, d, f32Bytes(k)), region(t, d, f32Bytes(v)),
					&f.layer, c.n, c.rows, a, wsr)
				runEncoded(t, d, o, enc)
				attnCompare(t, "out against the CPU", f32s(out.Buf.Bytes()), twin, qw, attnDecodeTol)
				attnCompare(t, "out against float64 shares", f32s(out.Buf.Bytes()), want, qw, attnDecodeTol)
			})
		}
	}
}

// Sinks the kernels cannot read are an encoding error, not a read past a
// buffer: another type, another count than the query heads, a weight of
// another backend.
func TestAttnSinksRefused(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(65, 66))
	c := attnCase{typ: kv.F16, d: 64, kvHeads: 1, g: 4, n: 8}
	f := newAttnFixture(t, d, r, c, 16, c.n)
	p := c.params()
	buf := region(t, d, make([]byte, 4*p.Heads*p.HeadDim*8))
	wsr := region(t, d, make([]byte, encoder.WorkspaceBytes(f.layer.Cfg, p.Heads, 8)))
	for _, s := range []backend.Weight{
		&encoder.Weight{Region: buf, Type: ggml.F16, Rows: 1, Cols: p.Heads},
		&encoder.Weight{Region: buf, Type: ggml.F32, Rows: 1, Cols: p.Heads + 1},
		otherWeight{},
	} {
		for _, prefill := range []bool{false, true} {
			enc := encoder.New(d, l)
			a := backendAttention(p)
			a.Sinks = s
			if prefill {
				enc.AttendPrefill(buf, buf, buf, buf, &f.layer, c.n, 2, a, wsr)
			} else {
				enc.AttendDecode(buf, buf, &f.layer, c.n, a, wsr)
			}
			if err := enc.Err(); err == nil {
				t.Errorf("sinks %#v (prefill %v): no error", s.Desc(), prefill)
			} else {
				t.Log(err)
			}
			enc.Close()
		}
	}
}

type otherWeight struct{}

func (otherWeight) Desc() backend.WeightDesc {
	return backend.WeightDesc{Type: ggml.F32, Rows: 1, Cols: 4}
}
