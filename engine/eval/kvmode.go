// Package eval measures how a KV cache mode changes what a model does:
// exact-answer retrieval over long documents (the needle bench) and
// perplexity over held-out text, chunked as llama.cpp's llama-perplexity
// chunks it so that the figures compare with its.
package eval

import (
	"fmt"
	"strconv"
	"strings"

	"nibble/engine"
	"nibble/engine/kv"
)

// KVMode is one cache configuration a bench runs: a type and its rotation
// of K. A bare type is the session default (q4 rotated, q8 not); -rot and
// -plain force rotation on or off.
type KVMode struct {
	Name   string // as given, normalized: f16, q8, q4, q8-rot, q4-rot, q8-plain, q4-plain
	Type   kv.Type
	Rotate kv.RotateMode
}

// The suffixes of a quantized mode: K stored rotated (kv.RotateOn) or not
// (kv.RotateOff, channel smoothing alone).
const (
	rotSuffix   = "-rot"
	plainSuffix = "-plain"
)

// ParseKVModes reads a comma-separated list such as
// "f16,q8,q4,q4-rot,q4-plain". Names are those kv.ParseType accepts,
// optionally followed by -rot or -plain for the quantized types; a mode may
// appear once.
func ParseKVModes(list string) ([]KVMode, error) {
	var modes []KVMode
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			return nil, fmt.Errorf("KV mode list %q has an empty entry", list)
		}
		base, suffix, rotate := name, "", kv.RotateAuto
		for s, r := range map[string]kv.RotateMode{rotSuffix: kv.RotateOn, plainSuffix: kv.RotateOff} {
			if b, ok := strings.CutSuffix(name, s); ok {
				base, suffix, rotate = b, s, r
			}
		}
		t, err := kv.ParseType(base)
		if err != nil {
			return nil, fmt.Errorf("KV mode %q: %w (a quantized type may end in %s or %s)", name, err, rotSuffix, plainSuffix)
		}
		if suffix != "" && t == kv.F16 {
			return nil, fmt.Errorf("KV mode %q: rotation applies to quantized caches only", name)
		}
		m := KVMode{Name: t.String() + suffix, Type: t, Rotate: rotate}
		if seen[m.Name] {
			return nil, fmt.Errorf("KV mode %q is listed twice", m.Name)
		}
		seen[m.Name] = true
		modes = append(modes, m)
	}
	return modes, nil
}

// Apply returns base with this mode's cache type and rotation.
func (m KVMode) Apply(base engine.Options) engine.Options {
	base.KV, base.KVRotate = m.Type, m.Rotate
	return base
}

// Eviction is a requested cache eviction policy: keep at most Budget tokens
// (or, when Percent is set, Budget percent of each prompt).
type Eviction struct {
	Policy  string // "h2o" (sinks, heavy hitters and a recent window) or "window" (recent tokens only)
	Budget  int
	Percent bool
}

// String spells the policy as the flag takes it.
func (e Eviction) String() string {
	if e.Percent {
		return fmt.Sprintf("%s:%d%%", e.Policy, e.Budget)
	}
	return fmt.Sprintf("%s:%d", e.Policy, e.Budget)
}

// ParseEviction reads "h2o:BUDGET" or "window:BUDGET", where BUDGET is a
// positive token count or a percentage of the prompt between 1% and 99%.
func ParseEviction(s string) (Eviction, error) {
	policy, budget, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Eviction{}, fmt.Errorf("eviction %q: want h2o:BUDGET or window:BUDGET", s)
	}
	policy = strings.ToLower(policy)
	if policy != "h2o" && policy != "window" {
		return Eviction{}, fmt.Errorf("eviction %q: unknown policy %q (want h2o or window)", s, policy)
	}
	e := Eviction{Policy: policy}
	budget, e.Percent = strings.CutSuffix(budget, "%")
	n, err := strconv.Atoi(budget)
	switch {
	case err != nil:
		return Eviction{}, fmt.Errorf("eviction %q: budget %q is not a whole number of tokens or a percentage", s, budget)
	case e.Percent && (n < 1 || n > 99):
		return Eviction{}, fmt.Errorf("eviction %q: a percentage budget must be between 1%% and 99%%", s)
	case n < 1:
		return Eviction{}, fmt.Errorf("eviction %q: the budget must be positive", s)
	}
	e.Budget = n
	return e, nil
}

// ParseEvictions reads a comma-separated list of ParseEviction's forms,
// each at most once.
func ParseEvictions(list string) ([]Eviction, error) {
	var out []Eviction
	seen := map[Eviction]bool{}
	for _, item := range strings.Split(list, ",") {
		e, err := ParseEviction(item)
		if err != nil {
			return nil, err
		}
		if seen[e] {
			return nil, fmt.Errorf("eviction %s is listed twice", e)
		}
		seen[e] = true
		out = append(out, e)
	}
	return out, nil
}

// Apply returns base with this eviction, a percentage budget taken of n
// tokens (a needle case's prompt, a perplexity chunk). H2O gets
// kv.DefaultEviction's sinks and recent window.
func (e Eviction) Apply(base engine.Options, n int) engine.Options {
	budget := e.Budget
	if e.Percent {
		budget = max(1, n*e.Budget/100)
	}
	policy := kv.EvictWindow
	if e.Policy == "h2o" {
		policy = kv.EvictH2O
	}
	base.Evict, base.EvictPercent = kv.DefaultEviction(policy, budget), 0
	return base
}
