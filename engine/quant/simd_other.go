//go:build !amd64

package quant

// simdName names the SIMD kernels in use; there are none off amd64 yet.
const simdName = ""
