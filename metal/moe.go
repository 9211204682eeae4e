package metal

import "nibble/engine/backend"

// The mixture-of-experts ops (backend.Experts): each checks its tensors and
// encodes its kernels (metal/encoder's moe.go); the expert ids stay on the
// device, so a MoE layer runs without a trip to the host.

var _ backend.Experts = (*Backend)(nil)

func (b *Backend) Route(ids, weights, logits backend.Tensor, rows int, r *backend.Router) {
	if r == nil {
		b.enc.Failf("route: no router")
		return
	}
	i, w := b.region("route", ids, 0, rows*r.Used), b.region("route", weights, 0, rows*r.Used)
	l := b.region("route", logits, 0, rows*r.Experts)
	if b.enc.Err() != nil || rows == 0 {
		return
	}
	b.enc.Route(i, w, l, rows, r)
}

func (b *Backend) MatMulID(dst backend.Tensor, w backend.Weight, experts int, x, ids backend.Tensor, rows, k int, xPerSlot bool) {
	m := b.weight("matmul_id", w)
	if m == nil {
		return
	}
	if experts <= 0 || m.Rows%experts != 0 {
		b.enc.Failf("matmul_id: %d rows of %q are not %d experts' matrices", m.Rows, w.Desc().Name, experts)
		return
	}
	xrows := rows
	if xPerSlot {
		xrows = rows * k
	}
	d := b.region("matmul_id", dst, 0, rows*k*(m.Rows/experts))
	s, i := b.region("matmul_id", x, 0, xrows*m.Cols), b.region("matmul_id", ids, 0, rows*k)
	if b.enc.Err() != nil || rows == 0 {
		return
	}
	b.enc.MatMulID(d, m, experts, s, i, rows, k, xPerSlot)
}

func (b *Backend) AddBiasID(x backend.Tensor, bias backend.Weight, experts int, ids backend.Tensor, slots int) {
	v := b.weight("add_bias_id", bias)
	if v == nil {
		return
	}
	if experts <= 0 || (v.Rows*v.Cols)%experts != 0 {
		b.enc.Failf("add_bias_id: %q of %d×%d is not %d experts' biases", bias.Desc().Name, v.Rows, v.Cols, experts)
		return
	}
	d := b.region("add_bias_id", x, 0, slots*(v.Rows*v.Cols/experts))
	i := b.region("add_bias_id", ids, 0, slots)
	if b.enc.Err() != nil || slots == 0 {
		return
	}
	b.enc.AddBiasID(d, v, experts, i, slots)
}

func (b *Backend) SumExperts(dst, y, weights backend.Tensor, rows, k, n int) {
	d, s := b.region("sum_experts", dst, 0, rows*n), b.region("sum_experts", y, 0, rows*k*n)
	w := b.region("sum_experts", weights, 0, rows*k)
	if b.enc.Err() != nil || rows == 0 || n == 0 {
		return
	}
	b.enc.SumExperts(d, s, w, rows, k, n)
}

func (b *Backend) SwiGLUClamped(dst, gate, up backend.Tensor, n int, alpha, limit float32) {
	d, g, u := b.region("swiglu_clamped", dst, 0, n), b.region("swiglu_clamped", gate, 0, n), b.region("swiglu_clamped", up, 0, n)
	if b.enc.Err() != nil || n == 0 {
		return
	}
	b.enc.SwiGLUClamped(d, g, u, n, alpha, limit)
}
