package kv

import (
	"fmt"
	"math"
	"slices"
)

// Channel smoothing is the per-channel λ of docs/ARCHITECTURE.md ("Channel
// smoothing"): K is stored as
// k/λ and queries meet it as q∘λ, so q·k is unchanged while a channel that
// is far larger than the others (an outlier key channel) no longer owns the
// scale of its quantization group. λ is calibrated once per layer and kv
// head, on the K rows of a batch written at position 0 (a model keeps its
// first calibration for all its sequences: engine/model smoothingScales):
// λ_c = (rms_c / median_c rms_c)^smoothAlpha, rounded to a power of two so
// that dividing and multiplying by it are exact. The calibration is
// an explicit host step (Calibration), and Cache.SetLambda installs its
// result.
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

// MinCalibrationRows is the fewest K rows that calibrate; a shorter first
// batch (a bare decode step) leaves the layer unsmoothed.
const MinCalibrationRows = smoothMinRows

// Calibration gathers what λ is computed from, the sum of squares of every
// channel over the K rows of the first batch written at position 0. It runs
// on the host between passes (docs/ARCHITECTURE.md, "Channel smoothing"):
// the forward pass reads K back after a sync, adds its rows here and hands
// the resulting λ to the backend, so every backend smooths with the same
// factors. Reset, Add and Lambda do not allocate.
type Calibration struct {
	kvHeads, d int
	rows       int
	sum        []float64 // per channel, kvHeads·d
	sorted     []float64 // median scratch, d
}

// NewCalibration returns an empty calibration for rows of kvHeads·d floats.
func NewCalibration(kvHeads, d int) *Calibration {
	return &Calibration{kvHeads: kvHeads, d: d, sum: make([]float64, kvHeads*d), sorted: make([]float64, d)}
}

// Reset forgets the rows added so far.
func (c *Calibration) Reset() {
	clear(c.sum)
	c.rows = 0
}

// Add accumulates the whole rows of k (kvHeads·d floats each, heads
// concatenated); a trailing partial row is ignored.
func (c *Calibration) Add(k []float32) {
	row := len(c.sum)
	for t := 0; (t+1)*row <= len(k); t++ {
		for i, x := range k[t*row : (t+1)*row] {
			c.sum[i] += float64(x) * float64(x)
		}
		c.rows++
	}
}

// Rows is how many rows were added since the last Reset.
func (c *Calibration) Rows() int { return c.rows }

// Lambda writes λ_c = (rms_c / median rms)^0.75, rounded to a power of two,
// for every (kv head, channel) into dst (kvHeads·d floats) and returns it; it
// returns nil when fewer than MinCalibrationRows rows were added or when
// every λ would be 1 (nothing to correct).
func (c *Calibration) Lambda(dst []float32) []float32 {
	if c.rows < smoothMinRows {
		return nil
	}
	d := c.d
	dst = dst[:len(c.sum)]
	useful := false
	for h := 0; h < c.kvHeads; h++ {
		rms := c.sum[h*d : (h+1)*d]
		copy(c.sorted, rms)
		med := median(c.sorted)
		for i, s := range rms {
			l := 0
			if med > 0 && s > 0 && !math.IsInf(s, 0) {
				// rms ratio^α = (s/med)^(α/2) with s, med sums of squares.
				l = int(math.Round(smoothAlpha / 2 * math.Log2(s/med)))
				l = min(max(l, -smoothMaxLog2), smoothMaxLog2)
			}
			dst[h*d+i] = float32(math.Ldexp(1, l))
			useful = useful || l != 0
		}
	}
	if !useful {
		return nil
	}
	return dst
}

// Calibrate is λ for the first n rows of k (kvHeads·d floats each), or nil:
// a Calibration of those rows in one call.
func Calibrate(k []float32, n, kvHeads, d int) []float32 {
	c := NewCalibration(kvHeads, d)
	c.Add(k[:min(len(k), n*kvHeads*d)])
	return c.Lambda(make([]float32, kvHeads*d))
}

// CheckLambda reports λ that is not kvHeads·d positive powers of two within
// the bounds Lambda produces.
func CheckLambda(lambda []float32, kvHeads, d int) error {
	if len(lambda) != kvHeads*d {
		return fmt.Errorf("kv smoothing: %d factors, want %d (kv heads × head dim)", len(lambda), kvHeads*d)
	}
	for i, l := range lambda {
		frac, exp := math.Frexp(float64(l))
		if frac != 0.5 || exp-1 < -smoothMaxLog2 || exp-1 > smoothMaxLog2 {
			return fmt.Errorf("kv smoothing: factor %d is %g, not a power of two in [2^-%d, 2^%d]", i, l, smoothMaxLog2, smoothMaxLog2)
		}
	}
	return nil
}

// median of x (sorted in place).
func median(x []float64) float64 {
	slices.Sort(x)
	return x[len(x)/2]
}
