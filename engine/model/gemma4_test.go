package model_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/half"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/engine/synth"
)

// gemma4Options is a small E-style Gemma 4: 9 layers, every third global
// (2, 5, 8) with heads twice as wide and one kv head where the sliding
// layers have two, v from k on the global layers, a window of 8, the last
// three layers sharing K/V (6 and 7 read 4, 8 reads 5) and per-layer
// inputs.
func gemma4Options() synth.Options {
	o := synth.DefaultOptions("gemma4")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.HeadDim, o.FF, o.Window = 9, 64, 4, 2, 16, 96, 8
	o.Type, o.Seed, o.VocabData = ggml.F16, 5, vocab.LlamaSPM
	o.Gemma4 = synth.Gemma4Options{GlobalEvery: 3, KVHeadsGlobal: 1, SharedKVLayers: 3, PerLayerEmbd: 16, GlobalVFromK: true}
	return o
}

func writeGemma4(t *testing.T, o synth.Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gemma4.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatalf("synth gemma4: %v", err)
	}
	return path
}

// The file says what the synth options asked for, in llama.cpp's keys.
func TestGemma4HParams(t *testing.T) {
	path := writeGemma4(t, gemma4Options())
	b := cpu.New(1)
	defer b.Close()
	m, err := model.Open(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	hp := m.HP
	wantSliding := []bool{true, true, false, true, true, false, true, true, false}
	if !slices.Equal(hp.SlidingLayers, wantSliding) || hp.HeadDim != 32 || hp.HeadDimLocal != 16 ||
		hp.SharedKVLayers != 3 || hp.PerLayerEmbd != 16 || hp.AttnScale != 1 || hp.FinalSoftcap != 30 || hp.RopeBaseLocal != 10000 {
		t.Fatalf("hparams %+v", hp)
	}
	for il, want := range []int{0, 1, 2, 3, 4, 5, 4, 4, 5} {
		ls := hp.Layer(il)
		if ls.KVSource != want {
			t.Errorf("layer %d reads the cache of layer %d, want %d", il, ls.KVSource, want)
		}
		wantHD, wantKV := 16, 2
		if !wantSliding[il] {
			wantHD, wantKV = 32, 1
		}
		if ls.HeadDim != wantHD || ls.KVHeads != wantKV || (ls.Window > 0) != wantSliding[il] {
			t.Errorf("layer %d: head dim %d, kv heads %d, window %d", il, ls.HeadDim, ls.KVHeads, ls.Window)
		}
	}
	if m.Layers[2].Wv != nil || m.Layers[0].Wv == nil || m.Layers[6].Wk != nil || m.Layers[3].OutScale == 0 {
		t.Error("attn_v on a global layer, none on a sliding one, attn_k on a sharing layer, or no output scale")
	}
	if len(m.RopeFreqs) != 16 || m.RopeFreqs[3] != 1 || m.RopeFreqs[4] != 1e30 {
		t.Errorf("rope_freqs %v: want 4 rotated pairs of 16", m.RopeFreqs)
	}
}

// The forward pass against a float64 reference written from transformers'
// Gemma 4 (Gemma4TextModel: proportional RoPE on the global layers as
// zero inverse frequencies past the rotated ones, shared K/V from the last
// layer of the same kind before the sharing starts, per-layer inputs): a
// prompt three windows long, prefilled whole, in batches of 5 and token by
// token, with an f16 cache; and the same after 6 greedy decode steps.
func TestGemma4MatchesReference(t *testing.T) {
	o := gemma4Options()
	path := writeGemma4(t, o)
	ref := loadGemma4Ref(t, path)
	prompt := []int32{1, 450, 7483, 310, 3444, 338, 263, 4272, 29889, 306, 763, 1762, 322, 6257, 29892, 541, 306, 884, 763, 27274, 29889, 739, 338, 4688}
	b := cpu.New(2)
	defer b.Close()
	m, err := model.Open(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, batch := range []int{len(prompt), 5, 1} {
		t.Run(fmt.Sprintf("batch %d", batch), func(t *testing.T) {
			s, err := m.NewState(kv.Config{Type: kv.F16, Ctx: 64}, batch)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			logits := make([]float32, m.HP.Vocab)
			for pos := 0; pos < len(prompt); pos += batch {
				end := min(pos+batch, len(prompt))
				if err := s.Forward(prompt[pos:end], pos, logits); err != nil {
					t.Fatal(err)
				}
			}
			seq := slices.Clone(prompt)
			compareLogits(t, "prompt", logits, ref.forward(seq))
			for step := range 6 {
				next := int32(argmax(logits))
				if err := s.Forward([]int32{next}, len(seq), logits); err != nil {
					t.Fatal(err)
				}
				seq = append(seq, next)
				if step == 5 {
					compareLogits(t, "after 6 greedy tokens", logits, ref.forward(seq))
				}
			}
		})
	}
}

func compareLogits(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	var dot, gg, ww float64
	for i, w := range want {
		g := float64(got[i])
		dot, gg, ww = dot+g*w, gg+g*g, ww+w*w
	}
	cos := dot / math.Sqrt(gg*ww)
	top := func(x func(int) float64) []int {
		idx := make([]int, len(want))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return x(idx[a]) > x(idx[b]) })
		return idx[:10]
	}
	gt, wt := top(func(i int) float64 { return float64(got[i]) }), top(func(i int) float64 { return want[i] })
	t.Logf("%s: cosine %.8f, top-10 %v", what, cos, gt)
	// Random weights leave near-ties in the top 10: the ids must be the
	// same, in the same order except where the reference's logits are
	// within 1e-4 of each other.
	sameOrder := true
	for i := range gt {
		if gt[i] != wt[i] && math.Abs(want[gt[i]]-want[wt[i]]) > 1e-4 {
			sameOrder = false
		}
	}
	gs, ws := slices.Clone(gt), slices.Clone(wt)
	slices.Sort(gs)
	slices.Sort(ws)
	if cos < 0.99999 || !slices.Equal(gs, ws) || !sameOrder {
		t.Errorf("%s: cosine %.8f (want ≥ 0.99999), top-10 %v, reference %v", what, cos, gt, wt)
	}
}

// gemma4Ref is the float64 reference: the weights of the file as float64.
type gemma4Ref struct {
	hp  model.HParams
	w   map[string][]float64
	dim map[string][2]int // cols, rows
}

func loadGemma4Ref(t *testing.T, path string) *gemma4Ref {
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
	r := &gemma4Ref{hp: hp, w: map[string][]float64{}, dim: map[string][2]int{}}
	for _, ti := range f.Tensors {
		data := f.TensorData(&ti)
		n := 1
		for _, d := range ti.Dims {
			n *= int(d)
		}
		v := make([]float64, n)
		for i := range v {
			switch ti.Type {
			case ggml.F16:
				v[i] = float64(half.ToFloat32(binary.LittleEndian.Uint16(data[2*i:])))
			case ggml.F32:
				v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])))
			default:
				t.Fatalf("tensor %s: type %s", ti.Name, ti.Type)
			}
		}
		rows := n / int(ti.Dims[0])
		r.w[ti.Name], r.dim[ti.Name] = v, [2]int{int(ti.Dims[0]), rows}
	}
	return r
}

// mv is W·x for the tensor name (rows of len(x)).
func (r *gemma4Ref) mv(name string, x []float64) []float64 {
	w, d := r.w[name], r.dim[name]
	if w == nil || d[0] != len(x) {
		panic(fmt.Sprintf("reference: %s is %v, input %d", name, d, len(x)))
	}
	out := make([]float64, d[1])
	for i := range out {
		var s float64
		for j, xj := range x {
			s += w[i*d[0]+j] * xj
		}
		out[i] = s
	}
	return out
}

func (r *gemma4Ref) norm(x []float64, weight string) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+float64(r.hp.RMSEps))
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s
		if weight != "" {
			out[i] *= r.w[weight][i]
		}
	}
	return out
}

func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// rope rotates each head of x (NeoX pairs i, i+d/2) at position pos by the
// inverse frequencies of transformers' Gemma 4: base^(−2i/d) on the sliding
// layers; on the global ones the same for the first partial·d/2 pairs and
// 0 for the rest (proportional RoPE).
func (r *gemma4Ref) rope(x []float64, heads, d, pos int, sliding bool) {
	base, rotated := float64(r.hp.RopeBase), d/2
	if sliding {
		base = float64(r.hp.RopeBaseLocal)
	} else {
		rotated = int(0.25 * float64(d) / 2)
	}
	for h := range heads {
		v := x[h*d : (h+1)*d]
		for i := range d / 2 {
			inv := 0.0
			if i < rotated {
				inv = math.Pow(base, -2*float64(i)/float64(d))
			}
			s, c := math.Sincos(float64(pos) * inv)
			a, b := v[i], v[i+d/2]
			v[i], v[i+d/2] = a*c-b*s, a*s+b*c
		}
	}
}

// forward returns the last position's logits for tokens.
func (r *gemma4Ref) forward(tokens []int32) []float64 {
	hp := r.hp
	E, L, P, T := hp.Embd, hp.Layers, hp.PerLayerEmbd, len(tokens)
	blk := func(il int, name string) string { return fmt.Sprintf("blk.%d.%s.weight", il, name) }
	emb := r.w["token_embd.weight"]
	x := make([][]float64, T)
	pl := make([][]float64, T) // per-layer inputs, L·P per token
	for t, tok := range tokens {
		x[t] = make([]float64, E)
		for i := range E {
			x[t][i] = emb[int(tok)*E+i] * float64(float32(math.Sqrt(float64(E))))
		}
		if P == 0 {
			continue
		}
		proj := r.mv("per_layer_model_proj.weight", x[t])
		pl[t] = make([]float64, L*P)
		for il := range L {
			part := make([]float64, P)
			for i := range P {
				part[i] = proj[il*P+i] / math.Sqrt(float64(E))
			}
			part = r.norm(part, "per_layer_proj_norm.weight")
			for i := range P {
				tokPart := r.w["per_layer_token_embd.weight"][int(tok)*L*P+il*P+i] * math.Sqrt(float64(P))
				pl[t][il*P+i] = (part[i] + tokPart) / math.Sqrt2
			}
		}
	}
	type kvRows struct{ k, v [][]float64 }
	cache := map[int]kvRows{}
	for il := range L {
		ls := hp.Layer(il)
		sliding, hd, kvh, H := hp.SlidingLayer(il), ls.HeadDim, ls.KVHeads, hp.Heads
		q := make([][]float64, T)
		own := ls.KVSource == il
		var kv kvRows
		if own {
			kv = kvRows{make([][]float64, T), make([][]float64, T)}
		} else {
			kv = cache[ls.KVSource]
		}
		for t := range T {
			h := r.norm(x[t], blk(il, "attn_norm"))
			q[t] = r.mv(blk(il, "attn_q"), h)
			for hh := range H {
				copy(q[t][hh*hd:], r.norm(q[t][hh*hd:(hh+1)*hd], blk(il, "attn_q_norm")))
			}
			r.rope(q[t], H, hd, t, sliding)
			if !own {
				continue
			}
			k := r.mv(blk(il, "attn_k"), h)
			v := slices.Clone(k)
			if _, ok := r.w[blk(il, "attn_v")]; ok {
				v = r.mv(blk(il, "attn_v"), h)
			}
			for hh := range kvh {
				copy(k[hh*hd:], r.norm(k[hh*hd:(hh+1)*hd], blk(il, "attn_k_norm")))
				copy(v[hh*hd:], r.norm(v[hh*hd:(hh+1)*hd], ""))
			}
			r.rope(k, kvh, hd, t, sliding)
			kv.k[t], kv.v[t] = k, v
		}
		if own {
			cache[il] = kv
		}
		for t := range T {
			att := make([]float64, H*hd)
			for hh := range H {
				g := hh / (H / kvh)
				qh := q[t][hh*hd : (hh+1)*hd]
				var scores []float64
				var js []int
				for j := 0; j <= t; j++ {
					if sliding && t-j >= hp.Window {
						continue
					}
					var s float64
					for i := range hd {
						s += qh[i] * kv.k[j][g*hd+i]
					}
					scores, js = append(scores, s*float64(hp.AttnScale)), append(js, j)
				}
				mx := slices.Max(scores)
				var sum float64
				for i := range scores {
					scores[i] = math.Exp(scores[i] - mx)
					sum += scores[i]
				}
				for n, j := range js {
					for i := range hd {
						att[hh*hd+i] += scores[n] / sum * kv.v[j][g*hd+i]
					}
				}
			}
			o := r.norm(r.mv(blk(il, "attn_output"), att), blk(il, "post_attention_norm"))
			for i := range E {
				x[t][i] += o[i]
			}
			h := r.norm(x[t], blk(il, "ffn_norm"))
			gate, up := r.mv(blk(il, "ffn_gate"), h), r.mv(blk(il, "ffn_up"), h)
			for i := range gate {
				gate[i] = geluTanh(gate[i]) * up[i]
			}
			o = r.mv(blk(il, "ffn_down"), gate)
			if hp.MoE() {
				o = r.norm(o, blk(il, "post_ffw_norm_1"))
				moe := r.norm(r.experts(il, x[t]), blk(il, "post_ffw_norm_2"))
				for i := range o {
					o[i] += moe[i]
				}
			}
			o = r.norm(o, blk(il, "post_ffw_norm"))
			for i := range E {
				x[t][i] += o[i]
			}
			if P > 0 {
				pg := r.mv(blk(il, "inp_gate"), x[t])
				for i := range pg {
					pg[i] = geluTanh(pg[i]) * pl[t][il*P+i]
				}
				o = r.norm(r.mv(blk(il, "proj"), pg), blk(il, "post_norm"))
				for i := range E {
					x[t][i] += o[i]
				}
			}
			scale := r.w[blk(il, "layer_output_scale")][0]
			for i := range E {
				x[t][i] *= scale
			}
		}
	}
	out := r.norm(x[T-1], "output_norm.weight")
	logits := r.mv("token_embd.weight", out)
	c := float64(hp.FinalSoftcap)
	for i, l := range logits {
		logits[i] = c * math.Tanh(l/c)
	}
	return logits
}

// experts is the experts' part of a Gemma 4 MoE block for the block input
// x, as transformers' Gemma4TextRouter and Gemma4TextExperts compute it:
// softmax over the router's logits on RMSNorm(x)·scale/sqrt(n_embd), the
// top k renormalised and scaled by their experts' factors, each expert
// down(gelu_tanh(gate·in)·(up·in)) on in = pre_ffw_norm_2(x), gate and up
// the halves of its gate_up rows.
func (r *gemma4Ref) experts(il int, x []float64) []float64 {
	hp := r.hp
	blk := func(name string) string { return fmt.Sprintf("blk.%d.%s", il, name) }
	rin := r.norm(x, blk("ffn_gate_inp.scale"))
	for i := range rin {
		rin[i] /= math.Sqrt(float64(hp.Embd))
	}
	logits := r.mv(blk("ffn_gate_inp.weight"), rin)
	mx := slices.Max(logits)
	probs := make([]float64, len(logits))
	var sum float64
	for i, l := range logits {
		probs[i] = math.Exp(l - mx)
		sum += probs[i]
	}
	ids := make([]int, len(probs))
	for i := range ids {
		ids[i] = i
	}
	sort.SliceStable(ids, func(a, b int) bool { return probs[ids[a]] > probs[ids[b]] })
	ids = ids[:hp.ExpertsUsed]
	var top float64
	for _, e := range ids {
		top += probs[e] / sum
	}
	in := r.norm(x, blk("pre_ffw_norm_2.weight"))
	out := make([]float64, hp.Embd)
	ff := hp.ExpertFF
	for _, e := range ids {
		w := probs[e] / sum / top * r.w[blk("ffn_down_exps.scale")][e]
		gu := r.rows(blk("ffn_gate_up_exps.weight"), e*2*ff, 2*ff, in)
		act := make([]float64, ff)
		for i := range act {
			act[i] = geluTanh(gu[i]) * gu[ff+i]
		}
		y := r.rows(blk("ffn_down_exps.weight"), e*hp.Embd, hp.Embd, act)
		for i := range out {
			out[i] += w * y[i]
		}
	}
	return out
}

// rows is rows [lo, lo+n) of the tensor name times x.
func (r *gemma4Ref) rows(name string, lo, n int, x []float64) []float64 {
	w, cols := r.w[name], r.dim[name][0]
	out := make([]float64, n)
	for i := range out {
		for j, xj := range x {
			out[i] += w[(lo+i)*cols+j] * xj
		}
	}
	return out
}

// The 26B-A4B's block on a small synth: a dense feed-forward beside 16
// experts (4 chosen) with Gemma 4's norms, router input and per-expert
// factors, against the reference, prefilled whole and token by token.
func TestGemma4MoEMatchesReference(t *testing.T) {
	o := gemma4Options()
	o.Layers, o.Gemma4.SharedKVLayers, o.Gemma4.PerLayerEmbd = 6, 0, 0
	o.Experts, o.ExpertsUsed, o.ExpertFF = 16, 4, 32
	path := writeGemma4(t, o)
	ref := loadGemma4Ref(t, path)
	prompt := []int32{1, 450, 7483, 310, 3444, 338, 263, 4272, 29889, 306, 763, 1762, 322, 6257, 29892, 541, 306, 884, 763, 27274}
	b := cpu.New(2)
	defer b.Close()
	m, err := model.Open(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.HP.MoE() || m.Layers[0].DownExpsScale == nil || m.Layers[0].FFNPreNorm2 == nil {
		t.Fatalf("not Gemma 4's experts: %+v", m.HP)
	}
	want := ref.forward(prompt)
	for _, batch := range []int{len(prompt), 1} {
		s, err := m.NewState(kv.Config{Type: kv.F16, Ctx: 64}, batch)
		if err != nil {
			t.Fatal(err)
		}
		logits := make([]float32, m.HP.Vocab)
		for pos := 0; pos < len(prompt); pos += batch {
			if err := s.Forward(prompt[pos:min(pos+batch, len(prompt))], pos, logits); err != nil {
				t.Fatal(err)
			}
		}
		compareLogits(t, fmt.Sprintf("batch %d", batch), logits, want)
		s.Close()
	}
}

// The real models' head dims, 256 on sliding and 512 on global layers, on a
// short synth against the reference (f16 cache, batches of 4, a prompt that
// crosses the window).
func TestGemma4WideHeadsMatchReference(t *testing.T) {
	o := gemma4Options()
	o.Layers, o.Heads, o.KVHeads, o.HeadDim = 4, 2, 1, 256
	o.Gemma4 = synth.Gemma4Options{GlobalEvery: 3, SharedKVLayers: 1, PerLayerEmbd: 16}
	path := writeGemma4(t, o)
	ref := loadGemma4Ref(t, path)
	prompt := []int32{1, 450, 7483, 310, 3444, 338, 263, 4272, 29889, 306, 763, 1762, 322}
	b := cpu.New(2)
	defer b.Close()
	m, err := model.Open(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.HP.HeadDimOf(0) != 256 || m.HP.HeadDimOf(2) != 512 {
		t.Fatalf("head dims %d and %d", m.HP.HeadDimOf(0), m.HP.HeadDimOf(2))
	}
	s, err := m.NewState(kv.Config{Type: kv.F16, Ctx: 32}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logits := make([]float32, m.HP.Vocab)
	for pos := 0; pos < len(prompt); pos += 4 {
		if err := s.Forward(prompt[pos:min(pos+4, len(prompt))], pos, logits); err != nil {
			t.Fatal(err)
		}
	}
	compareLogits(t, "head dims 256/512", logits, ref.forward(prompt))
}
