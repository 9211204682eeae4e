package backendtest

import (
	"encoding/binary"
	"math"

	"nibble/engine/half"
	"nibble/engine/kv"
)

// planeLayout is where a (kv head, position) slot's codes and metadata lie
// in a plane: docs/ARCHITECTURE.md, "KV cache format".
type planeLayout struct {
	cfg       kv.Config
	codeBytes int // all codes; metadata follows
}

func layoutOf(cfg kv.Config) planeLayout {
	elems := cfg.KVHeads * cfg.Ctx * cfg.HeadDim
	l := planeLayout{cfg: cfg}
	switch cfg.Type {
	case kv.F16:
		l.codeBytes = 2 * elems
	case kv.Q8:
		l.codeBytes = elems
	case kv.Q4:
		l.codeBytes = elems / 2
	}
	return l
}

func (l planeLayout) bytes() int {
	return l.cfg.KVHeads * l.cfg.Ctx * kv.BytesPerTokenHead(l.cfg.Type, l.cfg.HeadDim, l.cfg.GroupSize)
}

func (l planeLayout) groups() int { return l.cfg.HeadDim / l.cfg.GroupSize }

// code is element i's code (f16: the half's bits) in slot.
func (l planeLayout) code(p []byte, slot, i int) uint32 {
	d := l.cfg.HeadDim
	switch l.cfg.Type {
	case kv.F16:
		return uint32(binary.LittleEndian.Uint16(p[2*(slot*d+i):]))
	case kv.Q8:
		return uint32(p[slot*d+i])
	}
	word := binary.LittleEndian.Uint32(p[4*(slot*d/8+i/8):])
	return word >> (4 * (i % 8)) & 15
}

func (l planeLayout) setCode(p []byte, slot, i int, c uint32) {
	d := l.cfg.HeadDim
	switch l.cfg.Type {
	case kv.F16:
		binary.LittleEndian.PutUint16(p[2*(slot*d+i):], uint16(c))
	case kv.Q8:
		p[slot*d+i] = byte(c)
	case kv.Q4:
		at := 4 * (slot*d/8 + i/8)
		word := binary.LittleEndian.Uint32(p[at:])
		word = word&^(15<<(4*(i%8))) | c<<(4*(i%8))
		binary.LittleEndian.PutUint32(p[at:], word)
	}
}

// meta is group g's {scale, bias} halves in slot.
func (l planeLayout) meta(p []byte, slot, g int) (scale, bias uint16) {
	at := l.codeBytes + 4*(slot*l.groups()+g)
	return binary.LittleEndian.Uint16(p[at:]), binary.LittleEndian.Uint16(p[at+2:])
}

func (l planeLayout) setMeta(p []byte, slot, g int, scale, bias uint16) {
	at := l.codeBytes + 4*(slot*l.groups()+g)
	binary.LittleEndian.PutUint16(p[at:], scale)
	binary.LittleEndian.PutUint16(p[at+2:], bias)
}

// value is element i of slot as stored: scale·q + bias, or the half.
func (l planeLayout) value(p []byte, slot, i int) float64 {
	c := l.code(p, slot, i)
	if l.cfg.Type == kv.F16 {
		return float64(half.ToFloat32(uint16(c)))
	}
	s, b := l.meta(p, slot, i/l.cfg.GroupSize)
	return float64(half.ToFloat32(s))*float64(c) + float64(half.ToFloat32(b))
}

// decode writes every element of slot, as stored, into dst (HeadDim).
func (l planeLayout) decode(p []byte, slot int, dst []float64) {
	d := l.cfg.HeadDim
	if l.cfg.Type == kv.F16 {
		for i := range dst[:d] {
			dst[i] = float64(half.ToFloat32(binary.LittleEndian.Uint16(p[2*(slot*d+i):])))
		}
		return
	}
	gs := l.cfg.GroupSize
	for g := 0; g < l.groups(); g++ {
		s, b := l.meta(p, slot, g)
		scale, bias := float64(half.ToFloat32(s)), float64(half.ToFloat32(b))
		for i := g * gs; i < (g+1)*gs; i++ {
			dst[i] = scale*float64(l.code(p, slot, i)) + bias
		}
	}
}

// step is the quantization step of element i of slot (f16: one ulp).
func (l planeLayout) step(p []byte, slot, i int) float64 {
	if l.cfg.Type == kv.F16 {
		v := math.Abs(l.value(p, slot, i))
		if v < math.Ldexp(1, -14) { // subnormal halves
			return math.Ldexp(1, -24)
		}
		_, exp := math.Frexp(v)
		return math.Ldexp(1, exp-11)
	}
	s, _ := l.meta(p, slot, i/l.cfg.GroupSize)
	return float64(half.ToFloat32(s))
}

// store writes x (one head vector) into slot as the format defines:
// per group scale = max((max-min)/L, 2^-14), bias = min, both rounded to fp16
// first, then q = clamp(rint((x-bias)/scale), 0, L).
func (l planeLayout) store(p []byte, slot int, x []float32) {
	if l.cfg.Type == kv.F16 {
		for i, v := range x {
			l.setCode(p, slot, i, uint32(half.FromFloat32(v)))
		}
		return
	}
	levels := float32(15)
	if l.cfg.Type == kv.Q8 {
		levels = 255
	}
	gs := l.cfg.GroupSize
	for g := 0; g < l.groups(); g++ {
		xs := x[g*gs : (g+1)*gs]
		mn, mx := xs[0], xs[0]
		for _, v := range xs {
			mn, mx = min(mn, v), max(mx, v)
		}
		const maxHalf = 65504 // metadata saturates instead of storing Inf
		mn, mx = min(max(mn, -maxHalf), maxHalf), min(max(mx, -maxHalf), maxHalf)
		hs, hb := half.FromFloat32(min(max((mx-mn)/levels, 1.0/16384), maxHalf)), half.FromFloat32(mn)
		l.setMeta(p, slot, g, hs, hb)
		scale, bias := half.ToFloat32(hs), half.ToFloat32(hb)
		for i, v := range xs {
			q := float32(math.RoundToEven(float64((v - bias) / scale)))
			c := uint32(0)
			if q > 0 {
				c = uint32(min(q, levels))
			}
			l.setCode(p, slot, g*gs+i, c)
		}
	}
}

// keySpace is how a cache of cfg with smoothing factors lambda (nil: none)
// stores K and meets queries (docs/ARCHITECTURE.md, "Channel smoothing" and
// "Rotation").
type keySpace struct {
	cfg    kv.Config
	lambda []float32
	rot    *kv.Rotation
}

func newKeySpace(cfg kv.Config, lambda []float32) (keySpace, error) {
	ks := keySpace{cfg: cfg}
	if cfg.Smooths() {
		ks.lambda = lambda
	}
	if cfg.Rotate {
		var err error
		if ks.rot, err = kv.NewRotation(cfg.HeadDim); err != nil {
			return ks, err
		}
	}
	return ks, nil
}

// key is K head vector k of kv head h as stored: k/λ, then rotated.
func (ks keySpace) key(k []float32, h int) []float32 { return ks.transform(k, h, true) }

// query is the query's partner transform, q∘λ then rotated, so that it meets
// stored keys with the original dot product.
func (ks keySpace) query(q []float32, h int) []float32 { return ks.transform(q, h, false) }

func (ks keySpace) transform(x []float32, h int, divide bool) []float32 {
	d := ks.cfg.HeadDim
	out := append([]float32(nil), x[:d]...)
	if ks.lambda != nil {
		for i := range out {
			if divide {
				out[i] /= ks.lambda[h*d+i]
			} else {
				out[i] *= ks.lambda[h*d+i]
			}
		}
	}
	if ks.rot != nil {
		ks.rot.Apply(out, out)
	}
	return out
}
