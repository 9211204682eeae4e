package cpu

import (
	"fmt"
	"math"

	"nibble/engine/backend"
	"nibble/engine/quant"
)

// The mixture-of-experts ops (backend.Experts). Expert ids travel as
// floats in tensors; the ops that read them check each is a whole number
// below the expert count and report one that is not at Sync.

// Route chooses each row's r.Used experts by logit (the lower id first on
// equal logits, NaN never before a number) and weighs them by r.Gating,
// then r.Norm and r.Scale, as llama.cpp's build_moe_ffn does.
func (b *Backend) Route(ids, weights, logits backend.Tensor, rows int, r *backend.Router) {
	idv, wv, lv := f(ids), f(weights), f(logits)
	n, k := r.Experts, r.Used
	if n <= 0 || k <= 0 || k > n || r.Gating < backend.GatingSoftmax || r.Gating > backend.GatingSigmoid {
		b.fail(fmt.Errorf("route: %d of %d experts with gating %d", k, n, r.Gating))
		return
	}
	b.pool.For(rows, 16, func(lo, hi int) {
		chosen := make([]int, k)
		for row := lo; row < hi; row++ {
			route(chosen, wv[row*k:(row+1)*k], lv[row*n:(row+1)*n], r)
			for j, e := range chosen {
				idv[row*k+j] = float32(e)
			}
		}
	})
}

// route is one row: the ids of the len(chosen) largest logits into
// chosen, their weights into w.
func route(chosen []int, w, logits []float32, r *backend.Router) {
	topK(chosen, logits)
	switch r.Gating {
	case backend.GatingSoftmax:
		// Softmax over every expert, then the chosen ones' probabilities.
		m := math.Inf(-1)
		for _, v := range logits {
			if !math.IsNaN(float64(v)) {
				m = math.Max(m, float64(v))
			}
		}
		var sum float64
		for _, v := range logits {
			if !math.IsNaN(float64(v)) {
				sum += math.Exp(float64(v) - m)
			}
		}
		for j, e := range chosen {
			w[j] = float32(math.Exp(float64(logits[e])-m) / sum)
		}
	case backend.GatingSoftmaxTopK:
		// Softmax over the chosen logits only (gpt-oss).
		m := float64(logits[chosen[0]])
		var sum float64
		for _, e := range chosen {
			sum += math.Exp(float64(logits[e]) - m)
		}
		for j, e := range chosen {
			w[j] = float32(math.Exp(float64(logits[e])-m) / sum)
		}
	case backend.GatingSigmoid:
		for j, e := range chosen {
			w[j] = float32(1 / (1 + math.Exp(-float64(logits[e]))))
		}
	}
	if r.Norm {
		var sum float32
		for _, v := range w {
			sum += v
		}
		// llama.cpp clamps the sum to the smallest normal fp16.
		sum = max(sum, 6.103515625e-5)
		for j := range w {
			w[j] /= sum
		}
	}
	if s := r.Scale; s != 0 && s != 1 {
		for j := range w {
			w[j] *= s
		}
	}
}

// topK writes the indices of the len(dst) largest values of v into dst,
// largest first; equal values go in index order and NaN ranks below every
// number.
func topK(dst []int, v []float32) {
	for j := range dst {
		best := -1
		for i, x := range v {
			if taken(dst[:j], i) {
				continue
			}
			if best < 0 || above(x, v[best]) {
				best = i
			}
		}
		dst[j] = best
	}
}

// above reports whether a ranks strictly above b (NaN ranks lowest).
func above(a, b float32) bool {
	if a != a {
		return false
	}
	return b != b || a > b
}

func taken(ids []int, i int) bool {
	for _, e := range ids {
		if e == i {
			return true
		}
	}
	return false
}

// expertIDs converts n float ids to ints, checking each.
func expertIDs(ids backend.Tensor, n, experts int) ([]int32, error) {
	v := f(ids)[:n]
	out := make([]int32, n)
	for s, x := range v {
		if !(x >= 0 && x < float32(experts)) || x != float32(int32(x)) {
			return nil, fmt.Errorf("slot %d: expert id %g outside [0, %d)", s, x, experts)
		}
		out[s] = int32(x)
	}
	return out, nil
}

func (b *Backend) MatMulID(dst backend.Tensor, w backend.Weight, experts int, x, ids backend.Tensor, rows, k int, xPerSlot bool) {
	id, err := expertIDs(ids, rows*k, experts)
	if err != nil {
		b.fail(fmt.Errorf("matmul-id %s: %w", w.Desc().Name, err))
		return
	}
	if err := quant.MatMulID(b.pool, f(dst), matrix(w), experts, f(x), id, rows, k, xPerSlot); err != nil {
		b.fail(fmt.Errorf("matmul-id %s: %w", w.Desc().Name, err))
	}
}

func (b *Backend) AddBiasID(x backend.Tensor, bias backend.Weight, experts int, ids backend.Tensor, slots int) {
	id, err := expertIDs(ids, slots, experts)
	m := matrix(bias)
	if err == nil && m.Rows != experts {
		err = fmt.Errorf("%d rows for %d experts", m.Rows, experts)
	}
	if err != nil {
		b.fail(fmt.Errorf("add-bias-id %s: %w", bias.Desc().Name, err))
		return
	}
	d, v, n := f(x), b.vector(bias), m.Cols
	for s, e := range id {
		row, bv := d[s*n:(s+1)*n], v[int(e)*n:(int(e)+1)*n]
		for i := range row {
			row[i] += bv[i]
		}
	}
}

func (b *Backend) SumExperts(dst, y, weights backend.Tensor, rows, k, n int) {
	d, yv, wv := f(dst), f(y), f(weights)
	b.pool.For(rows, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			out := d[r*n : (r+1)*n]
			for j := 0; j < k; j++ {
				s := r*k + j
				wj, ys := wv[s], yv[s*n:(s+1)*n]
				if j == 0 {
					for i := range out {
						out[i] = wj * ys[i]
					}
					continue
				}
				for i := range out {
					out[i] += wj * ys[i]
				}
			}
		}
	})
}

func (b *Backend) SwiGLUClamped(dst, gate, up backend.Tensor, n int, alpha, limit float32) {
	d, g, u := f(dst), f(gate), f(up)
	b.pool.For(n, 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d[i] = SwiGLUClamped(g[i], u[i], alpha, limit)
		}
	})
}

// SwiGLUClamped is gpt-oss's gate (ggml's swiglu_oai): with g = min(gate,
// limit) and u = clamp(up, −limit, limit), g·sigmoid(alpha·g)·(u + 1).
func SwiGLUClamped(gate, up, alpha, limit float32) float32 {
	g := min(gate, limit)
	u := max(-limit, min(up, limit))
	return g / (1 + float32(math.Exp(float64(-alpha*g)))) * (u + 1)
}

var _ backend.Experts = (*Backend)(nil)
