package backend

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"nibble/engine/kv"
)

// Shape is the model geometry a backend's footprint depends on.
type Shape struct {
	Embd, Heads, KVHeads, HeadDim, FF, Vocab int
}

// Footprint is what the memory estimator asks a backend, before any runs
// (docs/ARCHITECTURE.md, "Memory estimator"): the memory a backend needs
// beyond the mapped weights, the cache and the activation tensors the model
// allocates. Backends register theirs under their Name (RegisterFootprint,
// from an init function), so the estimator needs no import of any backend.
type Footprint interface {
	// WorkspaceBytes is exactly what NewKVCache(cfg, heads, maxBatch)
	// allocates besides cfg.Bytes() (the attention workspace: split-K
	// partials, prefill staging, per-worker scratch), on a backend running
	// threads workers (<= 0: as many as the backend's default).
	WorkspaceBytes(cfg kv.Config, heads, maxBatch, threads int) int64
	// OverheadBytes is the runtime overhead of a process running a model of
	// shape s with prefill batches of batch rows: what it needs beyond the
	// mapped weights and what AllocatedBytes counts (the language runtime,
	// the tokenizer, pools outside the count). OverheadBytes(Shape{}, 0) is
	// the backend's base.
	OverheadBytes(s Shape, batch int) int64
}

var (
	footprintsMu sync.Mutex
	footprints   = map[string]Footprint{}
)

// RegisterFootprint makes f the footprint of the backend called name. It is
// for init functions: registering a name twice panics, as database/sql's
// Register does.
func RegisterFootprint(name string, f Footprint) {
	footprintsMu.Lock()
	defer footprintsMu.Unlock()
	if f == nil {
		panic("backend: RegisterFootprint of nil for " + name)
	}
	if _, dup := footprints[name]; dup {
		panic("backend: RegisterFootprint called twice for " + name)
	}
	footprints[name] = f
}

// FootprintOf returns the footprint registered for the backend called name.
func FootprintOf(name string) (Footprint, error) {
	footprintsMu.Lock()
	defer footprintsMu.Unlock()
	if f, ok := footprints[name]; ok {
		return f, nil
	}
	names := make([]string, 0, len(footprints))
	for n := range footprints {
		names = append(names, n)
	}
	slices.Sort(names)
	return nil, fmt.Errorf("no backend %q in this build (have %s)", name, strings.Join(names, ", "))
}
