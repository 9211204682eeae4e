package sample

import (
	"math"
	"slices"
)

// better orders candidates: higher logit first, lower id on ties.
func better(a, b candidate) bool {
	return a.logit > b.logit || (a.logit == b.logit && a.id < b.id)
}

func compareCandidates(a, b candidate) int {
	switch {
	case better(a, b):
		return -1
	case better(b, a):
		return 1
	}
	return 0
}

func sanitize(v float32) float32 {
	if v != v {
		return float32(math.Inf(-1))
	}
	return v
}

// topK returns the k best candidates, sorted, with penalties applied. It scans the raw logits
// once with a min-heap of size k+P (P = penalized tokens): the k best unpenalized tokens are
// among the k+P best raw ones, so replacing the penalized entries by their penalized values and
// re-selecting is exact without touching the other logits.
func (s *Sampler) topK(logits []float32, k int) []candidate {
	s.fullNorm = 0
	m := min(len(logits), k+len(s.penIDs))
	h := s.cands[:0]
	for i := range m {
		h = append(h, candidate{int32(i), sanitize(logits[i])})
	}
	for i := m/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	// Later ids lose ties, so a new token must beat the worst kept one strictly; NaN never does.
	worst := h[0].logit
	for i := m; i < len(logits); i++ {
		if v := logits[i]; v > worst {
			h[0] = candidate{int32(i), v}
			siftDown(h, 0)
			worst = h[0].logit
		}
	}
	if len(s.penIDs) > 0 {
		kept := h[:0]
		for _, c := range h {
			if s.counts[c.id] == 0 {
				kept = append(kept, c)
			}
		}
		for i, id := range s.penIDs {
			kept = append(kept, candidate{id, s.penVals[i]})
		}
		h = kept
	}
	slices.SortFunc(h, compareCandidates)
	s.cands = h
	return h[:min(k, len(h))]
}

// siftDown restores the min-heap (worst candidate at the root) below i.
func siftDown(h []candidate, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		w := l
		if r := l + 1; r < len(h) && better(h[l], h[r]) {
			w = r
		}
		if !better(h[i], h[w]) {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// allSorted returns every token (top-k off), sorted. With min-p on, only the tokens min-p
// keeps are collected and sorted: min-p and top-p both keep a prefix of the sorted order, so
// the shorter one is the result, and top-p only needs the full softmax normalizer, kept in
// fullNorm.
func (s *Sampler) allSorted(logits []float32) []candidate {
	s.fullNorm = 0
	value := func(i int) float32 {
		if len(s.penIDs) > 0 && s.counts[i] != 0 {
			for j, id := range s.penIDs {
				if int(id) == i {
					return s.penVals[j]
				}
			}
		}
		return sanitize(logits[i])
	}
	c := s.cands[:0]
	if s.p.MinP <= 0 {
		for i := range logits {
			c = append(c, candidate{int32(i), value(i)})
		}
	} else {
		best, maxL := 0, float32(math.Inf(-1))
		for i := range logits {
			if v := value(i); v > maxL {
				best, maxL = i, v
			}
		}
		threshold := maxL + float32(math.Log(float64(s.p.MinP)))
		var norm float64
		finite := !math.IsInf(float64(maxL), 0)
		for i := range logits {
			v := value(i)
			if finite && s.p.TopP < 1 {
				norm += math.Exp(float64(v - maxL))
			}
			// The best token always passes: a min-p above 1 (threshold above the maximum) or a
			// NaN threshold would otherwise leave nothing to sample from.
			if v >= threshold || i == best {
				c = append(c, candidate{int32(i), v})
			}
		}
		if finite && s.p.TopP < 1 {
			s.fullNorm = float32(norm)
		}
	}
	slices.SortFunc(c, compareCandidates)
	s.cands = c
	return c
}
