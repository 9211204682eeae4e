package sample

// preparePenalties counts the penalized window of recent tokens and computes the penalized
// logit of each distinct token, as llama.cpp's penalties sampler does:
//
//	logit <= 0 ? logit*repeat : logit/repeat;  logit -= count*frequency + presence
//
// It reports whether any token is penalized.
func (s *Sampler) preparePenalties(logits []float32, recent []int32) bool {
	p := s.p
	repeat := p.RepeatPenalty
	if repeat <= 0 {
		repeat = 1
	}
	if p.RepeatLastN == 0 || len(recent) == 0 || (repeat == 1 && p.FrequencyPenalty == 0 && p.PresencePenalty == 0) {
		return false
	}
	window := recent
	if p.RepeatLastN > 0 && len(window) > p.RepeatLastN {
		window = window[len(window)-p.RepeatLastN:]
	}
	n := len(logits)
	if len(s.counts) < n {
		s.counts = make([]int32, n)
	}
	for _, id := range window {
		if id < 0 || int(id) >= n {
			continue
		}
		if s.counts[id] == 0 {
			s.penIDs = append(s.penIDs, id)
		}
		s.counts[id]++
	}
	for _, id := range s.penIDs {
		l := sanitize(logits[id])
		if l <= 0 {
			l *= repeat
		} else {
			l /= repeat
		}
		c := s.counts[id]
		l -= float32(c)*p.FrequencyPenalty + p.PresencePenalty
		// Infinite or NaN penalties can make NaN (e.g. -Inf - -Inf); it must rank last like a NaN
		// logit, not poison the maximum or the sort.
		s.penVals = append(s.penVals, sanitize(l))
	}
	return len(s.penIDs) > 0
}

func (s *Sampler) clearPenalties() {
	for _, id := range s.penIDs {
		s.counts[id] = 0
	}
	s.penIDs = s.penIDs[:0]
	s.penVals = s.penVals[:0]
}
