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

var gemmQ4_0AVX512 = gemmKernel{groupBytes: q4_0GroupBytes, pack: packQ4_0GroupSimd, tile: gemmTileQ4_0AVX512}

func packQ4_0GroupSimd(dst, w []byte, rb, nb int) {
	if nb == 0 {
		return
	}
	_ = dst[q4_0GroupBytes(nb)-1]
	_ = w[(gemmRows-1)*rb+nb*18-1]
	packQ4_0GroupAVX(&dst[0], &w[0], rb, nb)
}

func gemmTileQ4_0AVX512(packed []byte, nb int, a *acts, t int, out *[gemmRows * gemmRows]float32) {
	if nb == 0 {
		clear(out[:])
		return
	}
	base := t * nb * gemmRows
	_ = packed[q4_0GroupBytes(nb)-1]
	_, _, _ = a.tq[(base+nb*gemmRows)*32-1], a.td[base+nb*gemmRows-1], a.tc[base+nb*gemmRows-1]
	gemmQ4_0x16AVX512(&packed[0], nb, &a.tq[base*32], &a.td[base], &a.tc[base], out)
}
