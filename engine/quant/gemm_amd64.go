//go:build amd64

package quant

import "golang.org/x/sys/cpu"

//go:noescape
func gemmQ4_0x16AVX512(w *byte, nb int, aq *int8, ad *float32, ac *int32, out *[gemmRows * gemmRows]float32)

//go:noescape
func packQ4_0GroupAVX(dst, w *byte, rb, nb int)

// hasGemmAVX512 reports whether the CPU and OS run the AVX-512 VNNI GEMM
// (x/sys/cpu's AVX-512 flags include the OS saving the ZMM state).
func hasGemmAVX512() bool {
	return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI
}

//go:noescape
func gemmQ4_0x16AMX(w *byte, nb int, aq *int8, ad *float32, out *[gemmRows * gemmRows]float32, cbuf *int32, cfg *byte)

//go:noescape
func packQ4_0GroupAMXAsm(dst, w *byte, rb, nb int)

var (
	gemmQ4_0AVX512 = gemmKernel{groupBytes: q4_0GroupBytes, pack: packQ4_0GroupSimd, tile: gemmTileQ4_0AVX512}
	gemmQ4_0AMX    = gemmKernel{groupBytes: q4_0AMXGroupBytes, pack: packQ4_0GroupAMX, tile: gemmTileQ4_0AMX}
)

// q4_0AMXBlockBytes is a packed block of the AMX kernel: 8×64 weight bytes
// (u-8, signed) and 16 fp16 scales.
const q4_0AMXBlockBytes = 8*64 + 32

func q4_0AMXGroupBytes(nb int) int { return nb * q4_0AMXBlockBytes }

// amxTileConfig is LDTILECFG's 64 bytes: palette 1; tile 0 (activations)
// 16 rows of 32 bytes, tile 1 (weights) 8 rows of 64, tiles 2 to 4 (sums)
// 16 rows of 64.
var amxTileConfig = func() (c [64]byte) {
	c[0] = 1
	for t, shape := range [][2]int{{16, 32}, {8, 64}, {16, 64}, {16, 64}, {16, 64}} {
		c[16+2*t] = byte(shape[1])
		c[48+t] = byte(shape[0])
	}
	return c
}()

func packQ4_0GroupAMX(dst, w []byte, rb, nb int) {
	if nb == 0 {
		return
	}
	_ = dst[q4_0AMXGroupBytes(nb)-1]
	_ = w[(gemmRows-1)*rb+nb*18-1]
	packQ4_0GroupAMXAsm(&dst[0], &w[0], rb, nb)
}

func gemmTileQ4_0AMX(packed []byte, nb int, a *acts, t int, s *gemmScratch) {
	if nb == 0 {
		clear(s.out[:])
		return
	}
	base := t * nb * gemmRows
	_ = packed[q4_0AMXGroupBytes(nb)-1]
	_, _ = a.tq[(base+nb*gemmRows)*32-1], a.td[base+nb*gemmRows-1]
	gemmQ4_0x16AMX(&packed[0], nb, &a.tq[base*32], &a.td[base], &s.out, &s.c[0], &amxTileConfig[0])
}

func packQ4_0GroupSimd(dst, w []byte, rb, nb int) {
	if nb == 0 {
		return
	}
	_ = dst[q4_0GroupBytes(nb)-1]
	_ = w[(gemmRows-1)*rb+nb*18-1]
	packQ4_0GroupAVX(&dst[0], &w[0], rb, nb)
}

func gemmTileQ4_0AVX512(packed []byte, nb int, a *acts, t int, s *gemmScratch) {
	if nb == 0 {
		clear(s.out[:])
		return
	}
	base := t * nb * gemmRows
	_ = packed[q4_0GroupBytes(nb)-1]
	_, _, _ = a.tq[(base+nb*gemmRows)*32-1], a.td[base+nb*gemmRows-1], a.tc[base+nb*gemmRows-1]
	gemmQ4_0x16AVX512(&packed[0], nb, &a.tq[base*32], &a.td[base], &a.tc[base], &s.out)
}
