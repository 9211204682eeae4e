package model

import (
	"fmt"
	"slices"
	"sync"

	"nibble/engine/backend"
	"nibble/engine/family"
	"nibble/engine/kv"
)

// State is one sequence's working memory: its KV cache and the activation
// tensors of a forward pass, all allocated up front for maxBatch rows.
type State struct {
	m        *Model
	b        backend.Backend
	Cache    backend.KVCache
	maxBatch int
	specs    []LayerSpec         // per layer, from the model's HParams when the state was made
	attn     []backend.Attention // per layer: the spec's geometry, scale, window and soft-cap
	ex       backend.Experts     // the backend's experts ops (nil without experts)
	lay      family.Layout       // the family's tensor layout (for the experts' block)

	x, h, q, k, v, att, gate, up, last, logits backend.Tensor
	allLogits                                  backend.Tensor // maxBatch×vocab, made on first ForwardAll
	moe                                        moeScratch     // a mixture of experts' tensors (nil without experts)
	// Gemma 4's per-layer inputs (nil without them): every layer's for the
	// batch, the token part while they are made, one layer's, its gate.
	pl, plTok, pli, plg backend.Tensor
	rin                 backend.Tensor // Gemma 4's experts: the router's input, then their sum
	// saved holds, per layer others read the cache of, a prefill batch's K
	// and V until those layers have attended (kSaved, vSaved by layer).
	saved  map[int][2]backend.Tensor
	extras []backend.Tensor // the tensors above, for Close
	pos    []int32
	// Channel smoothing calibration (nil when the cache does not smooth):
	// the K rows of a batch at position 0 are read back one at a time into
	// kRow and summed in a calibration per head shape; lambda receives the
	// factors.
	calib        map[kv.Geometry]*kv.Calibration
	kRow, lambda []float32
	// provisional: a batch at position 0 found no frozen λ and was too
	// short to calibrate, so it was stored unsmoothed (SmoothingStale).
	provisional bool
}

// NewState allocates a cache of kvc and activations for batches of maxBatch
// on the model's backend.
func (m *Model) NewState(kvc kv.Config, maxBatch int) (*State, error) {
	hp, b := m.HP, m.Backend
	if maxBatch <= 0 {
		return nil, fmt.Errorf("batch size %d must be positive", maxBatch)
	}
	kvc = hp.CacheConfig(kvc, true)
	if err := kvc.Validate(); err != nil {
		return nil, err
	}
	if kvc.Evicts() && hp.SharedKVLayers > 0 {
		return nil, fmt.Errorf("a cache that evicts cannot serve layers that share K/V (%d of %d here)", hp.SharedKVLayers, hp.Layers)
	}
	s := &State{m: m, b: b, maxBatch: maxBatch, specs: make([]LayerSpec, hp.Layers), attn: make([]backend.Attention, hp.Layers)}
	factors := m.ropeFactorsFor(kvc.Ctx)
	for il := range s.specs {
		ls := hp.Layer(il)
		if !hp.RopeFreqsGlobal || !hp.SlidingLayer(il) {
			ls.Rope.FreqFactors = factors
		}
		s.specs[il] = ls
		s.attn[il] = backend.Attention{Heads: hp.Heads, KVHeads: ls.KVHeads, HeadDim: ls.HeadDim,
			Scale: ls.Scale, Window: ls.Window, Softcap: ls.Softcap, Sinks: m.Layers[il].Sinks}
	}
	cache, err := b.NewKVCache(kvc, hp.Heads, maxBatch)
	if err != nil {
		return nil, err
	}
	s.Cache = cache
	sizes := activations(hp, maxBatch)
	t := make([]backend.Tensor, 0, len(sizes))
	for _, n := range sizes {
		t = append(t, b.Alloc(n))
	}
	s.x, s.h, s.q, s.k, s.v, s.att, s.gate, s.up, s.last, s.logits = t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]
	rest := t[10:]
	if hp.MoE() {
		// FromFile refused a backend without experts.
		s.ex = b.(backend.Experts)
		s.moe = moeScratch{router: rest[0], ids: rest[1], weights: rest[2], ids2: rest[3], gate: rest[4], up: rest[5], y: rest[6], in: rest[7]}
		fam, _ := family.Lookup(hp.Arch)
		s.lay = fam.Tensors
		rest = rest[8:]
	}
	s.extras = rest
	if hp.MoE() && s.lay.ExpertsOwnNorms {
		s.rin, rest = rest[0], rest[1:]
	}
	if hp.PerLayerEmbd > 0 {
		s.pl, s.plTok, s.pli, s.plg = rest[0], rest[1], rest[2], rest[3]
		rest = rest[4:]
	}
	if src := hp.KVShareSources(); len(src) > 0 {
		s.saved = map[int][2]backend.Tensor{}
		for i, l := range src {
			s.saved[l] = [2]backend.Tensor{rest[2*i], rest[2*i+1]}
		}
	}
	s.pos = make([]int32, maxBatch)
	if kvc.Smooths() {
		s.calib = map[kv.Geometry]*kv.Calibration{}
		w := hp.MaxKVHeads() * hp.MaxHeadDim()
		s.kRow, s.lambda = make([]float32, w), make([]float32, w)
	}
	return s, nil
}

// LayerWindows is each layer's sliding window (0: global), the rings a
// cache may keep for them (kv.Config.LayerWindow); nil when no layer has a
// window.
func (hp HParams) LayerWindows() []int {
	var w []int
	for il := range hp.Layers {
		if win := hp.Layer(il).Window; win > 0 {
			if w == nil {
				w = make([]int, hp.Layers)
			}
			w[il] = win
		}
	}
	return w
}

// Close gives the cache and the activation tensors back to the backend, so
// its allocation count returns to what it was before NewState. The state
// must not be used afterwards; closing twice is harmless.
func (s *State) Close() error {
	if s.Cache == nil {
		return nil
	}
	err := s.Cache.Close()
	for _, t := range append(append([]backend.Tensor{s.x, s.h, s.q, s.k, s.v, s.att, s.gate, s.up, s.last, s.logits, s.allLogits}, s.moe.tensors()...), s.extras...) {
		if t != nil {
			s.b.Free(t)
		}
	}
	s.Cache, s.extras, s.saved = nil, nil, nil
	s.pl, s.plTok, s.pli, s.plg, s.rin = nil, nil, nil, nil, nil
	s.x, s.h, s.q, s.k, s.v, s.att, s.gate, s.up, s.last, s.logits, s.allLogits = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
	s.moe = moeScratch{}
	return err
}

// Ctx is the cache's capacity in positions.
func (s *State) Ctx() int { return s.Cache.Config().Ctx }

// Forward runs tokens at positions pos.. through the model, storing their
// K/V in the cache, and leaves the last token's logits in logits (len Vocab).
// Positions [0, pos) must already be in the cache.
func (s *State) Forward(tokens []int32, pos int, logits []float32) error {
	return s.forward(tokens, pos, logits, nil)
}

// ForwardAll is Forward that passes every row's logits to each (tests and
// quality probes). Its first call allocates a maxBatch×vocab tensor.
func (s *State) ForwardAll(tokens []int32, pos int, each func(row int, logits []float32)) error {
	return s.forward(tokens, pos, nil, each)
}

// pass is one forward call: n tokens at positions pos.., and where the
// logits go (logits for the last row, or each for every row).
type pass struct {
	tokens []int32
	n, pos int
	logits []float32
	each   func(int, []float32)
}

func (s *State) forward(tokens []int32, pos int, logits []float32, each func(int, []float32)) error {
	n := len(tokens)
	switch {
	case s.Cache == nil:
		return fmt.Errorf("forward: the state is closed")
	case n == 0 || n > s.maxBatch:
		return fmt.Errorf("forward: %d tokens (batch holds 1..%d)", n, s.maxBatch)
	case pos < 0 || pos+n > s.Ctx():
		return fmt.Errorf("forward: positions %d..%d exceed the context of %d", pos, pos+n, s.Ctx())
	}
	// Ops never fail on data: every token is checked before the first op.
	for i, t := range tokens {
		if t < 0 || int(t) >= s.m.HP.Vocab {
			return fmt.Errorf("forward: token %d (at position %d) is outside the vocabulary of %d", t, pos+i, s.m.HP.Vocab)
		}
	}
	for i := range tokens {
		s.pos[i] = int32(pos + i)
	}
	if pos == 0 {
		s.provisional = false // the cache starts again
	}
	return forward(s, &pass{tokens: tokens, n: n, pos: pos, logits: logits, each: each})
}

// smoothingScales are a model's K channel smoothing factors, one λ per
// layer, calibrated once on the first batch at position 0 that has enough
// rows and then frozen for every state of the model. A per-model constant
// keeps the KV encoding of a token independent of the prompt it came in:
// a reused prefix holds exactly the codes a cold run would write, so a
// temperature-0 request gives one text however its prefix was cached and
// whatever ran beside it. λ comes from float K rows, so q8 and q4 caches
// share it.
type smoothingScales struct {
	mu     sync.Mutex
	lambda [][]float32 // per layer; nil in a frozen layer: nothing to correct
	frozen []bool      // per layer
}

// get returns layer's frozen λ and whether it is frozen.
func (sc *smoothingScales) get(layer int) ([]float32, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.frozen == nil || !sc.frozen[layer] {
		return nil, false
	}
	return sc.lambda[layer], true
}

// freeze keeps lambda (copied) as layer's λ unless another state froze one
// first, and returns the layer's λ.
func (sc *smoothingScales) freeze(layer, layers int, lambda []float32) []float32 {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.frozen == nil {
		sc.lambda, sc.frozen = make([][]float32, layers), make([]bool, layers)
	}
	if !sc.frozen[layer] {
		sc.lambda[layer] = slices.Clone(lambda)
		sc.frozen[layer] = true
	}
	return sc.lambda[layer]
}

// anyFrozen reports whether some layer's λ is frozen.
func (sc *smoothingScales) anyFrozen() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return slices.Contains(sc.frozen, true)
}

// smoothingFor returns the λ of layer li for a batch that starts the cache:
// the model's frozen one, else one calibrated on the batch's n K rows and
// frozen for the model (nil, not frozen, when the batch is too short to
// calibrate: the state is then marked provisional).
func (s *State) smoothingFor(li int, k backend.Tensor, n, kvHeads, headDim int) ([]float32, error) {
	sc := &s.m.smoothing
	if lambda, ok := sc.get(li); ok {
		return lambda, nil
	}
	if n < kv.MinCalibrationRows {
		s.provisional = true
		return nil, nil
	}
	lambda, err := s.calibrate(k, n, kvHeads, headDim)
	if err != nil {
		return nil, err
	}
	return sc.freeze(li, len(s.specs), lambda), nil
}

// Calibrate freezes the model's smoothing on tokens, when the state's cache
// smooths and the model has not calibrated yet, by running them through the
// state at position 0 (the cache's content is then tokens: start the
// sequence again at 0). Calibrating every load of a model on the same
// tokens makes λ depend on the model alone, not on its first prompt. A
// cache that evicts is left alone: the pass would count as attention.
func (s *State) Calibrate(tokens []int32) error {
	if s.calib == nil || s.Cache.Config().Evicts() || s.m.smoothing.anyFrozen() {
		return nil
	}
	tokens = tokens[:min(len(tokens), s.maxBatch, s.Ctx())]
	if len(tokens) < kv.MinCalibrationRows {
		return nil
	}
	return s.Forward(tokens, 0, make([]float32, s.m.HP.Vocab))
}

// SmoothingStale reports whether the cache's first positions were stored
// before the model's smoothing was calibrated (unsmoothed, from a batch too
// short to calibrate) while the model has calibrated since: a cold run
// would now store them otherwise, so they must not be reused.
func (s *State) SmoothingStale() bool {
	return s.provisional && s.m.smoothing.anyFrozen()
}

// calibrate returns the channel smoothing factors for the n K rows of a
// batch that starts the cache (nil when there are too few rows or nothing
// to correct). It is the pass's explicit host step (docs/ARCHITECTURE.md,
// "Channel smoothing"): it syncs the backend, reads the rows back and
// computes λ here, so every backend smooths alike. It costs one sync per
// layer, on the first batch of a sequence only.
func (s *State) calibrate(k backend.Tensor, n, kvHeads, headDim int) ([]float32, error) {
	if n < kv.MinCalibrationRows {
		return nil, nil
	}
	if err := s.b.Sync(); err != nil {
		return nil, err
	}
	g := kv.Geometry{KVHeads: kvHeads, HeadDim: headDim}
	c := s.calib[g]
	if c == nil {
		c = kv.NewCalibration(kvHeads, headDim)
		s.calib[g] = c
	}
	c.Reset()
	row := s.kRow[:kvHeads*headDim]
	for r := 0; r < n; r++ {
		s.b.Read(row, k, r*len(row))
		c.Add(row)
	}
	return c.Lambda(s.lambda[:len(row)]), nil
}
