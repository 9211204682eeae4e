//go:build race

package scheduler

// raceEnabled: the race detector's shadow memory makes RSS measurements
// meaningless.
const raceEnabled = true
