package attention

// kernels is the innermost block arithmetic. The portable versions below
// are the definition; SIMD versions replace them where the CPU has them
// (kernels_amd64.go) and are tested against them.
type kernels struct {
	meta      func(dst []float32, src []uint16, nb, pairs2, ms int)
	q4Scores  func(st *slot, codes []uint32, nb, gs int)
	q4AccV    func(st *slot, codes []uint32, nb, gs int)
	q8Scores  func(st *slot, codes []uint8, nb, gs int)
	q8AccV    func(st *slot, codes []uint8, nb, gs int)
	f16Scores func(st *slot, k []uint16, nb int)
	f16AccV   func(st *slot, v []uint16, nb int)
	f32Scores func(st *slot, k []float32, nb int)
	f32AccV   func(st *slot, v []float32, nb int)
	softmax   func(sc, ml, o []float32, g, d, nb int)
	dot       func(a, b []float32) float32
	axpy      func(y []float32, a float32, x []float32)
	// q4Permuted: the q4 kernels work in lane order (lanes.go).
	q4Permuted bool
}

var portable = kernels{
	meta:      metaGo,
	q4Scores:  q4ScoresGo,
	q4AccV:    q4AccVGo,
	q8Scores:  q8ScoresGo,
	q8AccV:    q8AccVGo,
	f16Scores: f16ScoresGo,
	f16AccV:   f16AccVGo,
	f32Scores: f32ScoresGo,
	f32AccV:   f32AccVGo,
	softmax:   softmaxGo,
	dot:       dotGo,
	axpy:      axpyGo,
}

// kern is the set in use; simd (if any) is chosen at init.
var kern = portable
