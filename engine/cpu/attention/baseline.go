package attention

import (
	"fmt"

	"nibble/engine/fastmath"
	"nibble/engine/half"
	"nibble/engine/kv"
	"nibble/engine/parallel"
)

// DequantBuffers is what the dequantize-then-attend baseline materializes:
// f32 K and V for the whole context, one score row per query head, and
// the queries as the cache's K transform leaves them.
type DequantBuffers struct {
	ctx    int
	k, v   []float32 // [kv head][position][D]
	scores []float32 // [query head][position]
	q      []float32 // [query head][D]
}

// DequantBuffersBytes is the memory NewDequantBuffers allocates.
func DequantBuffersBytes(p Params, ctx int) int64 {
	return 4 * (int64(ctx)*(2*int64(p.KVHeads)*int64(p.HeadDim)+int64(p.Heads)) + int64(p.Heads)*int64(p.HeadDim))
}

// NewDequantBuffers allocates the baseline's buffers for up to ctx positions.
func NewDequantBuffers(p Params, ctx int) (*DequantBuffers, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	if ctx <= 0 || DequantBuffersBytes(p, ctx) > 1<<40 {
		return nil, fmt.Errorf("attention: baseline buffers for %d positions", ctx)
	}
	kvLen := ctx * p.KVHeads * p.HeadDim
	return &DequantBuffers{ctx: ctx, k: make([]float32, kvLen), v: make([]float32, kvLen), scores: make([]float32, ctx*p.Heads),
		q: make([]float32, p.Heads*p.HeadDim)}, nil
}

// DecodeDequantThenAttend is our unfused reference, a dequantize-then-attend
// baseline: dequantize K and V of the visible range to f32 buffers, then
// standard attention per query head (each head reads its kv head's f32 K and
// V, as after repeat_kv), softmax with a separate max pass. It stands for no
// particular library (mlx-lm, for one, runs quantized matmuls on the packed
// codes instead of materializing f32 K/V). Same inputs and output as Decode;
// for measurement.
func DecodeDequantThenAttend(pool *parallel.Pool, b *DequantBuffers, out, q []float32, c *kv.Cache, layer, n int, p Params) error {
	if err := p.validate(); err != nil {
		return err
	}
	if err := p.checkCache(c, layer); err != nil {
		return err
	}
	d, g := p.HeadDim, p.group()
	switch {
	case b == nil || n < 1 || n > b.ctx || n > c.Config().Ctx:
		return fmt.Errorf("attention baseline: %d positions outside the buffers", n)
	case len(q) < p.Heads*d || len(out) < p.Heads*d:
		return fmt.Errorf("attention baseline: q and out need %d floats", p.Heads*d)
	}
	lv := c.Layer(layer)
	lo := p.visible(n - 1)
	tail := lv.TailStart(lo, n)
	const chunk = 256
	chunks := (n - lo + chunk - 1) / chunk
	pool.For(p.KVHeads*chunks, 1, func(i0, i1 int) {
		for i := i0; i < i1; i++ {
			h, t0 := i/chunks, lo+i%chunks*chunk
			for t := t0; t < min(n, t0+chunk); t++ {
				row := (h*b.ctx + t) * d
				if t >= tail {
					unpackF16(b.k[row:row+d], lv.TailRow(&lv.K, h, t))
					unpackF16(b.v[row:row+d], lv.TailRow(&lv.V, h, t))
					continue
				}
				dequantRow(b.k[row:row+d], lv, &lv.K, h, t)
				dequantRow(b.v[row:row+d], lv, &lv.V, h, t)
			}
		}
	})
	pool.For(p.Heads, 1, func(h0, h1 int) {
		for h := h0; h < h1; h++ {
			kvh := h / g
			qh := lv.TransformQuery(b.q[h*d:(h+1)*d], q[h*d:(h+1)*d], kvh) // K is dequantized as stored
			s := b.scores[h*b.ctx+lo : h*b.ctx+n]
			m := negInf
			for i := range s {
				row := (kvh*b.ctx + lo + i) * d
				s[i] = kern.dot(qh, b.k[row:row+d]) * p.Scale
				m = max(m, s[i])
			}
			var sum float32
			if p.Sinks != nil {
				m = max(m, p.Sinks[h])
				sum = fastmath.Exp2((p.Sinks[h] - m) * log2e)
			}
			for i, x := range s {
				s[i] = fastmath.Exp2((x - m) * log2e)
				sum += s[i]
			}
			oh := out[h*d : (h+1)*d]
			clear(oh)
			for i, w := range s {
				row := (kvh*b.ctx + lo + i) * d
				kern.axpy(oh, w, b.v[row:row+d])
			}
			for e := range oh {
				oh[e] /= sum
			}
		}
	})
	return nil
}

// dequantRow writes value = scale·q + bias of (head, pos), converting each
// group's metadata once.
func dequantRow(dst []float32, lv *kv.LayerView, pl *kv.Plane, head, pos int) {
	d, gs := lv.HeadDim, lv.GroupSize
	slot := head*lv.Ctx + lv.Slot(pos)
	switch lv.Type {
	case kv.F16:
		for i, h := range pl.F16[slot*d : (slot+1)*d] {
			dst[i] = half.ToFloat32(h)
		}
	case kv.Q8:
		ng := d / gs
		meta := pl.Meta[slot*2*ng : (slot+1)*2*ng]
		codes := pl.Q8[slot*d : (slot+1)*d]
		for g := 0; g < ng; g++ {
			s, bias := half.ToFloat32(meta[2*g]), half.ToFloat32(meta[2*g+1])
			for i := g * gs; i < (g+1)*gs; i++ {
				dst[i] = s*float32(codes[i]) + bias
			}
		}
	case kv.Q4:
		ng := d / gs
		meta := pl.Meta[slot*2*ng : (slot+1)*2*ng]
		words := pl.Q4[slot*d/8 : (slot+1)*d/8]
		for g := 0; g < ng; g++ {
			s, bias := half.ToFloat32(meta[2*g]), half.ToFloat32(meta[2*g+1])
			for w := g * gs / 8; w < (g+1)*gs/8; w++ {
				x := words[w]
				o := dst[8*w : 8*w+8]
				for i := range o {
					o[i] = s*float32(x>>(4*i)&15) + bias
				}
			}
		}
	}
}
