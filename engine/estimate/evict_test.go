package estimate

import (
	"fmt"
	"strings"
	"testing"

	"nibble/engine/kv"
)

// A context whose KV does not fit is offered eviction with the largest H2O
// budget that fits, and that budget is exact: one more position does not fit.
func TestEvictionAdvice(t *testing.T) {
	d := llama8B()
	o := Options{Ctx: 131072, KV: kv.Q4, Threads: 8}
	full, err := Compute(d, o)
	if err != nil {
		t.Fatal(err)
	}
	budget := d.WeightsBytes + (full.Total-d.WeightsBytes)/3 // a third of what the rest needs
	_, err = Check(d, o, Simulated(budget))
	if err == nil {
		t.Fatal("fits")
	}
	n, e := MaxEvictBudget(d, o, budget)
	if n < minUsefulCtx || n >= o.Ctx || e == nil || e.Total > budget {
		t.Fatalf("largest budget %d (estimate %+v) for a total of %d", n, e, budget)
	}
	over := o
	over.Evict = kv.DefaultEviction(kv.EvictH2O, n+1)
	if e2, err := Compute(d, over); err != nil || e2.Total <= budget {
		t.Fatalf("budget %d+1 still fits: %v, %v", n, e2, err)
	}
	if want := fmt.Sprintf("--evict h2o:%d", n); !strings.Contains(err.Error(), want) {
		t.Errorf("advice lacks %q:\n%v", want, err)
	}
	// The KV counted is the budget's: an evicting cache of n positions
	// costs what a context of n does.
	at := o
	at.Ctx = n
	plain, _ := Compute(d, at)
	if e.KV < plain.KV || e.KV > plain.KV*11/10 {
		t.Errorf("KV at a budget of %d: %d, a context of %d: %d", n, e.KV, n, plain.KV)
	}
	// Already evicting: no such advice.
	o.Evict = kv.DefaultEviction(kv.EvictH2O, 100000)
	if _, err := Check(d, o, Simulated(budget)); err == nil || strings.Contains(err.Error(), "--evict") {
		t.Errorf("an evicting configuration was offered eviction again:\n%v", err)
	}
}
