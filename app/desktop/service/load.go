package service

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"nibble/app/desktop/demo"
	"nibble/app/settings"
	"nibble/engine"
	"nibble/engine/chat"
	"nibble/engine/estimate"
	"nibble/engine/kv"
	"nibble/engine/kvprobe"
	"nibble/engine/scheduler"
)

// loader owns the engine's scheduler and what it runs: the start-up
// state, the model loaded and with which context and KV type. The other
// parts reach the scheduler through localEngine.
type loader struct {
	env
	machine *machine
	files   modelFiles // the picker: headers and the list's refresh
	kv      kvChecks   // the KV check of the loaded model
	// templates: the chat template chosen for a file instead of its own.
	templates interface {
		templateFor(path string) *chat.Template
	}

	// loadMu serializes loads, reconfigurations and scheduler swaps.
	loadMu sync.Mutex

	mu       sync.Mutex // guards the fields below
	sched    *scheduler.Scheduler
	schedCfg scheduler.Config
	state    State
	err      string
	prepare  *Prepare
	demo     bool
	closed   bool
}

// localEngine is the loader as the other parts see it.
type localEngine interface {
	// engine is the scheduler in use (a load may replace it when the
	// settings' slots or threads changed).
	engine() *scheduler.Scheduler
	// isDemo says whether the loaded model is the demo model.
	isDemo() bool
}

// modelFiles is the picker as the loader, the KV check and the catalog
// see it.
type modelFiles interface {
	inspect(path string) (LocalModel, *estimate.Desc)
	changed()
}

// kvChecks is the KV check as the loader sees it (kvcheck.go).
type kvChecks interface {
	autoKV(path string, d estimate.Desc, o estimate.Options, b estimate.Budget, src string) (kv.Type, *kvprobe.Choice, string)
	start(sched *scheduler.Scheduler, path string, kept *kvprobe.Choice, keptNote string)
	stop()
	checkFor(path string) *KVCheck
}

func newLoader(e env, m *machine) *loader {
	l := &loader{env: e, machine: m, state: StateStarting}
	c := e.store.Get()
	cfg := scheduler.Config{Slots: c.Slots, Threads: c.Threads, NewBackend: m.newBackend(c.Threads)}
	l.sched, l.schedCfg = scheduler.New(cfg), cfg
	return l
}

func (l *loader) engine() *scheduler.Scheduler {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sched
}

func (l *loader) isDemo() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.demo
}

// loaderState is the loader's part of Status.
type loaderState struct {
	state   State
	err     string
	prepare *Prepare
	demo    bool
}

func (l *loader) snapshot() loaderState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return loaderState{state: l.state, err: l.err, prepare: l.prepare, demo: l.demo}
}

func (l *loader) setState(st State, msg string) {
	l.mu.Lock()
	l.state, l.err = st, msg
	l.mu.Unlock()
	l.statusChanged()
}

// noteProblem shows msg as Status.Error unless an error is shown already;
// the next change of state clears it.
func (l *loader) noteProblem(msg string) {
	l.mu.Lock()
	if l.err == "" {
		l.err = msg
	}
	l.mu.Unlock()
	l.statusChanged()
}

// prepareProgress reports synthesis progress, once per percent.
func (l *loader) prepareProgress(label string) func(done, total int64) {
	last := -1
	return func(done, total int64) {
		if total <= 0 {
			return
		}
		pct := int(done * 100 / total)
		if pct == last {
			return
		}
		last = pct
		p := Prepare{Label: label, Done: done, Total: total}
		l.mu.Lock()
		l.prepare = &p
		l.mu.Unlock()
		l.emit(EventPrepare, p)
	}
}

// ensureDemo synthesizes the demo model into the cache folder (a first
// run, no model configured) and returns its path.
func (l *loader) ensureDemo() (string, error) {
	l.setState(StatePreparing, "")
	path, err := demo.Ensure(l.dirs.Cache, l.prepareProgress("Synthesizing the demo model"))
	if err != nil {
		l.setState(StateError, err.Error())
		return "", err
	}
	return path, nil
}

// refuseLoads makes later loads fail with scheduler.ErrClosed (Close).
func (l *loader) refuseLoads() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// close shuts the engine down once a load in progress has finished.
func (l *loader) close() error {
	l.refuseLoads()
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	return l.engine().Close()
}

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
func (l *loader) plan(req LoadRequest) (*loadPlan, error) {
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
	if demo.Is(l.dirs.Cache, path) && !fileExists(path) {
		l.setState(StatePreparing, "")
		if _, err := demo.Ensure(l.dirs.Cache, l.prepareProgress("Synthesizing the demo model")); err != nil {
			return nil, err
		}
	}
	lm, d := l.files.inspect(path)
	if d == nil {
		return nil, fmt.Errorf("cannot load %s: %s", filepath.Base(path), lm.Problem)
	}
	c := l.store.Get()
	p := &loadPlan{req: req, path: path, name: lm.Name, desc: *d, ctx: req.Ctx}
	if demo.Is(l.dirs.Cache, path) {
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
	p.opts = estimate.Options{Ctx: p.ctx, KV: p.kv, Backend: l.machine.backendChoice().Backend, Threads: c.Threads}
	p.budget, p.source = l.machine.budget()
	// The demo model's random weights fail any KV check (they are noise
	// to a quantizer, docs/ARCHITECTURE.md): it keeps the default q4.
	if p.auto = kvAuto(req.KV, c) && !demo.Is(l.dirs.Cache, path); p.auto {
		p.kv, p.kept, p.keptNote = l.kv.autoKV(path, *d, p.opts, p.budget, p.source)
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

// checkLoad is the estimate of loading req here (its zero fields take the
// settings' values), against the budget a load would be checked against.
func (l *loader) checkLoad(req LoadRequest) (Estimate, error) {
	p, err := l.plan(req)
	if err != nil {
		return Estimate{}, err
	}
	est, err := evaluate(p.desc, p.opts, p.budget, p.source)
	if err == nil {
		remoteAdvice(&est, l.store.Get())
	}
	return est, err
}

// smallerContext is the context to offer when req will not fit: the
// largest that stays clear of "tight" with req's KV type, else the largest
// that fits at all, rounded down to whole K tokens; 0 when not even
// settings.MinContext tokens fit.
func (l *loader) smallerContext(req LoadRequest) (int, error) {
	p, err := l.plan(req)
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

// load loads req.Path with req's context and KV type (zero fields:
// the settings'), replacing the loaded model, whose replies end. A load
// that will not fit the budget (the machine's, or the memory limit in
// Settings when smaller) is refused before anything is allocated, with a
// *NotFitError whose text carries the advice, and the loaded model stays;
// so is a file that is not a loadable GGUF. After a load the file, and the
// context and KV type req asked for, are remembered in the settings.
//
// It does not ask anything: app/desktop asks first (tight, or a smaller
// context that fits) and then calls LoadModel with the answer.
func (l *loader) load(req LoadRequest) (Status, error) {
	p, err := l.plan(req)
	if err != nil {
		return l.refused(err)
	}
	est, err := evaluate(p.desc, p.opts, p.budget, p.source)
	if err != nil {
		return l.refused(fmt.Errorf("load %s: %w", filepath.Base(p.path), err))
	}
	if est.Verdict == estimate.WillNotFit.String() {
		remoteAdvice(&est, l.store.Get())
		return l.refused(&NotFitError{Name: p.name, Estimate: est})
	}
	if err := l.loadPlanned(p); err != nil {
		return l.status(), err
	}
	if p.auto {
		l.kv.start(l.engine(), p.path, p.kept, p.keptNote)
	}
	var remember error
	if err := l.store.Update(func(c *settings.Settings) error {
		c.LastModel = p.path
		if !req.keepRemote {
			c.ActiveRemote = "" // a local model was loaded: chats go to it
		}
		if demo.Is(l.dirs.Cache, p.path) {
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
	l.files.changed()
	return l.status(), remember
}

// refused reports a load that did not start. The state changes only when
// no model is loaded (the window shows the error there); otherwise the
// loaded model carries on and the error goes to the caller alone.
func (l *loader) refused(err error) (Status, error) {
	if _, ok := l.engine().Info(); !ok {
		l.setState(StateError, err.Error())
	} else {
		l.mu.Lock()
		st := l.state
		l.mu.Unlock()
		if st != StateReady { // e.g. preparing the demo model
			l.setState(StateReady, "")
		}
	}
	return l.status(), err
}

// loadPlanned runs the load on the scheduler, which checks the estimate
// again (against the same budget) before it allocates. If it fails after
// the old model was unloaded, the old model is loaded again.
func (l *loader) loadPlanned(p *loadPlan) error {
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return scheduler.ErrClosed
	}
	prev, hadPrev := l.engine().Info()
	l.kv.stop() // the load ends it anyway; nothing stale stays shown
	sched := l.schedulerForSettings()
	l.setState(StateLoading, "")
	b := p.budget
	sched.SetTemplate(p.path, l.templates.templateFor(p.path))
	_, err := sched.Load(p.path, engine.Options{Ctx: p.ctx, KV: p.kv, Budget: &b, Evict: p.opts.Evict})
	if err != nil {
		err = fmt.Errorf("loading %s: %w", p.path, err)
		if hadPrev {
			sched.SetTemplate(prev.Path, l.templates.templateFor(prev.Path))
			if _, perr := sched.Load(prev.Path, prev.Options); perr == nil {
				l.mu.Lock()
				l.demo = demo.Is(l.dirs.Cache, prev.Path)
				l.mu.Unlock()
				l.setState(StateReady, "")
				return err
			}
		}
		l.setState(StateError, err.Error())
		return err
	}
	l.mu.Lock()
	l.demo = demo.Is(l.dirs.Cache, p.path)
	l.prepare = nil
	l.mu.Unlock()
	l.setState(StateReady, "")
	return nil
}

// schedulerForSettings is the scheduler to load on: the current one, or a
// new one when the settings' slots or threads changed since it was made
// (those are fixed for a scheduler's life, so they apply at the next load).
func (l *loader) schedulerForSettings() *scheduler.Scheduler {
	c := l.store.Get()
	l.mu.Lock()
	cur := l.sched
	same := l.schedCfg.Slots == c.Slots && l.schedCfg.Threads == c.Threads
	l.mu.Unlock()
	if same {
		return cur
	}
	cur.Close() // ends its replies, unloads its model; the load replaces it anyway
	cfg := scheduler.Config{Slots: c.Slots, Threads: c.Threads, NewBackend: l.machine.newBackend(c.Threads)}
	n := scheduler.New(cfg)
	l.mu.Lock()
	l.sched, l.schedCfg = n, cfg
	l.mu.Unlock()
	return n
}

// applyContext changes the loaded model's context budget and KV type
// ("" or "auto": the KV check's kept choice when it fits, else q4; the
// check starts when the model has none). One that will not fit is refused with a
// *NotFitError carrying the advice, and the old settings stay in force.
// Replies running on the model end (their caches are rebuilt). The new
// values are remembered in the settings.
func (l *loader) applyContext(ctx int, kvName string) (Status, error) {
	// Held throughout, so the model checked is the model reconfigured.
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	info, ok := l.engine().Info()
	if !ok {
		return l.status(), errors.New("apply context: no model is loaded")
	}
	if ctx <= 0 {
		return l.status(), fmt.Errorf("apply context: %d tokens is not a context size", ctx)
	}
	t, err := parseKV(kvName)
	if err != nil {
		return l.status(), fmt.Errorf("apply context: %w", err)
	}
	lm, d := l.files.inspect(info.Path)
	if d == nil {
		return l.status(), fmt.Errorf("apply context: %s: %s", filepath.Base(info.Path), lm.Problem)
	}
	b, src := l.machine.budget()
	auto := (kvName == "" || kvName == "auto") && !demo.Is(l.dirs.Cache, info.Path)
	var kept *kvprobe.Choice
	var keptNote string
	if auto {
		t, kept, keptNote = l.kv.autoKV(info.Path, *d, loadedOptions(info, ctx, t), b, src)
	}
	est, err := evaluate(*d, loadedOptions(info, ctx, t), b, src)
	if err != nil {
		return l.status(), fmt.Errorf("apply context: %w", err)
	}
	if est.Verdict == estimate.WillNotFit.String() {
		name := modelOf(info).Name
		if demo.Is(l.dirs.Cache, info.Path) {
			name = DemoName
		}
		remoteAdvice(&est, l.store.Get())
		return l.status(), &NotFitError{Name: name, Estimate: est}
	}
	if _, err := l.engine().Reconfigure(reconfigured(info, ctx, t, b)); err != nil {
		l.statusChanged()
		return l.status(), fmt.Errorf("apply context: %w", err)
	}
	if auto && (l.kv.checkFor(info.Path) == nil || kept != nil) {
		l.kv.start(l.engine(), info.Path, kept, keptNote)
	}
	var remember error
	if err := l.store.Update(func(c *settings.Settings) error {
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
	l.statusChanged()
	return l.status(), remember
}

// kvSetting is the settings' kvType for a type asked for by name.
func kvSetting(name string, t kv.Type) string {
	if name == "auto" {
		return name
	}
	return t.String()
}

// estimate evaluates the loaded model at ctx tokens (0: the context in
// force) with the KV type kvType ("" or "auto": q4), against this
// machine's budget (or the memory limit in Settings).
func (l *loader) estimate(ctx int, kvType string) (Estimate, error) {
	info, ok := l.engine().Info()
	if !ok {
		return Estimate{}, errors.New("estimate: no model is loaded")
	}
	if ctx < 0 {
		return Estimate{}, fmt.Errorf("estimate: context %d is negative", ctx)
	}
	if ctx == 0 {
		ctx = info.Options.Ctx
	}
	t, err := parseKV(kvType)
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate: %w", err)
	}
	lm, d := l.files.inspect(info.Path)
	if d == nil {
		return Estimate{}, fmt.Errorf("estimate: %s: %s", info.Path, lm.Problem)
	}
	b, src := l.machine.budget()
	return evaluate(*d, loadedOptions(info, ctx, t), b, src)
}
