package cpu

import "nibble/engine/fastmath"

// swiGLUGo is dst[i] = SiLU(gate[i])·up[i].
func swiGLUGo(dst, gate, up []float32) {
	gate, up = gate[:len(dst)], up[:len(dst)]
	for i := range dst {
		dst[i] = fastmath.SiLU(gate[i]) * up[i]
	}
}
