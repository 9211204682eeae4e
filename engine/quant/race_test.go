//go:build race

package quant

// The race detector makes sync.Pool drop items at random.
const raceEnabled = true
