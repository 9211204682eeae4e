package service

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"nibble/engine/estimate"
)

func TestDiagnostics(t *testing.T) {
	s, _ := newService(t)
	s.SetSettingsWarning(errors.New("settings: the file was moved aside"))
	d := s.Diagnostics()
	if d.OS != runtime.GOOS || d.Arch != runtime.GOARCH || d.CPUs < 1 || d.Threads != 2 || d.Device == "" {
		t.Fatalf("machine %+v", d)
	}
	if d.Backend != "cpu" || d.BackendReason != s.machine.backendChoice().Reason || d.BackendReason == "" || d.GoVersion != runtime.Version() || d.Version == "" || d.WailsVersion == "" {
		t.Fatalf("backend and versions %+v", d)
	}
	if d.Model != nil || d.TemplateStatus != "no model is loaded" || d.SettingsWarning != "settings: the file was moved aside" {
		t.Fatalf("before a load %+v", d)
	}
	if d.DataDir != s.dirs.Data || d.ModelsDir != s.dirs.Models || d.ConfigDir != s.dirs.Config {
		t.Fatalf("folders %+v", d)
	}
	if runtime.GOOS == "linux" && (d.TotalRAM <= 0 || d.AvailableRAM <= 0 || d.Budget <= 0 || d.BudgetSource != BudgetAvailable) {
		t.Fatalf("memory %+v", d)
	}
	setLimit(t, s, 1<<20)
	if err := s.Start(); err == nil {
		t.Fatal("the demo model loaded in 1 MiB")
	}
	setLimit(t, s, 0)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	setLimit(t, s, 1<<30)
	d = s.Diagnostics()
	if d.Budget != 1<<30 || d.BudgetSource != BudgetSettings {
		t.Fatalf("budget %d from %q", d.Budget, d.BudgetSource)
	}
	if d.Model == nil || !d.Model.Demo || d.TemplateStatus == "" || d.TemplateStatus == "no model is loaded" {
		t.Fatalf("model %+v, template %q", d.Model, d.TemplateStatus)
	}
}

func TestDevice(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cpuinfo")
	writeFile(t, p, []byte("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n"))
	if got := device("linux", p); got != "Intel(R) Xeon(R) CPU @ 2.20GHz" {
		t.Fatalf("device %q", got)
	}
	if got := device("darwin", p); got != "Apple GPU" {
		t.Fatalf("darwin device %q", got)
	}
	if got := device("linux", p+".missing"); !strings.HasSuffix(got, " CPU") {
		t.Fatalf("device without cpuinfo %q", got)
	}
}

// The budget's source: the machine's available memory, the GPU wired
// limit on a Mac when it is the lower, the limit in Settings when lower
// still.
func TestBudgetSource(t *testing.T) {
	s, _ := newService(t)
	s.machine.probe = func() (estimate.Budget, error) {
		return estimate.Budget{Bytes: 10 << 30, OS: "darwin", TotalRAM: 16 << 30, AvailableRAM: 12 << 30, GPUCap: 10 << 30}, nil
	}
	if b, src := s.machine.budget(); b.Bytes != 10<<30 || src != BudgetWired {
		t.Fatalf("%d from %q", b.Bytes, src)
	}
	setLimit(t, s, 20<<30) // above the machine's: the machine's counts
	if _, src := s.machine.budget(); src != BudgetWired {
		t.Fatalf("source %q", src)
	}
	setLimit(t, s, 4<<30)
	if b, src := s.machine.budget(); b.Bytes != 4<<30 || src != BudgetSettings || b.GPUCap != 0 {
		t.Fatalf("%+v from %q", b, src)
	}
	s.machine.probe = func() (estimate.Budget, error) { return estimate.Budget{}, errors.New("no /proc") }
	setLimit(t, s, 0)
	if b, src := s.machine.budget(); b.Bytes != 0 || !strings.Contains(src, "no /proc") {
		t.Fatalf("%+v from %q", b, src)
	}
}
