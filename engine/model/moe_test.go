package model_test

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/family"
	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/engine/quant"
	"nibble/engine/synth"
)

// synthMoE writes a small mixture-of-experts model of arch (qwen3moe, or
// synth.Mixtral for llama with experts).
func synthMoE(t *testing.T, arch string, typ ggml.Type, mutate func(*synth.Options)) string {
	t.Helper()
	o := synth.DefaultOptions(arch)
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 128, 4, 2, 96
	o.Experts, o.ExpertsUsed = 8, 3
	if arch == "qwen3moe" {
		o.FF, o.ExpertFF = 256, 64
	}
	o.Type, o.Seed, o.VocabData = typ, 3, vocab.LlamaSPM
	if mutate != nil {
		mutate(&o)
	}
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// refModel is a float64 forward pass of a llama-style mixture of experts,
// written from the definitions (pre-norm blocks, RoPE, grouped-query
// attention, softmax router over the top k, renormalised), over the file's
// weights dequantized: what the engine's ops compose must agree with it.
type refModel struct {
	hp model.HParams
	w  map[string][]float64
	k  [][][]float64 // per layer, per position: k rows
	v  [][][]float64
}

func newRefModel(t *testing.T, path string) *refModel {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hp, err := model.HParamsFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	r := &refModel{hp: hp, w: map[string][]float64{}, k: make([][][]float64, hp.Layers), v: make([][][]float64, hp.Layers)}
	for _, ti := range f.Tensors {
		n := int(ti.Elements())
		v := make([]float32, n)
		if err := quant.Dequantize(ti.Type, v, f.TensorData(&ti)); err != nil {
			t.Fatal(err)
		}
		d := make([]float64, n)
		for i, x := range v {
			d[i] = float64(x)
		}
		r.w[ti.Name] = d
	}
	if _, ok := r.w["output.weight"]; !ok {
		r.w["output.weight"] = r.w["token_embd.weight"]
	}
	return r
}

func rmsNorm(x, w []float64, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s * w[i]
	}
	return out
}

// matVec is W·x for W of rows rows of len(x), starting at row offset off.
func matVec(w []float64, off, rows int, x []float64) []float64 {
	n := len(x)
	out := make([]float64, rows)
	for r := range out {
		row := w[(off+r)*n : (off+r+1)*n]
		var s float64
		for i, v := range x {
			s += row[i] * v
		}
		out[r] = s
	}
	return out
}

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

func (r *refModel) rope(x []float64, heads, pos int) {
	hp := r.hp
	d, half := hp.HeadDim, hp.RopeDims/2
	for h := 0; h < heads; h++ {
		v := x[h*d:]
		for i := 0; i < half; i++ {
			th := float64(pos) * math.Pow(float64(hp.RopeBase), -2*float64(i)/float64(hp.RopeDims))
			a, b := 2*i, 2*i+1
			if hp.RopeNeox {
				a, b = i, i+half
			}
			c, s := math.Cos(th), math.Sin(th)
			v[a], v[b] = v[a]*c-v[b]*s, v[a]*s+v[b]*c
		}
	}
}

// step runs token tok at the next position and returns its logits.
func (r *refModel) step(tok int) []float64 {
	hp := r.hp
	E, hd, eps := hp.Embd, hp.HeadDim, float64(hp.RMSEps)
	x := append([]float64(nil), r.w["token_embd.weight"][tok*E:(tok+1)*E]...)
	for l := 0; l < hp.Layers; l++ {
		p := func(name string) []float64 { return r.w[fmt.Sprintf("blk.%d.%s", l, name)] }
		h := rmsNorm(x, p("attn_norm.weight"), eps)
		q, k, v := matVec(p("attn_q.weight"), 0, hp.QDim(), h), matVec(p("attn_k.weight"), 0, hp.KVDim(), h), matVec(p("attn_v.weight"), 0, hp.KVDim(), h)
		if hp.QKNorm {
			for i := 0; i < hp.Heads; i++ {
				copy(q[i*hd:], rmsNorm(q[i*hd:(i+1)*hd], p("attn_q_norm.weight"), eps))
			}
			for i := 0; i < hp.KVHeads; i++ {
				copy(k[i*hd:], rmsNorm(k[i*hd:(i+1)*hd], p("attn_k_norm.weight"), eps))
			}
		}
		pos := len(r.k[l])
		r.rope(q, hp.Heads, pos)
		r.rope(k, hp.KVHeads, pos)
		r.k[l], r.v[l] = append(r.k[l], k), append(r.v[l], v)
		att := make([]float64, hp.QDim())
		for i := 0; i < hp.Heads; i++ {
			g := i / (hp.Heads / hp.KVHeads)
			sc := make([]float64, pos+1)
			m := math.Inf(-1)
			for j := range sc {
				var s float64
				for c := 0; c < hd; c++ {
					s += q[i*hd+c] * r.k[l][j][g*hd+c]
				}
				sc[j] = s / math.Sqrt(float64(hd))
				m = math.Max(m, sc[j])
			}
			var sum float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - m)
				sum += sc[j]
			}
			for j := range sc {
				for c := 0; c < hd; c++ {
					att[i*hd+c] += sc[j] / sum * r.v[l][j][g*hd+c]
				}
			}
		}
		for i, o := range matVec(p("attn_output.weight"), 0, E, att) {
			x[i] += o
		}
		h = rmsNorm(x, p("ffn_norm.weight"), eps)
		for i, y := range r.moe(l, h) {
			x[i] += y
		}
	}
	return matVec(r.w["output.weight"], 0, hp.Vocab, rmsNorm(x, r.w["output_norm.weight"], eps))
}

// moe is block l's feed-forward on the normed row h by its definition
// (llama.cpp's build_moe_ffn): the router and its gating, the chosen
// experts (separate or fused gate|up, biases, the family's activation)
// summed by weight, plus a dense feed-forward beside them or the shared
// experts (sigmoid-gated where the family gates them).
func (r *refModel) moe(l int, h []float64) []float64 {
	hp := r.hp
	fam, _ := family.Lookup(hp.Arch)
	p := func(name string) []float64 { return r.w[fmt.Sprintf("blk.%d.%s", l, name)] }
	E, ff := hp.Embd, hp.ExpertFF
	logits := matVec(p("ffn_gate_inp.weight"), 0, hp.Experts, h)
	if b := p("ffn_gate_inp.bias"); b != nil {
		for i := range logits {
			logits[i] += b[i]
		}
	}
	ids := make([]int, hp.Experts)
	for i := range ids {
		ids[i] = i
	}
	sort.SliceStable(ids, func(a, b int) bool { return logits[ids[a]] > logits[ids[b]] })
	ids = ids[:hp.ExpertsUsed]
	softmax := func(of []int) []float64 {
		m, z := math.Inf(-1), 0.0
		for _, e := range of {
			m = math.Max(m, logits[e])
		}
		for _, e := range of {
			z += math.Exp(logits[e] - m)
		}
		out := make([]float64, len(ids))
		for j, e := range ids {
			out[j] = math.Exp(logits[e]-m) / z
		}
		return out
	}
	var wts []float64
	switch hp.ExpertGating {
	case backend.GatingSoftmax:
		all := make([]int, hp.Experts)
		for i := range all {
			all[i] = i
		}
		wts = softmax(all)
	case backend.GatingSoftmaxTopK:
		wts = softmax(ids)
	case backend.GatingSigmoid:
		for _, e := range ids {
			wts = append(wts, 1/(1+math.Exp(-logits[e])))
		}
	}
	if hp.ExpertNorm {
		var s float64
		for _, v := range wts {
			s += v
		}
		for j := range wts {
			wts[j] /= s
		}
	}
	ls := hp.Layer(l)
	act := func(act model.Activation, g, u []float64) {
		for i := range g {
			switch act {
			case model.SwiGLUClamped:
				a, lim := float64(ls.ClampAlpha), float64(ls.ClampLimit)
				gg, uu := math.Min(g[i], lim), math.Max(-lim, math.Min(u[i], lim))
				g[i] = gg / (1 + math.Exp(-a*gg)) * (uu + 1)
			case model.GeluTanhGLU:
				x := g[i]
				g[i] = 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) * u[i]
			default:
				g[i] = silu(g[i]) * u[i]
			}
		}
	}
	out := make([]float64, E)
	for j, e := range ids {
		var g, u []float64
		if fam.Tensors.FusedGateUpExperts {
			g, u = matVec(p("ffn_gate_up_exps.weight"), 2*e*ff, ff, h), matVec(p("ffn_gate_up_exps.weight"), 2*e*ff+ff, ff, h)
			if b := p("ffn_gate_up_exps.bias"); b != nil {
				for i := range g {
					g[i] += b[2*e*ff+i]
					u[i] += b[2*e*ff+ff+i]
				}
			}
		} else {
			g, u = matVec(p("ffn_gate_exps.weight"), e*ff, ff, h), matVec(p("ffn_up_exps.weight"), e*ff, ff, h)
			if b := p("ffn_gate_exps.bias"); b != nil {
				bu := p("ffn_up_exps.bias")
				for i := range g {
					g[i] += b[e*ff+i]
					u[i] += bu[e*ff+i]
				}
			}
		}
		act(ls.ExpertAct, g, u)
		y := matVec(p("ffn_down_exps.weight"), e*E, E, g)
		if b := p("ffn_down_exps.bias"); b != nil {
			for i := range y {
				y[i] += b[e*E+i]
			}
		}
		for i := range out {
			out[i] += wts[j] * y[i]
		}
	}
	dense := func(gate, up, down string, width int) []float64 {
		g, u := matVec(p(gate), 0, width, h), matVec(p(up), 0, width, h)
		act(ls.Act, g, u)
		return matVec(p(down), 0, E, g)
	}
	var side []float64
	switch {
	case hp.SharedFF > 0:
		side = dense("ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight", hp.SharedFF)
		if gw := p("ffn_gate_inp_shexp.weight"); gw != nil {
			s := 1 / (1 + math.Exp(-matVec(gw, 0, 1, h)[0]))
			for i := range side {
				side[i] *= s
			}
		}
	case fam.Tensors.DenseBesideExperts:
		side = dense("ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", hp.FF)
	}
	for i := range side {
		out[i] += side[i]
	}
	return out
}

func cosine(a []float32, b []float64) float64 {
	var ab, aa, bb float64
	for i := range b {
		ab += float64(a[i]) * b[i]
		aa += float64(a[i]) * float64(a[i])
		bb += b[i] * b[i]
	}
	return ab / math.Sqrt(aa*bb)
}

func argmax32(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

func argmax64(v []float64) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// Qwen3-MoE and Mixtral written by synth load, prefill a prompt and decode
// greedily on the CPU as a float64 forward pass of their definition does:
// the same greedy tokens and last logits of cosine ≥ 0.9999 (F16 weights,
// F16 cache: activations rounded to f16 before each matmul).
func TestMoEFamiliesMatchReferenceForward(t *testing.T) {
	for _, arch := range []string{"qwen3moe", synth.Mixtral} {
		t.Run(arch, func(t *testing.T) {
			path := synthMoE(t, arch, ggml.F16, nil)
			wantArch := map[string]string{synth.Mixtral: "llama"}[arch]
			if wantArch == "" {
				wantArch = arch
			}
			matchReference(t, path, func(hp model.HParams) bool {
				return hp.Arch == wantArch && hp.Experts == 8 && hp.ExpertsUsed == 3 && hp.ExpertNorm && hp.ExpertGating == backend.GatingSoftmax
			})
		})
	}
}

// The layouts a family's table entry can ask for, each against the
// reference: fused gate|up experts with biases on the router and every
// expert matrix, top-k softmax and the clamped SwiGLU (gpt-oss's
// choices), sigmoid-gated shared experts; and a dense GELU feed-forward
// beside sigmoid-routed, renormalised experts (Gemma 4's arrangement).
func TestMoELayoutsMatchReferenceForward(t *testing.T) {
	for _, c := range []struct {
		arch     string
		sharedFF int
	}{{"moetestfused", 96}, {"moetestdense", 0}} {
		t.Run(c.arch, func(t *testing.T) {
			path := synthMoE(t, c.arch, ggml.F16, func(o *synth.Options) { o.SharedFF = c.sharedFF })
			matchReference(t, path, func(hp model.HParams) bool { return hp.SharedFF == c.sharedFF })
		})
	}
}

func init() {
	family.Register(family.Family{
		Name: "moetestfused",
		Traits: family.Traits{RopeNeox: true, Experts: family.Experts{Gating: family.GatingSoftmaxWeight,
			Act: family.ExpertSwiGLUClamped, ClampAlpha: 1.702, ClampLimit: 0.5, FFPerUsed: true}},
		Tensors: family.Layout{FusedGateUpExperts: true, ExpertBiases: true, SharedExpertGate: true},
		Synth:   family.Synth{RopeBase: 10000, RMSEps: 1e-5, Experts: 8, ExpertsUsed: 3, ExpertFF: 64},
	})
	family.Register(family.Family{
		Name: "moetestdense",
		Traits: family.Traits{GeluFFN: true, Experts: family.Experts{Gating: family.GatingSigmoid, Norm: true,
			FFPerUsed: true}},
		Tensors: family.Layout{DenseBesideExperts: true},
		Synth:   family.Synth{RopeBase: 10000, RMSEps: 1e-5, Experts: 8, ExpertsUsed: 3, ExpertFF: 64},
	})
}

// matchReference opens the model at path on the CPU, checks its hparams
// with ok, then prefills a prompt and decodes 8 greedy tokens beside the
// float64 reference: cosine ≥ 0.9999 and the same token at every step.
func matchReference(t *testing.T, path string, ok func(model.HParams) bool) {
	t.Helper()
	b := cpu.New(2)
	defer b.Close()
	m, err := model.Open(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !ok(m.HP) {
		t.Fatalf("hparams %+v", m.HP)
	}
	st, err := m.NewState(kv.Config{Type: kv.F16, Ctx: 64}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ref := newRefModel(t, path)
	prompt := []int32{1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203}
	var want []float64
	for _, tok := range prompt {
		want = ref.step(int(tok))
	}
	logits := make([]float32, m.HP.Vocab)
	if err := st.Forward(prompt, 0, logits); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		if c := cosine(logits, want); c < 0.9999 {
			t.Fatalf("step %d: cosine %.6f with the reference, want ≥ 0.9999", i, c)
		}
		g, w := argmax32(logits), argmax64(want)
		if g != w {
			t.Fatalf("step %d: greedy token %d, reference %d", i, g, w)
		}
		if err := st.Forward([]int32{int32(g)}, len(prompt)+i, logits); err != nil {
			t.Fatal(err)
		}
		want = ref.step(g)
	}
}

// Prefill in one batch and token by token agree for Q4_0 experts: the
// batch groups tokens by expert (MatMulID's grouped path), decode reads
// the chosen experts' rows one token at a time.
func TestMoEPrefillMatchesDecode(t *testing.T) {
	path := synthMoE(t, "qwen3moe", ggml.Q4_0, func(o *synth.Options) { o.Experts, o.ExpertsUsed = 4, 2 })
	b := cpu.New(2)
	defer b.Close()
	m, err := model.Open(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := make([]int32, 40) // at least 16 tokens per expert somewhere: the GEMM where there is one
	for i := range prompt {
		prompt[i] = int32(100 + 37*i)
	}
	batch, step := make([]float32, m.HP.Vocab), make([]float32, m.HP.Vocab)
	st1, _ := m.NewState(kv.Config{Type: kv.F16, Ctx: 64}, 64)
	defer st1.Close()
	if err := st1.Forward(prompt, 0, batch); err != nil {
		t.Fatal(err)
	}
	st2, _ := m.NewState(kv.Config{Type: kv.F16, Ctx: 64}, 64)
	defer st2.Close()
	for i, tok := range prompt {
		if err := st2.Forward([]int32{tok}, i, step); err != nil {
			t.Fatal(err)
		}
	}
	b64 := make([]float64, len(batch))
	for i, v := range batch {
		b64[i] = float64(v)
	}
	if c := cosine(step, b64); c < 0.9999 {
		t.Errorf("batch and token-by-token logits: cosine %.6f", c)
	}
}

// Expert tensors of the wrong shape, a missing expert_used_count and an
// unknown gating function are refused at load with the tensor or key named.
func TestMoELoadRefusesBadFiles(t *testing.T) {
	good := synthMoE(t, "qwen3moe", ggml.F16, nil)
	for _, c := range []struct {
		name, want string
		edit       func(kvs map[string]any, dims map[string][]uint64)
	}{
		{"expert count of the router", "blk.0.ffn_gate_inp.weight", func(kvs map[string]any, dims map[string][]uint64) {
			dims["blk.0.ffn_gate_inp.weight"] = []uint64{128, 7}
		}},
		{"2-D experts", "blk.1.ffn_up_exps.weight", func(kvs map[string]any, dims map[string][]uint64) {
			dims["blk.1.ffn_up_exps.weight"] = []uint64{128, 64 * 8}
		}},
		{"expert width", "blk.0.ffn_down_exps.weight", func(kvs map[string]any, dims map[string][]uint64) {
			dims["blk.0.ffn_down_exps.weight"] = []uint64{32, 128, 8}
		}},
		{"no used count", "expert_used_count", func(kvs map[string]any, dims map[string][]uint64) {
			delete(kvs, "qwen3moe.expert_used_count")
		}},
		{"more used than experts", "used", func(kvs map[string]any, dims map[string][]uint64) {
			kvs["qwen3moe.expert_used_count"] = uint32(9)
		}},
		{"gating", "gating function 7", func(kvs map[string]any, dims map[string][]uint64) {
			kvs["qwen3moe.expert_gating_func"] = uint32(7)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := rewrite(t, good, c.edit)
			b := cpu.New(1)
			defer b.Close()
			_, err := model.Open(path, b)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want one naming %q", err, c.want)
			}
		})
	}
}

// A backend without the experts' ops refuses a mixture of experts at load.
func TestMoERefusedWithoutExperts(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	_, err := model.Open(synthMoE(t, synth.Mixtral, ggml.F16, nil), plainBackend{b})
	if err == nil || !strings.Contains(err.Error(), "mixture-of-experts") {
		t.Errorf("err %v, want a refusal naming mixture-of-experts", err)
	}
}

// plainBackend hides the CPU's Experts.
type plainBackend struct{ backend.Backend }

// rewrite copies the GGUF at path with its metadata and tensor dims
// edited (tensor data zeroed where the size changed).
func rewrite(t *testing.T, path string, edit func(map[string]any, map[string][]uint64)) string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kvs := map[string]any{}
	for _, k := range f.Keys {
		kvs[k] = f.KV[k]
	}
	dims := map[string][]uint64{}
	for _, ti := range f.Tensors {
		dims[ti.Name] = ti.Dims
	}
	edit(kvs, dims)
	w := gguf.NewWriter()
	for _, k := range f.Keys {
		if v, ok := kvs[k]; ok {
			if gv, orig := v.(gguf.Value); orig {
				w.SetValue(k, gv)
			} else if err := w.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k, v := range kvs {
		if _, ok := f.KV[k]; !ok {
			if err := w.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ti := range f.Tensors {
		data := f.TensorData(&ti)
		d := dims[ti.Name]
		err := w.AddTensor(ti.Name, ti.Type, d, func(dst []byte) error {
			if len(dst) == len(data) {
				copy(dst, data)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "edited.gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}
