package kv

import (
	"math"
	"slices"
)

// Channel smoothing is the per-channel λ of docs/ARCHITECTURE.md ("Channel
// smoothing"): K is stored as
// k/λ and queries meet it as q∘λ, so q·k is unchanged while a channel that
// is far larger than the others (an outlier key channel) no longer owns the
// scale of its quantization group. λ is calibrated once per layer and kv
// head, on the K rows of the first batch written at position 0 (the
// prompt): λ_c = (rms_c / median_c rms_c)^smoothAlpha, rounded to a power of
// two so that dividing and multiplying by it are exact.
const (
	// smoothAlpha migrates part of a channel's excess to the query, as
	// SmoothQuant does: 0.75 gave the best q4 outlier-channel attention in
	// TestSmoothingTamesOutlierChannel's sweep (0.5: 0.993-0.995, 1: 0.993-0.998).
	smoothAlpha = 0.75
	// smoothMinRows is the fewest rows that calibrate; a shorter first batch
	// (a bare decode) leaves the layer unsmoothed.
	smoothMinRows = 16
	// smoothMaxLog2 bounds λ to [2^-12, 2^12].
	smoothMaxLog2 = 12
)

// calibrate returns λ (KVHeads·HeadDim) for n rows of k, or nil when there
// are too few rows or nothing to correct (every λ would be 1).
func calibrate(k []float32, n, kvHeads, d int) []float32 {
	if n < smoothMinRows {
		return nil
	}
	row := kvHeads * d
	sum := make([]float64, row)
	for t := 0; t < n; t++ {
		for c, x := range k[t*row : (t+1)*row] {
			sum[c] += float64(x) * float64(x)
		}
	}
	lambda := make([]float32, row)
	useful := false
	sorted := make([]float64, d)
	for h := 0; h < kvHeads; h++ {
		rms := sum[h*d : (h+1)*d]
		copy(sorted, rms)
		med := median(sorted)
		for c, s := range rms {
			l := 0
			if med > 0 && s > 0 && !math.IsInf(s, 0) {
				// rms ratio^α = (s/med)^(α/2) with s, med sums of squares.
				l = int(math.Round(smoothAlpha / 2 * math.Log2(s/med)))
				l = min(max(l, -smoothMaxLog2), smoothMaxLog2)
			}
			lambda[h*d+c] = float32(math.Ldexp(1, l))
			useful = useful || l != 0
		}
	}
	if !useful {
		return nil
	}
	return lambda
}

// median of x (sorted in place).
func median(x []float64) float64 {
	slices.Sort(x)
	return x[len(x)/2]
}
