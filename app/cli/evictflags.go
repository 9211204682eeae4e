package cli

import (
	"flag"
	"fmt"

	"nibble/engine"
	"nibble/engine/eval"
	"nibble/engine/kv"
)

// evictListUsage is the help of needle's and perplexity's --evict.
const evictListUsage = "also run each KV mode with its cache evicted down to a budget, comma-separated: h2o:`BUDGET` (sinks, heavy hitters and recent tokens) or window:BUDGET (recent tokens only), BUDGET in tokens or a percentage like 25% (of each prompt, or of --ctx for perplexity)"

// parseEvictions reads --evict's list ("" is none).
func parseEvictions(list string) ([]eval.Eviction, error) {
	if list == "" {
		return nil, nil
	}
	ev, err := eval.ParseEvictions(list)
	if err != nil {
		return nil, fmt.Errorf("%w: --evict: %v", ErrUsage, err)
	}
	return ev, nil
}

// withNoEviction lists nil (the mode as it is) before each eviction.
func withNoEviction(evictions []eval.Eviction) []*eval.Eviction {
	out := []*eval.Eviction{nil}
	for i := range evictions {
		out = append(out, &evictions[i])
	}
	return out
}

// evictedName labels a KV mode run under an eviction: "q4 h2o:25%".
func evictedName(mode string, ev *eval.Eviction) string {
	if ev == nil {
		return mode
	}
	return mode + " " + ev.String()
}

// evictUsage is run's --evict.
const evictUsage = "bound the KV cache to a budget instead of refusing a context that does not fit: h2o:`BUDGET` keeps the attention sinks, the tokens attention weighted most and the recent ones; window:BUDGET only the recent ones; BUDGET in tokens or a percentage of --ctx like 25%"

// registerEvict registers --evict, for the commands that run a chat.
func (mf *modelFlags) registerEvict(fs *flag.FlagSet) {
	fs.StringVar(&mf.evict, "evict", "", evictUsage)
}

// applyEvict sets o's eviction from --evict.
func (mf *modelFlags) applyEvict(o *engine.Options) error {
	if mf.evict == "" {
		return nil
	}
	e, err := eval.ParseEviction(mf.evict)
	if err != nil {
		return fmt.Errorf("%w: --evict: %v", ErrUsage, err)
	}
	o.Evict = kv.Eviction{Policy: kv.EvictWindow, Budget: e.Budget}
	if e.Policy == "h2o" {
		o.Evict.Policy = kv.EvictH2O
	}
	if e.Percent {
		o.Evict.Budget, o.EvictPercent = 0, e.Budget
	}
	return nil
}
