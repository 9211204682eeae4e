package service

import (
	"strings"
	"testing"

	"nibble/app/settings"
	"nibble/engine/kv"
)

// With "keep the most useful tokens" in Settings, a context whose KV does
// not fit loads with an H2O cache of the largest budget that fits, instead
// of being refused; with "refuse" (the default) it is refused.
func TestLoadEvictsWhenTheContextDoesNotFit(t *testing.T) {
	s, _, long := loadedService(t)
	small, big := total(t, s, long, 2048, "q4"), total(t, s, long, 131072, "q4")
	setLimit(t, s, small+(big-small)/2)
	if _, err := s.LoadModel(LoadRequest{Path: long, Ctx: 131072, KV: "q4"}); err == nil {
		t.Fatal("a context that does not fit loaded with the default setting")
	} else if !strings.Contains(err.Error(), "Keep the most useful tokens instead (Settings, When the context does not fit): H2O holds") || strings.Contains(err.Error(), "--evict") {
		t.Fatalf("the refusal's advice does not offer the setting in the app's words:\n%v", err)
	}
	if err := s.store.Update(func(c *settings.Settings) error { c.WhenContextDoesNotFit = "evict"; return nil }); err != nil {
		t.Fatal(err)
	}
	e, err := s.CheckLoad(LoadRequest{Path: long, Ctx: 131072, KV: "q4"})
	if err != nil || e.Verdict == "will-not-fit" {
		t.Fatalf("with eviction: %+v, %v", e, err)
	}
	if _, err := s.LoadModel(LoadRequest{Path: long, Ctx: 131072, KV: "q4"}); err != nil {
		t.Fatal(err)
	}
	info, ok := s.loader.engine().Info()
	if !ok {
		t.Fatal("nothing loaded")
	}
	ev := info.Options.Evict
	if info.Options.Ctx != 131072 || ev.Policy != kv.EvictH2O || ev.Budget < 512 || ev.Budget >= 131072 {
		t.Fatalf("loaded with context %d and eviction %+v; want H2O below 131072", info.Options.Ctx, ev)
	}
	// A context that fits keeps every position.
	if _, err := s.LoadModel(LoadRequest{Path: long, Ctx: 2048, KV: "q4"}); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.loader.engine().Info(); info.Options.Evict.Policy != kv.EvictNone {
		t.Fatalf("a context that fits loaded with eviction %+v", info.Options.Evict)
	}
}
