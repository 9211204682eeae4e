package service

import (
	"fmt"
	"runtime"
	"sync"

	"nibble/app/backends"
	"nibble/app/settings"
	"nibble/engine/backend"
	"nibble/engine/estimate"
	"nibble/engine/kv"
)

// machine is what this computer offers the engine: the backend the
// schedulers run on (and why), and the memory budget a model may use.
type machine struct {
	store *settings.Store
	// probe reads the machine's memory budget (tests pin it before use).
	probe func() (estimate.Budget, error)
	// expect is defaultExpect: backends.ExpectDecode.
	expect func(d estimate.Desc, ctx int, t kv.Type, c backends.Choice, threads int) (backends.Expected, error)

	mu     sync.Mutex      // guards choice
	choice backends.Choice // set when a scheduler makes its backend
}

// defaultExpect is each machine's expected-speed function (the package's
// tests replace it: the CPU probe takes a few hundred milliseconds, once
// per process, and its figure differs from run to run).
var defaultExpect = backends.ExpectDecode

func newMachine(store *settings.Store) *machine {
	return &machine{store: store, probe: estimate.SystemBudget, expect: defaultExpect}
}

// newBackend is the schedulers' NewBackend: backends.Choose("auto"), the
// CLI's default too (Metal on a Mac whose GPU opens, the CPU on threads
// otherwise). A scheduler makes its backend when it is made, so the choice
// and its reason are recorded, for Diagnostics and the estimates, before
// anything asks for them.
func (m *machine) newBackend(threads int) func() backend.Backend {
	return func() backend.Backend {
		// auto never fails: without a usable GPU it is the CPU, and the
		// Choice says why.
		b, c, _ := backends.Choose(backends.Auto, threads)
		m.mu.Lock()
		m.choice = c
		m.mu.Unlock()
		return b
	}
}

// backendChoice is the backend the engine runs on and why.
func (m *machine) backendChoice() backends.Choice {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.choice
}

// budget is what a model may use here: the machine's budget, or the
// memory limit in Settings when that is set and smaller; and where it came
// from.
func (m *machine) budget() (estimate.Budget, string) {
	b, err := m.probe()
	src := BudgetAvailable
	if err != nil {
		b, src = estimate.Budget{OS: runtime.GOOS}, budgetUnknownPre+err.Error()
	} else if b.OS == "darwin" && b.GPUCap > 0 && b.GPUCap < b.AvailableRAM {
		src = BudgetWired
	}
	if lim := m.store.Get().MemoryLimit; lim > 0 && (b.Bytes <= 0 || lim < b.Bytes) {
		b.Bytes, src = lim, BudgetSettings
		// The user's limit, not the GPU's, is what binds: no advice to
		// raise the wired limit.
		b.GPUCap = 0
	}
	return b, src
}

// expectDecode is the decode speed to expect for d at the settings' context
// (at most its trained one) and KV type, on the backend the engine runs on
// (the CPU until a scheduler has chosen): a figure from the header alone,
// no load. 0 and why when there is none (an unknown Mac chip, a header
// without the shape).
func (m *machine) expectDecode(d estimate.Desc) (float64, string) {
	cfg := m.store.Get()
	t, err := parseKV(cfg.KVType)
	if err != nil {
		return 0, "no speed estimate: " + err.Error()
	}
	ctx := cfg.ContextTokens
	if ct := d.HParams.CtxTrain; ct > 0 && ctx > ct {
		ctx = ct
	}
	c := m.backendChoice()
	if c.Backend == "" {
		c.Backend = backends.CPU
	}
	e, err := m.expect(d, ctx, t, c, cfg.Threads)
	if err != nil {
		return 0, "no speed estimate: " + err.Error()
	}
	// The cache is full at the context: the slowest token of a reply
	// that fills it; the first tokens come faster.
	return e.TokPerSec, fmt.Sprintf("Expected decode speed at %d tokens of context: %s", ctx, e.How)
}
