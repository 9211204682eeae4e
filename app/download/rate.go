package download

import "time"

// rate estimates the transfer speed over a sliding window of samples, so
// the figure and the ETA follow the connection without jumping with every
// read.
type rate struct {
	window  time.Duration
	samples []sample
}

type sample struct {
	t    time.Time
	done int64
}

// reset forgets the history: a restart or a resume's first byte begins a
// new count, so bytes that were already on disk do not count as speed.
func (r *rate) reset() { r.samples = r.samples[:0] }

// add records done bytes at time t and drops samples older than the
// window, keeping one at or before its start so the span stays full.
func (r *rate) add(t time.Time, done int64) {
	r.samples = append(r.samples, sample{t, done})
	cut := t.Add(-r.window)
	i := 0
	for i+1 < len(r.samples) && !r.samples[i+1].t.After(cut) {
		i++
	}
	if i > 0 {
		r.samples = append(r.samples[:0], r.samples[i:]...)
	}
}

// speed is bytes per second between the oldest and newest sample, 0 with
// fewer than two.
func (r *rate) speed() float64 {
	if len(r.samples) < 2 {
		return 0
	}
	a, b := r.samples[0], r.samples[len(r.samples)-1]
	dt := b.t.Sub(a.t).Seconds()
	if dt <= 0 || b.done < a.done {
		return 0
	}
	return float64(b.done-a.done) / dt
}
