package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"nibble/app/settings"
	"nibble/engine"
	"nibble/engine/estimate"
	"nibble/engine/kv"
	"nibble/engine/kvprobe"
	"nibble/engine/scheduler"
	"nibble/internal/atomicfile"
)

// KVChoicesFile keeps the KV check's result per model file, in the data
// folder, so a model is checked once.
const KVChoicesFile = "kv-choices.json"

// KV check states (KVCheck.State).
const (
	KVCheckRunning = "running"
	KVCheckDone    = "done"
	KVCheckFailed  = "failed"
)

// KVCheck is the KV quality check of the loaded model (KV setting "auto";
// docs/ARCHITECTURE.md, "Choosing the mode per model"): while it runs,
// Done of Total forward batches; then the figures, the choice and why.
type KVCheck struct {
	State string `json:"state"`
	Done  int    `json:"done"`
	Total int    `json:"total"`
	// Cached: the result was kept from an earlier check of the same file.
	Cached bool `json:"cached"`
	// Chosen is the mode picked (q4-rot, q4-plain, q8), Summary the
	// engine's one line, Reason why.
	Chosen     string       `json:"chosen,omitempty"`
	Summary    string       `json:"summary,omitempty"`
	Reason     string       `json:"reason,omitempty"`
	ScaleRatio float64      `json:"scaleRatio,omitempty"` // q·k scale over 1/sqrt(head dim)
	Tokens     int          `json:"tokens,omitempty"`
	ElapsedMs  float64      `json:"elapsedMs,omitempty"`
	Rows       []KVCheckRow `json:"rows,omitempty"`
	// Note says what the check changed, or why it could not: "KV switched
	// to q8: …", or q8 does not fit and q4 stays.
	Note  string `json:"note,omitempty"`
	Error string `json:"error,omitempty"`
}

// KVCheckRow is one measured mode against f16.
type KVCheckRow struct {
	Mode   string  `json:"mode"`
	Top1   float64 `json:"top1"` // top-1 agreement, 0..1
	Cosine float64 `json:"cosine"`
	Passed bool    `json:"passed"`
	// Skipped says why a mode that passed may not be chosen; Info marks
	// a row measured for information only.
	Skipped string `json:"skipped,omitempty"`
	Info    bool   `json:"info,omitempty"`
}

// kvChecker runs and shows the KV check of the loaded model, and keeps
// each file's result (KVChoicesFile).
type kvChecker struct {
	env
	machine *machine
	files   modelFiles

	mu     sync.Mutex    // guards cur, closed and the current check's fields
	cur    *kvCheckState // the loaded model's check
	closed bool
	runs   sync.WaitGroup // running checks, waited for by Close
}

// kvCheckState is the check of one loaded file.
type kvCheckState struct {
	path   string
	file   os.FileInfo // the file as it was when the check started
	check  KVCheck
	cancel context.CancelFunc
	last   int // percent last reported
}

// kvChoiceEntry is one file's kept result; a file that changed size or
// time, or a different backend, is checked again.
type kvChoiceEntry struct {
	Size    int64          `json:"size"`
	ModTime int64          `json:"mtime_ns"`
	Backend string         `json:"backend"`
	Choice  kvprobe.Choice `json:"choice"`
}

// kvChoicesMu serializes reading and rewriting the kept results
// (KVChoicesFile) across services.
var kvChoicesMu sync.Mutex

func (k *kvChecker) kvChoicesPath() string { return filepath.Join(k.dirs.Data, KVChoicesFile) }

func readKVChoices(path string) map[string]kvChoiceEntry {
	m := map[string]kvChoiceEntry{}
	data, err := os.ReadFile(path)
	if err != nil {
		return m
	}
	if json.Unmarshal(data, &m) != nil { // a damaged file: check again
		return map[string]kvChoiceEntry{}
	}
	return m
}

// cachedKVChoice is the kept result for the model file at path on the
// engine's backend, or nil.
func (k *kvChecker) cachedKVChoice(path string) *kvprobe.Choice {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	kvChoicesMu.Lock()
	e, ok := readKVChoices(k.kvChoicesPath())[path]
	kvChoicesMu.Unlock()
	if !ok || e.Size != st.Size() || e.ModTime != st.ModTime().UnixNano() || e.Backend != k.machine.backendChoice().Backend {
		return nil
	}
	return &e.Choice
}

// keepKVChoice writes c as the result for the file at path as it was
// when the check started (st): a file replaced meanwhile is checked again.
func (k *kvChecker) keepKVChoice(path string, st os.FileInfo, c *kvprobe.Choice) error {
	kvChoicesMu.Lock()
	defer kvChoicesMu.Unlock()
	m := readKVChoices(k.kvChoicesPath())
	m[path] = kvChoiceEntry{Size: st.Size(), ModTime: st.ModTime().UnixNano(), Backend: k.machine.backendChoice().Backend, Choice: *c}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("keep the KV check: %w", err)
	}
	// atomicfile writes a temporary file of its own, so that two app
	// processes never write into the same one.
	if err := atomicfile.WriteFile(k.kvChoicesPath(), data, 0o600); err != nil {
		return fmt.Errorf("keep the KV check: %w", err)
	}
	return nil
}

// checkOf is the KVCheck showing choice c.
func checkOf(c *kvprobe.Choice, cached bool) KVCheck {
	k := KVCheck{State: KVCheckDone, Cached: cached, Chosen: c.Chosen().Label(), Summary: c.Summary(), Reason: c.Reason,
		ScaleRatio: c.ScaleRatio, Tokens: c.Tokens, ElapsedMs: millis(c.Elapsed)}
	for _, cand := range c.Candidates {
		k.Rows = append(k.Rows, KVCheckRow{Mode: cand.Label(), Top1: cand.Quality.Top1Agreement, Cosine: cand.Quality.Cosine,
			Passed: cand.Passed, Skipped: cand.Skipped, Info: cand.Info})
	}
	return k
}

// autoKV is the KV type "auto" gives the file at path at ctx under o: the
// kept check's choice when there is one and it fits the budget, else q4;
// note says why a kept q8 was not used.
func (k *kvChecker) autoKV(path string, d estimate.Desc, o estimate.Options, b estimate.Budget, src string) (t kv.Type, c *kvprobe.Choice, note string) {
	c = k.cachedKVChoice(path)
	if c == nil || c.Type == kv.Q4 {
		return kv.Q4, c, ""
	}
	o.KV = c.Type
	if e, err := evaluate(d, o, b, src); err == nil && e.Verdict != estimate.WillNotFit.String() {
		return c.Type, c, ""
	}
	return kv.Q4, c, fmt.Sprintf("The KV check prefers %s (%s), but a %s cache of %d tokens does not fit here: keeping q4.", c.Type, c.Reason, c.Type, o.Ctx)
}

// checkFor is the check to show for the loaded model at path, if any.
func (k *kvChecker) checkFor(path string) *KVCheck {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cur == nil || k.cur.path != path {
		return nil
	}
	c := k.cur.check
	return &c
}

// close ends the check in progress and refuses new ones (Close).
func (k *kvChecker) close() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.stop()
}

// wait waits for the checks that were running to end.
func (k *kvChecker) wait() { k.runs.Wait() }

// stop ends the check in progress (a new load, or none is wanted).
func (k *kvChecker) stop() {
	k.mu.Lock()
	kc := k.cur
	k.cur = nil
	k.mu.Unlock()
	if kc != nil && kc.cancel != nil {
		kc.cancel()
	}
}

// swap makes kc the shown check and cancels the one it replaces, in
// one critical section so that two starts cannot both keep theirs; a
// running kc is counted in runs (false once the service is closed).
func (k *kvChecker) swap(kc *kvCheckState) bool {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return false
	}
	old := k.cur
	k.cur = kc
	if kc.cancel != nil {
		k.runs.Add(1)
	}
	k.mu.Unlock()
	if old != nil && old.cancel != nil {
		old.cancel()
	}
	return true
}

// start shows the KV check of the model at path, loaded with KV
// "auto": a kept result at once (the load already used its choice, or
// keptNote says why not), otherwise the check runs in the background on
// the engine's scheduler.
func (k *kvChecker) start(sched *scheduler.Scheduler, path string, kept *kvprobe.Choice, keptNote string) {
	if kept != nil {
		kc := &kvCheckState{path: path, check: checkOf(kept, true)}
		kc.check.Note = keptNote
		k.swap(kc)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	kc := &kvCheckState{path: path, check: KVCheck{State: KVCheckRunning}, cancel: cancel, last: -1}
	if st, err := os.Stat(path); err == nil {
		kc.file = st
	}
	if !k.swap(kc) {
		cancel()
		return
	}
	go func() {
		defer k.runs.Done()
		defer cancel()
		k.run(ctx, sched, kc)
	}()
}

// update changes kc's shown check (when it is still the current
// one) and reports the status.
func (k *kvChecker) update(kc *kvCheckState, f func(*KVCheck)) {
	k.mu.Lock()
	current := k.cur == kc
	if current {
		f(&kc.check)
	}
	k.mu.Unlock()
	if current {
		k.statusChanged()
	}
}

func (k *kvChecker) run(ctx context.Context, sched *scheduler.Scheduler, kc *kvCheckState) {
	c, err := sched.ProbeKV(ctx, kc.path, kvprobe.ChoiceOptions{Residual: -1}, func(done, total int) {
		pct := done * 100 / max(total, 1)
		k.mu.Lock()
		report := pct != kc.last
		kc.last = pct
		k.mu.Unlock()
		if report {
			k.update(kc, func(chk *KVCheck) { chk.Done, chk.Total = done, total })
		}
	})
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, scheduler.ErrUnloaded) || errors.Is(err, scheduler.ErrClosed) {
			return // another load or the quit ended it
		}
		k.update(kc, func(chk *KVCheck) { chk.State, chk.Error = KVCheckFailed, err.Error() })
		return
	}
	keepErr := fmt.Errorf("keep the KV check: %s could not be read when the check started", filepath.Base(kc.path))
	if kc.file != nil {
		keepErr = k.keepKVChoice(kc.path, kc.file, c)
	}
	k.update(kc, func(chk *KVCheck) {
		done, total := chk.Done, chk.Total
		*chk = checkOf(c, false)
		chk.Done, chk.Total = done, total
		if keepErr != nil {
			chk.Error = keepErr.Error()
		}
	})
	if c.Type != kv.Q4 {
		k.switchKV(ctx, sched, kc, c)
	}
}

// switchKV moves the loaded model to the check's choice, when idle and
// while the KV setting is still auto, if it fits at the context in force;
// the check's note says what happened.
func (k *kvChecker) switchKV(ctx context.Context, sched *scheduler.Scheduler, kc *kvCheckState, c *kvprobe.Choice) {
	var note string
	_, applied, err := sched.ReconfigureWhenIdle(ctx, func(info scheduler.ModelInfo) (engine.Options, bool) {
		if info.Path != kc.path || info.Options.KV == c.Type || k.store.Get().KVType != "auto" {
			return engine.Options{}, false
		}
		lm, d := k.files.inspect(info.Path)
		if d == nil {
			note = fmt.Sprintf("KV stays %s: %s", info.Options.KV, lm.Problem)
			return engine.Options{}, false
		}
		b, src := k.machine.budget()
		eo := loadedOptions(info, info.Options.Ctx, c.Type)
		eo.Evict = info.Options.Evict
		if e, err := evaluate(*d, eo, b, src); err != nil || e.Verdict == estimate.WillNotFit.String() {
			note = fmt.Sprintf("The KV check prefers %s (%s), but a %s cache of %d tokens does not fit here: keeping %s.",
				c.Type, c.Reason, c.Type, info.Options.Ctx, info.Options.KV)
			return engine.Options{}, false
		}
		return reconfigured(info, info.Options.Ctx, c.Type, b), true
	})
	switch {
	case err != nil && (ctx.Err() != nil || errors.Is(err, scheduler.ErrUnloaded) || errors.Is(err, scheduler.ErrClosed)):
		return
	case err != nil:
		note = fmt.Sprintf("KV stays as it was: switching to %s failed: %v", c.Type, err)
	case applied:
		note = fmt.Sprintf("KV switched to %s: %s", c.Type, c.Reason)
	}
	if note != "" {
		k.update(kc, func(chk *KVCheck) { chk.Note = note })
	}
}

// kvAuto says whether a load's KV name (empty: the settings') asks for the check.
func kvAuto(name string, c settings.Settings) bool {
	if name == "" {
		name = c.KVType
	}
	return name == "" || name == "auto"
}
