//go:build linux

package metal_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"nibble/engine"
	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/kv"
	"nibble/engine/quant"
	"nibble/metal"
)

// pair is a backend that runs every op on the CPU backend (the reference)
// and on the Metal backend, compares the op's output after each op and then
// copies the reference's output into the Metal tensor, so that each op is
// judged on the same inputs as the CPU's: a kernel that is wrong shows as
// one op kind with a large error, not as drift through the layers.
type pair struct {
	ref *cpu.Backend
	got *metal.Backend
	t   *testing.T
	// worst relative error ‖Δ‖₂/‖ref‖₂ per op label; ops counts them.
	worst map[string]float64
	// For matmuls, the worst error of each backend against the float64
	// product of the dequantized weights and the same inputs.
	exactCPU, exactMetal map[string]float64
	ops                  map[string]int
	first                map[string]string // the first call with that worst error
	seq                  int
}

type pairTensor struct {
	r backend.Tensor
	g backend.Tensor
	n int
}

type pairWeight struct {
	r, g backend.Weight
	data []byte    // the tensor's bytes in the region
	deq  []float32 // dequantized on first use (exact float64 products)
}

func (w *pairWeight) Desc() backend.WeightDesc { return w.r.Desc() }

type pairMapping struct {
	r, g backend.Mapping
	ws   []backend.Weight
}

func (m *pairMapping) Weights() []backend.Weight { return m.ws }
func (m *pairMapping) Close() error {
	m.g.Close()
	return m.r.Close()
}

type pairCache struct {
	r, g backend.KVCache
}

func (c *pairCache) Config() kv.Config { return c.r.Config() }
func (c *pairCache) Close() error {
	c.g.Close()
	return c.r.Close()
}

func newPair(t *testing.T) *pair {
	p := &pair{ref: cpu.New(2), got: newBackend(t), t: t,
		worst: map[string]float64{}, ops: map[string]int{}, first: map[string]string{},
		exactCPU: map[string]float64{}, exactMetal: map[string]float64{}}
	t.Cleanup(func() { p.ref.Close() })
	return p
}

func pt(x backend.Tensor) *pairTensor { return x.(*pairTensor) }
func pw(x backend.Weight) *pairWeight { return x.(*pairWeight) }
func pc(x backend.KVCache) *pairCache { return x.(*pairCache) }
func (p *pair) Name() string          { return "metal" }
func (p *pair) AllocatedBytes() int64 { return p.got.AllocatedBytes() }
func (p *pair) Read(dst []float32, src backend.Tensor, off int) {
	p.ref.Read(dst, pt(src).r, off)
}
func (p *pair) ReadKV(c backend.KVCache, layer int, k, v []byte) error {
	return p.ref.ReadKV(pc(c).r, layer, k, v)
}
func (p *pair) Close() error {
	p.got.Close()
	return p.ref.Close()
}

func (p *pair) Alloc(n int) backend.Tensor {
	return &pairTensor{r: p.ref.Alloc(n), g: p.got.Alloc(n), n: n}
}

func (p *pair) Free(x backend.Tensor) {
	p.ref.Free(pt(x).r)
	p.got.Free(pt(x).g)
}

func (p *pair) MapWeights(region []byte, ds []backend.WeightDesc) (backend.Mapping, error) {
	r, err := p.ref.MapWeights(region, ds)
	if err != nil {
		return nil, err
	}
	g, err := p.got.MapWeights(region, ds)
	if err != nil {
		return nil, err
	}
	m := &pairMapping{r: r, g: g}
	for i := range ds {
		d := ds[i]
		m.ws = append(m.ws, &pairWeight{r: r.Weights()[i], g: g.Weights()[i], data: region[d.Offset : d.Offset+d.Bytes()]})
	}
	return m, nil
}

func (p *pair) NewKVCache(cfg kv.Config, heads, maxBatch int) (backend.KVCache, error) {
	r, err := p.ref.NewKVCache(cfg, heads, maxBatch)
	if err != nil {
		return nil, err
	}
	g, err := p.got.NewKVCache(cfg, heads, maxBatch)
	if err != nil {
		return nil, err
	}
	return &pairCache{r: r, g: g}, nil
}

func (p *pair) Sync() error {
	if err := p.got.Sync(); err != nil {
		return err
	}
	return p.ref.Sync()
}

// check syncs both, compares n floats of x and then makes the Metal copy
// equal to the reference.
func (p *pair) check(label string, x backend.Tensor, n int) {
	p.t.Helper()
	p.seq++
	if err := p.Sync(); err != nil {
		p.t.Fatalf("op %d (%s): %v", p.seq, label, err)
	}
	a := pt(x)
	want, got := make([]float32, n), make([]float32, n)
	p.ref.Read(want, a.r, 0)
	p.got.Read(got, a.g, 0)
	var dd, ww float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		dd += d * d
		ww += float64(want[i]) * float64(want[i])
	}
	rel := math.Sqrt(dd / math.Max(ww, 1e-30))
	if math.IsNaN(rel) {
		rel = math.Inf(1)
	}
	p.ops[label]++
	if rel > p.worst[label] || p.ops[label] == 1 {
		p.worst[label] = rel
		p.first[label] = fmt.Sprintf("op %d", p.seq)
	}
	g := metal.TensorRegion(pt(x).g)
	mem := g.Buf.Bytes()[g.Off:]
	for i, v := range want {
		binary.LittleEndian.PutUint32(mem[4*i:], math.Float32bits(v))
	}
}

// checkKV compares the layer's planes byte for byte (quantization may
// differ at rounding ties) and copies the reference's into the Metal cache.
func (p *pair) checkKV(label string, c backend.KVCache, layer int) {
	p.seq++
	if err := p.Sync(); err != nil {
		p.t.Fatalf("op %d (%s): %v", p.seq, label, err)
	}
	kc := pc(c)
	lv := metal.CacheLayer(kc.g, layer)
	n := lv.PlaneBytes()
	rk, rv := make([]byte, n), make([]byte, n)
	gk, gv := make([]byte, n), make([]byte, n)
	p.ref.ReadKV(kc.r, layer, rk, rv)
	p.got.ReadKV(kc.g, layer, gk, gv)
	differ := 0
	for i := range rk {
		if rk[i] != gk[i] {
			differ++
		}
		if rv[i] != gv[i] {
			differ++
		}
	}
	frac := float64(differ) / float64(2*n)
	p.ops[label]++
	if frac > p.worst[label] || p.ops[label] == 1 {
		p.worst[label] = frac
		p.first[label] = fmt.Sprintf("op %d", p.seq)
	}
	copy(lv.K.Buf.Bytes()[lv.K.Off:], rk)
	copy(lv.V.Buf.Bytes()[lv.V.Off:], rv)
}

func wlabel(op string, w backend.Weight) string {
	d := w.Desc()
	return fmt.Sprintf("%s %v", op, d.Type)
}

func (p *pair) Embed(dst backend.Tensor, table backend.Weight, tokens []int32) {
	p.ref.Embed(pt(dst).r, pw(table).r, tokens)
	p.got.Embed(pt(dst).g, pw(table).g, tokens)
	p.check(wlabel("embed", table), dst, len(tokens)*table.Desc().Cols)
}

func (p *pair) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32, rows int) {
	p.ref.RMSNorm(pt(dst).r, pt(x).r, pw(w).r, eps, rows)
	p.got.RMSNorm(pt(dst).g, pt(x).g, pw(w).g, eps, rows)
	p.check(wlabel("rms_norm", w), dst, rows*w.Desc().Cols)
}

func (p *pair) MatMul(dst backend.Tensor, w backend.Weight, x backend.Tensor, rows int) {
	p.ref.MatMul(pt(dst).r, pw(w).r, pt(x).r, rows)
	p.got.MatMul(pt(dst).g, pw(w).g, pt(x).g, rows)
	kind := "mat-vec"
	if rows > 1 {
		kind = "mat-mat"
	}
	label := wlabel(kind, w)
	d := w.Desc()
	if err := p.Sync(); err != nil {
		p.t.Fatalf("%s: %v", label, err)
	}
	// Both against the exact product, on the same inputs.
	pwt := pw(w)
	if pwt.deq == nil {
		pwt.deq = make([]float32, d.Rows*d.Cols)
		if err := quant.Dequantize(d.Type, pwt.deq, pwt.data); err != nil {
			p.t.Fatal(err)
		}
	}
	xs := make([]float32, rows*d.Cols)
	p.ref.Read(xs, pt(x).r, 0)
	cpuOut, metalOut := make([]float32, rows*d.Rows), make([]float32, rows*d.Rows)
	p.ref.Read(cpuOut, pt(dst).r, 0)
	p.got.Read(metalOut, pt(dst).g, 0)
	var ec, em, ee float64
	for r := 0; r < rows; r++ {
		xr := xs[r*d.Cols : (r+1)*d.Cols]
		for i := 0; i < d.Rows; i++ {
			want := exactDot(pwt.deq[i*d.Cols:(i+1)*d.Cols], xr)
			c, m := float64(cpuOut[r*d.Rows+i])-want, float64(metalOut[r*d.Rows+i])-want
			ec, em, ee = ec+c*c, em+m*m, ee+want*want
		}
	}
	p.exactCPU[label] = math.Max(p.exactCPU[label], math.Sqrt(ec/ee))
	p.exactMetal[label] = math.Max(p.exactMetal[label], math.Sqrt(em/ee))
	p.check(label, dst, rows*d.Rows)
}

func (p *pair) AddBias(x backend.Tensor, b backend.Weight, rows int) {
	p.ref.AddBias(pt(x).r, pw(b).r, rows)
	p.got.AddBias(pt(x).g, pw(b).g, rows)
	p.check("add_bias", x, rows*b.Desc().Cols)
}

func (p *pair) RoPE(x backend.Tensor, heads, headDim, rows int, pos []int32, r *backend.RoPE) {
	p.ref.RoPE(pt(x).r, heads, headDim, rows, pos, r)
	p.got.RoPE(pt(x).g, heads, headDim, rows, pos, r)
	p.check(fmt.Sprintf("rope neox=%v", r.Neox), x, rows*heads*headDim)
}

func (p *pair) KVSetSmoothing(c backend.KVCache, layer int, lambda []float32) {
	p.ref.KVSetSmoothing(pc(c).r, layer, lambda)
	p.got.KVSetSmoothing(pc(c).g, layer, lambda)
}

func (p *pair) KVStore(c backend.KVCache, layer int, k, v backend.Tensor, pos, rows int) {
	p.ref.KVStore(pc(c).r, layer, pt(k).r, pt(v).r, pos, rows)
	p.got.KVStore(pc(c).g, layer, pt(k).g, pt(v).g, pos, rows)
	p.checkKV(fmt.Sprintf("kv store %v (fraction of bytes)", c.Config().Type), c, layer)
}

func (p *pair) AttendDecode(out, q backend.Tensor, c backend.KVCache, layer, n int, a *backend.Attention) {
	p.ref.AttendDecode(pt(out).r, pt(q).r, pc(c).r, layer, n, a)
	p.got.AttendDecode(pt(out).g, pt(q).g, pc(c).g, layer, n, a)
	p.check(fmt.Sprintf("attend decode %v", c.Config().Type), out, a.Heads*a.HeadDim)
}

func (p *pair) AttendPrefill(out, q, k, v backend.Tensor, c backend.KVCache, layer, past, rows int, a *backend.Attention) {
	p.ref.AttendPrefill(pt(out).r, pt(q).r, pt(k).r, pt(v).r, pc(c).r, layer, past, rows, a)
	p.got.AttendPrefill(pt(out).g, pt(q).g, pt(k).g, pt(v).g, pc(c).g, layer, past, rows, a)
	p.check(fmt.Sprintf("attend prefill %v past>0=%v", c.Config().Type, past > 0), out, rows*a.Heads*a.HeadDim)
}

func (p *pair) SwiGLU(dst, gate, up backend.Tensor, n int) {
	p.ref.SwiGLU(pt(dst).r, pt(gate).r, pt(up).r, n)
	p.got.SwiGLU(pt(dst).g, pt(gate).g, pt(up).g, n)
	p.check("swiglu", dst, n)
}

func (p *pair) GeluGLU(dst, gate, up backend.Tensor, n int) {
	p.ref.GeluGLU(pt(dst).r, pt(gate).r, pt(up).r, n)
	p.got.GeluGLU(pt(dst).g, pt(gate).g, pt(up).g, n)
	p.check("gelu_glu", dst, n)
}

func (p *pair) Scale(x backend.Tensor, s float32, n int) {
	p.ref.Scale(pt(x).r, s, n)
	p.got.Scale(pt(x).g, s, n)
	p.check("scale", x, n)
}

func (p *pair) Softcap(x backend.Tensor, c float32, n int) {
	p.ref.Softcap(pt(x).r, c, n)
	p.got.Softcap(pt(x).g, c, n)
	p.check("softcap", x, n)
}

func (p *pair) Add(dst, x backend.Tensor, n int) {
	p.ref.Add(pt(dst).r, pt(x).r, n)
	p.got.Add(pt(dst).g, pt(x).g, n)
	p.check("add", dst, n)
}

func (p *pair) Copy(dst backend.Tensor, dstOff int, src backend.Tensor, srcOff, n int) {
	p.ref.Copy(pt(dst).r, dstOff, pt(src).r, srcOff, n)
	p.got.Copy(pt(dst).g, dstOff, pt(src).g, srcOff, n)
	p.check("copy", dst, pt(dst).n)
}

func (p *pair) Argmax(dst, x backend.Tensor, rows, n int) {
	p.ref.Argmax(pt(dst).r, pt(x).r, rows, n)
	p.got.Argmax(pt(dst).g, pt(x).g, rows, n)
	p.check("argmax", dst, rows)
}

// report logs the worst error per op label and returns the labels above
// their tolerance.
func (p *pair) report() (bad []string) {
	labels := make([]string, 0, len(p.worst))
	for l := range p.worst {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	var b strings.Builder
	for _, l := range labels {
		fmt.Fprintf(&b, "\n  %-40s %4d calls, worst %.3g (%s)", l, p.ops[l], p.worst[l], p.first[l])
		if e, ok := p.exactCPU[l]; ok {
			fmt.Fprintf(&b, "; against the float64 product: cpu %.3g, metal %.3g", e, p.exactMetal[l])
		}
		worst := p.worst[l]
		if e, ok := p.exactMetal[l]; ok {
			// Matmuls: against the float64 product (the CPU's own error is
			// its 8-bit activations').
			worst = e
		}
		if worst > opTolerance(l) {
			bad = append(bad, fmt.Sprintf("%s: %.3g > %.3g at %s", l, worst, opTolerance(l), p.first[l]))
		}
	}
	p.t.Logf("per-op relative error ‖Δ‖₂/‖cpu‖₂ on the CPU's inputs:%s", b.String())
	return bad
}

// opTolerance is a generous bound per op label: wrong kernels are off by
// O(1), right ones by rounding (matmuls: the CPU's 8-bit activations, 1-2%
// on quantized weights; attention: f16 K/V).
func opTolerance(label string) float64 {
	switch {
	case strings.HasPrefix(label, "kv store"):
		return 0.02 // bytes differing at rounding ties
	case strings.HasPrefix(label, "mat-"):
		return 2e-3 // against the float64 product
	case strings.HasPrefix(label, "attend"):
		return 5e-3
	}
	return 1e-4
}

// Each op of the forward pass of every test model, on the same inputs as
// the CPU backend's, for a prompt in two prefill batches and two decode
// steps, with an f16 cache and a q4 cache under a sliding window: the worst error per op kind (and weight
// type) is logged, and an op kind above its tolerance names the kernel to
// look at.
func TestOpsInForward(t *testing.T) {
	files := testModels(t)
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		t.Run(name, func(t *testing.T) {
			p := newPair(t)
			m, err := engine.LoadModel(path, p)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ids := m.EncodePrompt(forwardPrompt)
			for _, c := range []struct {
				kv.Config
				window int
			}{{kv.Config{Type: kv.F16}, 0}, {kv.Config{Type: kv.Q4, GroupSize: 32, Smooth: true}, 20}} {
				m.HP.Window = c.window
				c.Ctx = len(ids) + 3
				st, err := m.NewState(c.Config, forwardBatch)
				if err != nil {
					t.Fatal(err)
				}
				logits := make([]float32, m.HP.Vocab)
				for pos := 0; pos < len(ids); pos += forwardBatch {
					if err := st.Forward(ids[pos:min(len(ids), pos+forwardBatch)], pos, logits); err != nil {
						t.Fatal(err)
					}
				}
				for i := 0; i < 2; i++ {
					if err := st.Forward([]int32{int32(i + 5)}, len(ids)+i, logits); err != nil {
						t.Fatal(err)
					}
				}
				st.Close()
			}
			for _, b := range p.report() {
				t.Error(b)
			}
		})
	}
}
