package synth

import "math"

// splitmix64 is a strong 64-bit mixer, used to derive independent seeds.
func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// nameSeed makes a tensor's stream depend on its name (FNV-1a), not on its
// position, so adding a tensor does not change the others.
func nameSeed(seed uint64, name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return splitmix64(seed ^ splitmix64(h))
}

// fillRow draws row r of a tensor. Each row has its own generator, so the
// result does not depend on how rows are spread over threads.
func fillRow(dst []float32, tensorSeed uint64, row int, d dist) {
	g := normalGen{state: splitmix64(tensorSeed ^ splitmix64(uint64(row)))}
	for i := range dst {
		// The ziggurat's fast path, written out so it inlines.
		g.state += 0x9E3779B97F4A7C15
		z := g.state
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		hz := int32((z ^ (z >> 31)) >> 32)
		iz := hz & (zigLayers - 1)
		var x float64
		if absInt32(hz) < zigK[iz] {
			x = float64(hz) * zigW[iz]
		} else {
			x = g.slow(hz, iz)
		}
		dst[i] = float32(d.mean + d.std*x)
	}
}

func absInt32(v int32) uint32 {
	m := v >> 31
	return uint32((v ^ m) - m) // MinInt32 maps to 1<<31, above every zigK
}

// normalGen draws N(0,1) samples with Marsaglia and Tsang's ziggurat over a
// SplitMix64 stream. It is inlined and allocation-free: generating a 1B
// model is dominated by drawing its numbers.
type normalGen struct{ state uint64 }

func (g *normalGen) u64() uint64 {
	g.state += 0x9E3779B97F4A7C15
	x := g.state
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// uniform is in (0, 1), never 0, so its log is finite.
func (g *normalGen) uniform() float64 { return (float64(g.u64()>>11) + 0.5) * (1.0 / (1 << 53)) }

const (
	zigLayers = 128
	zigR      = 3.442619855899      // start of the tail
	zigV      = 9.91256303526217e-3 // area of each layer
	zigScale  = 1 << 31             // int32 range
)

// Ziggurat tables: kn compares the raw int32 for the fast path, wn scales
// it to x, fn is the density at each layer edge.
var zigK [zigLayers]uint32
var zigW, zigF [zigLayers]float64

func init() {
	dn, tn := zigR, zigR
	q := zigV / math.Exp(-0.5*dn*dn)
	zigK[0] = uint32(dn / q * zigScale)
	zigK[1] = 0
	zigW[0] = q / zigScale
	zigW[zigLayers-1] = dn / zigScale
	zigF[0] = 1
	zigF[zigLayers-1] = math.Exp(-0.5 * dn * dn)
	for i := zigLayers - 2; i >= 1; i-- {
		dn = math.Sqrt(-2 * math.Log(zigV/dn+math.Exp(-0.5*dn*dn)))
		zigK[i+1] = uint32(dn / tn * zigScale)
		tn = dn
		zigF[i] = math.Exp(-0.5 * dn * dn)
		zigW[i] = dn / zigScale
	}
}

// next draws one sample.
func (g *normalGen) next() float64 {
	hz := int32(g.u64() >> 32)
	iz := hz & (zigLayers - 1)
	if absInt32(hz) < zigK[iz] {
		return float64(hz) * zigW[iz] // inside the layer's rectangle: about 99% of draws
	}
	return g.slow(hz, iz)
}

// slow handles a draw (hz, iz) outside its layer's rectangle.
func (g *normalGen) slow(hz, iz int32) float64 {
	for {
		x := float64(hz) * zigW[iz]
		if absInt32(hz) < zigK[iz] {
			return x
		}
		if iz == 0 { // the tail beyond zigR
			for {
				tx := -math.Log(g.uniform()) / zigR
				ty := -math.Log(g.uniform())
				if ty+ty >= tx*tx {
					if hz > 0 {
						return zigR + tx
					}
					return -zigR - tx
				}
			}
		}
		if zigF[iz]+g.uniform()*(zigF[iz-1]-zigF[iz]) < math.Exp(-0.5*x*x) {
			return x // in the wedge under the curve
		}
		hz = int32(g.u64() >> 32)
		iz = hz & (zigLayers - 1)
	}
}
