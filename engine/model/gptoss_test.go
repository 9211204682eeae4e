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
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/engine/synth"
)

// synthGptOss writes a small gpt-oss model: 4 layers (two sliding, two
// global), a window of 8, 8 experts of which 3 run, YaRN over 4096
// positions, experts of type experts.
func synthGptOss(t *testing.T, typ, experts ggml.Type) string {
	t.Helper()
	o := synth.DefaultOptions(synth.GptOss)
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.HeadDim = 4, 128, 4, 2, 128, 64
	o.Experts, o.ExpertsUsed, o.ExpertFF, o.Window = 8, 3, 64, 8
	o.Type, o.ExpertType, o.Seed, o.VocabData = typ, experts, 11, vocab.LlamaSPM
	path := filepath.Join(t.TempDir(), "gpt-oss.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// gptOssRef is a float64 forward pass of gpt-oss written from its
// definition (transformers' GptOss model and the gpt-oss model card): q/k/v
// and output biases, NeoX RoPE with YaRN frequencies and attention factor
// (transformers' _compute_yarn_parameters), attention over the window on
// even layers with each head's sink as an extra softmax column, a biased
// router whose top k logits are softmaxed, biased experts with the clamped
// SwiGLU, over the file's weights dequantized.
type gptOssRef struct {
	*refModel
	invFreq []float64
	mscale  float64
}

func newGptOssRef(t *testing.T, path string) *gptOssRef {
	r := &gptOssRef{refModel: newRefModel(t, path)}
	hp := r.hp
	d, base := float64(hp.RopeDims), float64(hp.RopeBase)
	factor := 1 / float64(hp.RopeScale)
	corr := func(rot float64) float64 {
		return d * math.Log(float64(hp.RopeCtxOrig)/(rot*2*math.Pi)) / (2 * math.Log(base))
	}
	low := math.Max(math.Floor(corr(float64(hp.RopeBetaFast))), 0)
	high := math.Min(math.Ceil(corr(float64(hp.RopeBetaSlow))), d-1)
	if low == high {
		high += 0.001
	}
	for i := 0; i < hp.RopeDims/2; i++ {
		extrap := 1 / math.Pow(base, 2*float64(i)/d)
		interp := extrap / factor
		ramp := math.Min(1, math.Max(0, (float64(i)-low)/(high-low)))
		extrapFactor := 1 - ramp
		r.invFreq = append(r.invFreq, interp*(1-extrapFactor)+extrap*extrapFactor)
	}
	r.mscale = 0.1*math.Log(factor) + 1
	return r
}

func (r *gptOssRef) rope(x []float64, heads, pos int) {
	d, half := r.hp.HeadDim, r.hp.RopeDims/2
	for h := 0; h < heads; h++ {
		v := x[h*d:]
		for i := 0; i < half; i++ {
			c, s := math.Cos(float64(pos)*r.invFreq[i])*r.mscale, math.Sin(float64(pos)*r.invFreq[i])*r.mscale
			v[i], v[i+half] = v[i]*c-v[i+half]*s, v[i]*s+v[i+half]*c
		}
	}
}

func addTo(x, y []float64) {
	for i := range x {
		x[i] += y[i]
	}
}

func (r *gptOssRef) step(tok int) []float64 {
	hp := r.hp
	E, hd, eps := hp.Embd, hp.HeadDim, float64(hp.RMSEps)
	const alpha, limit = 1.702, 7.0
	x := append([]float64(nil), r.w["token_embd.weight"][tok*E:(tok+1)*E]...)
	for l := 0; l < hp.Layers; l++ {
		p := func(name string) []float64 { return r.w[fmt.Sprintf("blk.%d.%s", l, name)] }
		h := rmsNorm(x, p("attn_norm.weight"), eps)
		q, k, v := matVec(p("attn_q.weight"), 0, hp.QDim(), h), matVec(p("attn_k.weight"), 0, hp.KVDim(), h), matVec(p("attn_v.weight"), 0, hp.KVDim(), h)
		addTo(q, p("attn_q.bias"))
		addTo(k, p("attn_k.bias"))
		addTo(v, p("attn_v.bias"))
		pos := len(r.k[l])
		r.rope(q, hp.Heads, pos)
		r.rope(k, hp.KVHeads, pos)
		r.k[l], r.v[l] = append(r.k[l], k), append(r.v[l], v)
		first := 0
		if l%2 == 0 { // sliding layers: key j is seen iff pos − j < window
			first = max(0, pos+1-hp.Window)
		}
		att := make([]float64, hp.QDim())
		for i := 0; i < hp.Heads; i++ {
			g := i / (hp.Heads / hp.KVHeads)
			sink := p("attn_sinks.weight")[i]
			sc := make([]float64, pos+1)
			m := sink
			for j := first; j <= pos; j++ {
				var s float64
				for c := 0; c < hd; c++ {
					s += q[i*hd+c] * r.k[l][j][g*hd+c]
				}
				sc[j] = s / math.Sqrt(float64(hd))
				m = math.Max(m, sc[j])
			}
			sum := math.Exp(sink - m)
			for j := first; j <= pos; j++ {
				sc[j] = math.Exp(sc[j] - m)
				sum += sc[j]
			}
			for j := first; j <= pos; j++ {
				for c := 0; c < hd; c++ {
					att[i*hd+c] += sc[j] / sum * r.v[l][j][g*hd+c]
				}
			}
		}
		o := matVec(p("attn_output.weight"), 0, E, att)
		addTo(o, p("attn_output.bias"))
		addTo(x, o)

		h = rmsNorm(x, p("post_attention_norm.weight"), eps)
		logits := matVec(p("ffn_gate_inp.weight"), 0, hp.Experts, h)
		addTo(logits, p("ffn_gate_inp.bias"))
		ids := make([]int, hp.Experts)
		for i := range ids {
			ids[i] = i
		}
		sort.SliceStable(ids, func(a, b int) bool { return logits[ids[a]] > logits[ids[b]] })
		ids = ids[:hp.ExpertsUsed]
		wts, z := make([]float64, len(ids)), 0.0
		for j, e := range ids {
			wts[j] = math.Exp(logits[e] - logits[ids[0]])
			z += wts[j]
		}
		ff := hp.ExpertFF
		for j, e := range ids {
			g, u := matVec(p("ffn_gate_exps.weight"), e*ff, ff, h), matVec(p("ffn_up_exps.weight"), e*ff, ff, h)
			addTo(g, p("ffn_gate_exps.bias")[e*ff:(e+1)*ff])
			addTo(u, p("ffn_up_exps.bias")[e*ff:(e+1)*ff])
			for i := range g {
				gi, ui := math.Min(g[i], limit), math.Max(-limit, math.Min(u[i], limit))
				g[i] = gi / (1 + math.Exp(-alpha*gi)) * (ui + 1)
			}
			y := matVec(p("ffn_down_exps.weight"), e*E, E, g)
			addTo(y, p("ffn_down_exps.bias")[e*E:(e+1)*E])
			for i := range x {
				x[i] += wts[j] / z * y[i]
			}
		}
	}
	return matVec(r.w["output.weight"], 0, hp.Vocab, rmsNorm(x, r.w["output_norm.weight"], eps))
}

// gpt-oss written by synth loads with its traits and keys, then prefills
// a prompt longer than the window and decodes greedily as the float64
// definition does: last logits to cosine ≥ 0.99999 with F16 or MXFP4
// experts (the other weights F16: the fp16 rounding of their activations
// is most of what separates them), the same greedy tokens.
func TestGptOssMatchesReferenceForward(t *testing.T) {
	for _, c := range []struct {
		experts ggml.Type
		minCos  float64
	}{{ggml.F16, 0.99999}, {ggml.MXFP4, 0.99999}} {
		t.Run(c.experts.String(), func(t *testing.T) {
			path := synthGptOss(t, ggml.F16, c.experts)
			b := cpu.New(2)
			defer b.Close()
			m, err := model.Open(path, b)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			hp := m.HP
			if hp.Arch != "gpt-oss" || !hp.QKVBias || !hp.RopeNeox || hp.Window != 8 || hp.SWAPattern != 2 || hp.ExpertNorm ||
				hp.ExpertGating != backend.GatingSoftmaxTopK || hp.RopeExtFactor != 1 || hp.RopeScale != 1.0/32 || hp.RopeCtxOrig != 4096 {
				t.Fatalf("hparams %+v", hp)
			}
			if ls := hp.Layer(0); ls.Window != 8 || ls.ExpertAct != model.SwiGLUClamped || ls.ClampAlpha != 1.702 || ls.ClampLimit != 7 {
				t.Fatalf("layer 0 %+v", ls)
			}
			if ls := hp.Layer(1); ls.Window != 0 {
				t.Fatalf("layer 1 window %d, want global", ls.Window)
			}
			if l := m.Layers[1]; l.Bo == nil || l.Sinks == nil || l.GateInpBias == nil || l.DownExpsBias == nil {
				t.Fatal("biases or sinks not bound")
			}
			st, err := m.NewState(kv.Config{Type: kv.F16, Ctx: 64}, 16)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ref := newGptOssRef(t, path)
			prompt := []int32{1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203}
			var want []float64
			for _, tok := range prompt {
				want = ref.step(int(tok))
			}
			logits := make([]float32, hp.Vocab)
			if err := st.Forward(prompt, 0, logits); err != nil {
				t.Fatal(err)
			}
			worst := 1.0
			for i := 0; i < 12; i++ {
				cos := cosine(logits, want)
				worst = min(worst, cos)
				if cos < c.minCos {
					t.Fatalf("step %d: cosine %.6f with the reference, want ≥ %g", i, cos, c.minCos)
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
			t.Logf("worst cosine %.7f over 12 steps", worst)
		})
	}
}

// A sinks tensor that is not F32, or of the wrong width, is refused at
// load with the tensor named.
func TestGptOssLoadRefusesBadSinks(t *testing.T) {
	path := synthGptOss(t, ggml.F16, ggml.MXFP4)
	bad := rewrite(t, path, func(_ map[string]any, ts map[string][]uint64) { ts["blk.1.attn_sinks.weight"] = []uint64{3} })
	b := cpu.New(1)
	defer b.Close()
	if _, err := model.Open(bad, b); err == nil || !strings.Contains(err.Error(), `"blk.1.attn_sinks.weight" has wrong shape`) {
		t.Fatalf("sinks of 3 heads: %v", err)
	}
}
