package quant

import "nibble/engine/ggml"

// kernel is how one weight type meets its activations.
type kernel struct {
	act actKind
	// dot1 is the dot product of one weight row (its raw blocks) with
	// activation row i.
	dot1 func(w []byte, a *acts, i int) float32
	// rows, if set, does dst[r] = dot1(row r) for every row of w (rb bytes
	// each) in one call, which saves a call per row on short rows.
	rows func(w []byte, rb int, a *acts, i int, dst []float32)
	// dot4 does activation rows i..i+3 in one pass over the weight row
	// (prefill), writing out[k*stride] for k < 4; nil means dot1 calls.
	dot4 func(w []byte, a *acts, i int, out []float32, stride int)
	// pairs asks for the pair layout of the activations (acts.buildPairs),
	// with pairCorr·Σy as the per-lane offset correction.
	pairs    bool
	pairCorr int32
	// gemm, if set, is the prefill GEMM (gemm.go) for n >= gemmMinActs
	// activation rows, with -tileCorr·Σy as the offset correction.
	gemm     *gemmKernel
	tileCorr int32
}

type kernelTable [ggml.MXFP4 + 1]kernel

// kernelsPortable is plain Go, on every architecture; kernelsActive starts
// as a copy and the SIMD init of the architecture overrides its entries.
var kernelsPortable = kernelTable{
	ggml.F32:  {act: actF32, dot1: dotF32},
	ggml.F16:  {act: actF16, dot1: dotF16},
	ggml.BF16: {act: actBF16, dot1: dotBF16},
	ggml.Q4_0: {act: actQ8_0, dot1: dotQ4_0},
	ggml.Q4_1: {act: actQ8_1, dot1: dotQ4_1},
	ggml.Q5_0: {act: actQ8_0, dot1: dotQ5_0},
	ggml.Q5_1: {act: actQ8_1, dot1: dotQ5_1},
	ggml.Q8_0: {act: actQ8_0, dot1: dotQ8_0},
	ggml.Q2_K: {act: actQ8_K, dot1: dotQ2_K},
	ggml.Q3_K: {act: actQ8_K, dot1: dotQ3_K},
	ggml.Q4_K: {act: actQ8_K, dot1: dotQ4_K},
	ggml.Q5_K: {act: actQ8_K, dot1: dotQ5_K},
	ggml.Q6_K: {act: actQ8_K, dot1: dotQ6_K},

	ggml.MXFP4: {act: actF32, dot1: dotMXFP4F32},
}

var kernelsActive = kernelsPortable
