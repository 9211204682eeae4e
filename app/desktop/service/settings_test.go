package service

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"nibble/app/settings"
)

func TestUpdateSettings(t *testing.T) {
	s, _ := newService(t)
	before := s.Settings()
	bad := before
	bad.Sampling.Temperature, bad.MemoryLimit, bad.KVType = 9, -5, "q3"
	got, err := s.UpdateSettings(bad)
	var fe *settings.FieldError
	if err == nil || !errors.As(err, &fe) {
		t.Fatalf("UpdateSettings(bad) = %v, want field errors", err)
	}
	for _, field := range []string{"sampling.temperature: ", "memoryLimit: ", "kvType: "} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("%q does not name %s", err, field)
		}
	}
	if len(strings.Split(err.Error(), "\n")) != 3 {
		t.Errorf("%q: want a line per field", err)
	}
	if got.Sampling.Temperature != before.Sampling.Temperature || s.Settings().MemoryLimit != 0 {
		t.Fatalf("an invalid update changed the settings: %+v", got)
	}

	good := before
	good.Sampling.Temperature, good.MemoryLimit, good.SystemPrompt, good.Theme = 0.2, 3<<30, "Be brief.", "dark"
	good.LastModel, good.ModelFiles = "/elsewhere/x.gguf", []string{"/elsewhere/x.gguf"} // the service's own: ignored
	good.Version = 0                                                                     // a window that never read it
	got, err = s.UpdateSettings(good)
	if err != nil {
		t.Fatal(err)
	}
	if got.Sampling.Temperature != 0.2 || got.MemoryLimit != 3<<30 || got.SystemPrompt != "Be brief." || got.Theme != "dark" ||
		got.LastModel != before.LastModel || !slices.Equal(got.ModelFiles, before.ModelFiles) || got.Version != settings.SchemaVersion {
		t.Fatalf("in force: %+v", got)
	}
	// Saved: a store opened afresh reads the same.
	again, err := settings.Open(s.store.Path())
	if err != nil || again.Get().MemoryLimit != 3<<30 {
		t.Fatalf("reopened: %+v, %v", again.Get(), err)
	}
	// The memory limit is the budget from now on.
	pinBudget(s, 8<<30)
	if b, src := s.machine.budget(); b.Bytes != 3<<30 || src != BudgetSettings {
		t.Fatalf("budget %d from %q", b.Bytes, src)
	}
}
