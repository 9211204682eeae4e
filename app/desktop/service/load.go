package service

import (
	"errors"
	"fmt"
	"path/filepath"

	"nibble/app/desktop/demo"
	"nibble/app/settings"
	"nibble/engine"
	"nibble/engine/estimate"
	"nibble/engine/kv"
	"nibble/engine/kvprobe"
	"nibble/engine/scheduler"
)

// loadPlan is a load request with its defaults filled in and the file's
// header read.
type loadPlan struct {
	req    LoadRequest
	path   string
	name   string
	desc   estimate.Desc
	ctx    int
	kv     kv.Type
	opts   estimate.Options
	budget estimate.Budget
	source string
	// auto: the KV setting is auto, so the KV check runs after the load
	// unless kept gives its earlier result (keptNote: why it was not used).
	auto     bool
	kept     *kvprobe.Choice
	keptNote string
}

// plan checks the file and fills in req's defaults: the settings' context
// (at most the model's trained context) and KV type.
func (s *Service) plan(req LoadRequest) (*loadPlan, error) {
	if req.Path == "" {
		return nil, errors.New("load: no model file given")
	}
	path, err := cleanPath(req.Path)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if req.Ctx < 0 {
		return nil, fmt.Errorf("load %s: context %d is negative", filepath.Base(path), req.Ctx)
	}
	if demo.Is(s.dirs.Cache, path) && !fileExists(path) {
		s.setState(StatePreparing, "")
		if _, err := demo.Ensure(s.dirs.Cache, s.prepareProgress("Synthesizing the demo model")); err != nil {
			return nil, err
		}
	}
	lm, d := s.inspect(path)
	if d == nil {
		return nil, fmt.Errorf("cannot load %s: %s", filepath.Base(path), lm.Problem)
	}
	c := s.store.Get()
	p := &loadPlan{req: req, path: path, name: lm.Name, desc: *d, ctx: req.Ctx}
	if demo.Is(s.dirs.Cache, path) {
		p.name = DemoName
	}
	if p.ctx == 0 {
		p.ctx = c.ContextTokens
		if ct := d.HParams.CtxTrain; ct > 0 && p.ctx > ct {
			p.ctx = ct // the default never asks for positions the model was not trained on
		}
	}
	kvName := req.KV
	if kvName == "" {
		kvName = c.KVType
	}
	if p.kv, err = parseKV(kvName); err != nil {
		return nil, fmt.Errorf("load %s: %w", filepath.Base(path), err)
	}
	// Threads as the scheduler the load will run on has them.
	p.opts = estimate.Options{Ctx: p.ctx, KV: p.kv, Backend: s.backendChoice().Backend, Threads: c.Threads}
	p.budget, p.source = s.budget()
	// The demo model's random weights fail any KV check (they are noise
	// to a quantizer, docs/ARCHITECTURE.md): it keeps the default q4.
	if p.auto = kvAuto(req.KV, c) && !demo.Is(s.dirs.Cache, path); p.auto {
		p.kv, p.kept, p.keptNote = s.autoKV(path, *d, p.opts, p.budget, p.source)
		p.opts.KV = p.kv
	}
	if c.WhenContextDoesNotFit == "evict" {
		p.evictIfTooLong()
	}
	return p, nil
}

// evictIfTooLong gives a plan whose context does not fit an H2O cache of
// the largest budget that does (Settings: "keep the most useful tokens"),
// where the model and backend can evict; otherwise it leaves the plan to be
// refused with advice.
func (p *loadPlan) evictIfTooLong() {
	if p.budget.Bytes <= 0 || p.desc.HParams.Window > 0 || p.opts.Backend != "cpu" {
		return
	}
	if e, err := estimate.Compute(p.desc, p.opts); err != nil || e.Total <= p.budget.Bytes {
		return
	}
	if n, _ := estimate.MaxEvictBudget(p.desc, p.opts, p.budget.Bytes); n > 0 {
		p.opts.Evict = kv.DefaultEviction(kv.EvictH2O, n)
	}
}

// CheckLoad is the estimate of loading req here (its zero fields take the
// settings' values), against the budget a load would be checked against.
func (s *Service) CheckLoad(req LoadRequest) (Estimate, error) {
	p, err := s.plan(req)
	if err != nil {
		return Estimate{}, err
	}
	est, err := evaluate(p.desc, p.opts, p.budget, p.source)
	if err == nil {
		s.remoteAdvice(&est)
	}
	return est, err
}

// SmallerContext is the context to offer when req will not fit: the
// largest that stays clear of "tight" with req's KV type, else the largest
// that fits at all, rounded down to whole K tokens; 0 when not even
// settings.MinContext tokens fit.
func (s *Service) SmallerContext(req LoadRequest) (int, error) {
	p, err := s.plan(req)
	if err != nil {
		return 0, err
	}
	if p.budget.Bytes <= 0 {
		return 0, nil
	}
	n := estimate.MaxContext(p.desc, p.opts, int64(estimate.TightFraction*float64(p.budget.Bytes)))
	if n < settings.MinContext {
		n = estimate.MaxContext(p.desc, p.opts, p.budget.Bytes)
	}
	n = min(n, p.ctx-1)
	switch {
	case n >= 1024:
		n = n / 1024 * 1024
	case n >= settings.MinContext:
		n = settings.MinContext
	default:
		return 0, nil
	}
	return n, nil
}

// LoadModel loads req.Path with req's context and KV type (zero fields:
// the settings'), replacing the loaded model, whose replies end. A load
// that will not fit the budget (the machine's, or the memory limit in
// Settings when smaller) is refused before anything is allocated, with a
// *NotFitError whose text carries the advice, and the loaded model stays;
// so is a file that is not a loadable GGUF. After a load the file, and the
// context and KV type req asked for, are remembered in the settings.
//
// It does not ask anything: app/desktop asks first (tight, or a smaller
// context that fits) and then calls LoadModel with the answer.
func (s *Service) LoadModel(req LoadRequest) (Status, error) {
	p, err := s.plan(req)
	if err != nil {
		return s.refused(err)
	}
	est, err := evaluate(p.desc, p.opts, p.budget, p.source)
	if err != nil {
		return s.refused(fmt.Errorf("load %s: %w", filepath.Base(p.path), err))
	}
	if est.Verdict == estimate.WillNotFit.String() {
		s.remoteAdvice(&est)
		return s.refused(&NotFitError{Name: p.name, Estimate: est})
	}
	if err := s.loadPlanned(p); err != nil {
		return s.Status(), err
	}
	if p.auto {
		s.startKVCheck(p.path, p.kept, p.keptNote)
	}
	var remember error
	if err := s.store.Update(func(c *settings.Settings) error {
		c.LastModel = p.path
		if !req.keepRemote {
			c.ActiveRemote = "" // a local model was loaded: chats go to it
		}
		if demo.Is(s.dirs.Cache, p.path) {
			c.LastModel = "" // the next start makes and loads the demo model again
		}
		if req.Ctx >= settings.MinContext && req.Ctx <= settings.MaxContext {
			c.ContextTokens = req.Ctx
		}
		if req.KV != "" {
			c.KVType = kvSetting(req.KV, p.kv)
		}
		return nil
	}); err != nil {
		remember = fmt.Errorf("model loaded, but not remembered: %w", err)
	}
	s.modelsChanged()
	return s.Status(), remember
}

// refused reports a load that did not start. The state changes only when
// no model is loaded (the window shows the error there); otherwise the
// loaded model carries on and the error goes to the caller alone.
func (s *Service) refused(err error) (Status, error) {
	if _, ok := s.engine().Info(); !ok {
		s.setState(StateError, err.Error())
	} else {
		s.mu.Lock()
		st := s.state
		s.mu.Unlock()
		if st != StateReady { // e.g. preparing the demo model
			s.setState(StateReady, "")
		}
	}
	return s.Status(), err
}

// loadPlanned runs the load on the scheduler, which checks the estimate
// again (against the same budget) before it allocates. If it fails after
// the old model was unloaded, the old model is loaded again.
func (s *Service) loadPlanned(p *loadPlan) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return scheduler.ErrClosed
	}
	prev, hadPrev := s.engine().Info()
	s.stopKVCheck() // the load ends it anyway; nothing stale stays shown
	sched := s.schedulerForSettings()
	s.setState(StateLoading, "")
	b := p.budget
	_, err := sched.Load(p.path, engine.Options{Ctx: p.ctx, KV: p.kv, Budget: &b, Evict: p.opts.Evict})
	if err != nil {
		err = fmt.Errorf("loading %s: %w", p.path, err)
		if hadPrev {
			if _, perr := sched.Load(prev.Path, prev.Options); perr == nil {
				s.mu.Lock()
				s.demo = demo.Is(s.dirs.Cache, prev.Path)
				s.mu.Unlock()
				s.setState(StateReady, "")
				return err
			}
		}
		s.setState(StateError, err.Error())
		return err
	}
	s.mu.Lock()
	s.demo = demo.Is(s.dirs.Cache, p.path)
	s.prepare = nil
	s.mu.Unlock()
	s.setState(StateReady, "")
	return nil
}

// schedulerForSettings is the scheduler to load on: the current one, or a
// new one when the settings' slots or threads changed since it was made
// (those are fixed for a scheduler's life, so they apply at the next load).
func (s *Service) schedulerForSettings() *scheduler.Scheduler {
	c := s.store.Get()
	s.mu.Lock()
	cur := s.sched
	same := s.schedCfg.Slots == c.Slots && s.schedCfg.Threads == c.Threads
	s.mu.Unlock()
	if same {
		return cur
	}
	cur.Close() // ends its replies, unloads its model; the load replaces it anyway
	cfg := scheduler.Config{Slots: c.Slots, Threads: c.Threads, NewBackend: s.engineBackend(c.Threads)}
	n := scheduler.New(cfg)
	s.mu.Lock()
	s.sched, s.schedCfg = n, cfg
	s.mu.Unlock()
	return n
}

// ApplyContext changes the loaded model's context budget and KV type
// ("" or "auto": the KV check's kept choice when it fits, else q4; the
// check starts when the model has none). One that will not fit is refused with a
// *NotFitError carrying the advice, and the old settings stay in force.
// Replies running on the model end (their caches are rebuilt). The new
// values are remembered in the settings.
func (s *Service) ApplyContext(ctx int, kvName string) (Status, error) {
	// Held throughout, so the model checked is the model reconfigured.
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	info, ok := s.engine().Info()
	if !ok {
		return s.Status(), errors.New("apply context: no model is loaded")
	}
	if ctx <= 0 {
		return s.Status(), fmt.Errorf("apply context: %d tokens is not a context size", ctx)
	}
	t, err := parseKV(kvName)
	if err != nil {
		return s.Status(), fmt.Errorf("apply context: %w", err)
	}
	lm, d := s.inspect(info.Path)
	if d == nil {
		return s.Status(), fmt.Errorf("apply context: %s: %s", filepath.Base(info.Path), lm.Problem)
	}
	b, src := s.budget()
	auto := (kvName == "" || kvName == "auto") && !demo.Is(s.dirs.Cache, info.Path)
	var kept *kvprobe.Choice
	var keptNote string
	if auto {
		t, kept, keptNote = s.autoKV(info.Path, *d, loadedOptions(info, ctx, t), b, src)
	}
	est, err := evaluate(*d, loadedOptions(info, ctx, t), b, src)
	if err != nil {
		return s.Status(), fmt.Errorf("apply context: %w", err)
	}
	if est.Verdict == estimate.WillNotFit.String() {
		name := modelOf(info).Name
		if demo.Is(s.dirs.Cache, info.Path) {
			name = DemoName
		}
		s.remoteAdvice(&est)
		return s.Status(), &NotFitError{Name: name, Estimate: est}
	}
	o := info.Options
	o.Ctx, o.KV, o.Batch, o.Budget = ctx, t, 0, &b
	if _, err := s.engine().Reconfigure(o); err != nil {
		s.emit(EventStatus, s.Status())
		return s.Status(), fmt.Errorf("apply context: %w", err)
	}
	if auto && (s.kvCheckFor(info.Path) == nil || kept != nil) {
		s.startKVCheck(info.Path, kept, keptNote)
	}
	var remember error
	if err := s.store.Update(func(c *settings.Settings) error {
		if ctx >= settings.MinContext && ctx <= settings.MaxContext {
			c.ContextTokens = ctx
		}
		if kvName != "" {
			c.KVType = kvSetting(kvName, t)
		}
		return nil
	}); err != nil {
		remember = fmt.Errorf("context applied, but not remembered: %w", err)
	}
	s.emit(EventStatus, s.Status())
	return s.Status(), remember
}

// kvSetting is the settings' kv_type for a type asked for by name.
func kvSetting(name string, t kv.Type) string {
	if name == "auto" {
		return name
	}
	return t.String()
}
