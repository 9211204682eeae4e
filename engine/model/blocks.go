package model

import "nibble/engine/backend"

// The blocks every family's forward pass is made of. Each issues backend
// ops on the state's activations: x is the residual stream, h the block's
// input and output.

// embed writes the tokens' embeddings into x, scaled where the family
// scales them.
func (s *State) embed(p *pass) {
	hp := &s.m.HP
	s.b.Embed(s.x, s.m.TokEmbd, p.tokens)
	if hp.EmbdScale {
		s.b.Scale(s.x, hp.EmbdScaleFactor(), p.n*hp.Embd)
	}
}

// attention is block li's attention on x, leaving Wo·attention in h:
// attn_norm, the q/k/v projections (and biases), the per-head q/k norms
// where the layer has them (and v's, Gemma 4), RoPE, the cache and the
// attention op. A layer that shares K/V attends over its source layer's
// cache, and the source's K and V of a prefill batch, and stores nothing.
func (s *State) attention(p *pass, li int) error {
	b, hp, l, ls := s.b, &s.m.HP, &s.m.Layers[li], &s.specs[li]
	n, pos := p.n, p.pos
	hd, kvh := ls.HeadDim, ls.KVHeads
	b.RMSNorm(s.h, s.x, l.AttnNorm, hp.RMSEps, n)
	b.MatMul(s.q, l.Wq, s.h, n)
	if l.Bq != nil {
		b.AddBias(s.q, l.Bq, n)
	}
	if ls.QKNorm {
		// Rows of one head: the norm weights are head_dim wide.
		b.RMSNorm(s.q, s.q, l.QNorm, hp.RMSEps, n*hp.Heads)
	}
	b.RoPE(s.q, hp.Heads, hd, n, s.pos[:n], &ls.Rope)
	if src := ls.KVSource; src != li {
		if n == 1 {
			b.AttendDecode(s.att, s.q, s.Cache, src, pos+1, &s.attn[li])
		} else {
			kv := s.saved[src]
			b.AttendPrefill(s.att, s.q, kv[0], kv[1], s.Cache, src, pos, n, &s.attn[li])
		}
		b.MatMul(s.h, l.Wo, s.att, n)
		return nil
	}
	k, v := s.k, s.v
	saved, deferred := s.saved[li]
	deferred = deferred && n > 1
	if deferred {
		k, v = saved[0], saved[1]
	}
	b.MatMul(k, l.Wk, s.h, n)
	if l.Wv != nil {
		b.MatMul(v, l.Wv, s.h, n)
	} else {
		// Gemma 4 without attn_v: v is k's projection, before k's norm and
		// RoPE.
		b.Copy(v, 0, k, 0, n*kvh*hd)
	}
	if l.Bk != nil {
		b.AddBias(k, l.Bk, n)
		b.AddBias(v, l.Bv, n)
	}
	if ls.QKNorm {
		b.RMSNorm(k, k, l.KNorm, hp.RMSEps, n*kvh)
	}
	if ls.VNorm {
		s.b.(backend.Gemma4Ops).RMSNormPlain(v, v, hp.RMSEps, n*kvh, hd)
	}
	b.RoPE(k, kvh, hd, n, s.pos[:n], &ls.Rope)
	if pos == 0 && s.calib != nil {
		lambda, err := s.smoothingFor(li, k, n, kvh, hd)
		if err != nil {
			return err
		}
		b.KVSetSmoothing(s.Cache, li, lambda)
	}
	if n == 1 {
		b.KVStore(s.Cache, li, k, v, pos, 1)
		b.AttendDecode(s.att, s.q, s.Cache, li, pos+1, &s.attn[li])
	} else {
		// Hybrid prefill: attend in float over the new rows, then quantize
		// them into the cache (for a layer others read, once they have
		// attended: storeDeferred).
		b.AttendPrefill(s.att, s.q, k, v, s.Cache, li, pos, n, &s.attn[li])
		if !deferred {
			b.KVStore(s.Cache, li, k, v, pos, n)
		}
	}
	b.MatMul(s.h, l.Wo, s.att, n)
	if l.Bo != nil {
		b.AddBias(s.h, l.Bo, n)
	}
	return nil
}

// storeDeferred stores the prefill batch's K and V of the layers others
// read, after every layer has attended (a sliding layer's ring would
// otherwise lose positions the sharing layers still see).
func (s *State) storeDeferred(p *pass) {
	if p.n == 1 {
		return
	}
	for _, src := range s.m.HP.KVShareSources() {
		kv := s.saved[src]
		s.b.KVStore(s.Cache, src, kv[0], kv[1], p.pos, p.n)
	}
}

// feedForward is block li's gated feed-forward on x, leaving
// down(act(gate)·up) of ffn_norm(x) in h.
func (s *State) feedForward(p *pass, li int) {
	hp, l := &s.m.HP, &s.m.Layers[li]
	s.b.RMSNorm(s.h, s.x, l.FFNNorm, hp.RMSEps, p.n)
	s.gatedFFN(p.n, s.h, s.h, l.Gate, l.Up, l.Down, s.specs[li].FF, s.specs[li].Act)
}

// postNorm normalises the block output h in place (Gemma's post norms).
func (s *State) postNorm(p *pass, w backend.Weight) {
	s.b.RMSNorm(s.h, s.h, w, s.m.HP.RMSEps, p.n)
}

// residual adds the block output h to x.
func (s *State) residual(p *pass) { s.b.Add(s.x, s.h, p.n*s.m.HP.Embd) }

// output normalises x and projects it to logits, soft-capped where the
// family caps them: every row's to p.each, else the last row's to
// p.logits.
func (s *State) output(p *pass) error {
	m, b, hp := s.m, s.b, &s.m.HP
	n, E := p.n, hp.Embd
	if p.each != nil {
		if s.allLogits == nil {
			s.allLogits = b.Alloc(s.maxBatch * hp.Vocab)
		}
		all := s.allLogits
		b.RMSNorm(s.h, s.x, m.OutputNorm, hp.RMSEps, n)
		b.MatMul(all, m.Output, s.h, n)
		if hp.FinalSoftcap > 0 {
			b.Softcap(all, hp.FinalSoftcap, n*hp.Vocab)
		}
		if err := b.Sync(); err != nil {
			return err
		}
		row := make([]float32, hp.Vocab)
		for i := 0; i < n; i++ {
			b.Read(row, all, i*hp.Vocab)
			p.each(i, row)
		}
		return nil
	}
	b.Copy(s.last, 0, s.x, (n-1)*E, E)
	b.RMSNorm(s.last, s.last, m.OutputNorm, hp.RMSEps, 1)
	b.MatMul(s.logits, m.Output, s.last, 1)
	if hp.FinalSoftcap > 0 {
		b.Softcap(s.logits, hp.FinalSoftcap, hp.Vocab)
	}
	if err := b.Sync(); err != nil {
		return err
	}
	b.Read(p.logits[:hp.Vocab], s.logits, 0)
	return nil
}
