package service

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"nibble/engine/chat"
	"nibble/engine/sysmem"
)

// WailsModule is the app toolkit's module, whose version Diagnostics shows.
const WailsModule = "github.com/wailsapp/wails/v2"

// Diagnostics describes the machine, the memory budget and where it comes
// from, the backend and why, the versions, the loaded model and its chat
// template, and Nibble's folders.
func (s *Service) Diagnostics() Diagnostics {
	d := Diagnostics{OS: runtime.GOOS, Arch: runtime.GOARCH, Device: device(runtime.GOOS, "/proc/cpuinfo"),
		CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), DataDir: s.dirs.Data, ConfigDir: s.dirs.Config, ModelsDir: s.dirs.Models}
	d.Version, d.WailsVersion = versions()
	choice := s.machine.backendChoice()
	d.Backend, d.BackendReason = choice.Backend, choice.Reason
	if choice.Device != "" {
		d.Device = choice.Device // the GPU's name, e.g. "Apple M2 Pro"
	}
	if info, err := sysmem.Probe(); err == nil {
		d.TotalRAM, d.AvailableRAM = clamp(info.TotalRAM), clamp(info.AvailableRAM)
		d.WiredLimitMB = clamp(info.WiredLimitMB)
	}
	b, src := s.machine.budget()
	d.Budget, d.BudgetSource = b.Bytes, src
	c := s.store.Get()
	d.Threads = c.Threads
	if d.Threads <= 0 {
		d.Threads = runtime.GOMAXPROCS(0) // the CPU backend's default
	}
	st := s.Status()
	d.TemplateStatus = "no model is loaded"
	if m := st.Model; m != nil {
		d.Model = m
		if info, ok := s.loader.engine().Info(); ok && info.Estimate.Threads > 0 {
			d.Threads = info.Estimate.Threads
		}
		switch {
		case m.Template == chat.CustomName:
			d.TemplateStatus = "your own template (Models, Prompt template)"
		case m.Template == chat.NoneName:
			d.TemplateStatus = "none: plain completion of the messages' contents"
		case m.TemplateProblem != "":
			d.TemplateStatus = "built-in " + m.Template + " template: " + m.TemplateProblem
		case m.Template == "gguf":
			d.TemplateStatus = "the file's own chat template"
		default:
			d.TemplateStatus = "built-in " + m.Template + " template"
		}
	}
	d.SettingsWarning = s.settingsWarning()
	_, loaded := s.loader.engine().Info()
	d.ChatTarget = s.remote.target(loaded)
	return d
}

func clamp(v uint64) int64 { return int64(min(v, 1<<63-1)) }

// device is what runs the model: the CPU's model name on Linux, the GPU
// on a Mac (where the Metal backend will run it).
func device(goos, cpuinfo string) string {
	if goos == "darwin" {
		return "Apple GPU"
	}
	if f, err := os.Open(cpuinfo); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH + " CPU"
}

// versions are Nibble's version (the module version, else "dev" with the
// commit it was built from) and the Wails version linked in.
func versions() (nibble, wails string) {
	nibble, wails = "dev", "not in this build"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nibble, wails
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		nibble = v
	} else {
		var rev, dirty string
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value[:min(12, len(kv.Value))]
			case "vcs.modified":
				if kv.Value == "true" {
					dirty = ", modified"
				}
			}
		}
		if rev != "" {
			nibble = "dev (" + rev + dirty + ")"
		}
	}
	for _, dep := range bi.Deps {
		if dep.Path == WailsModule {
			wails = dep.Version
			if dep.Replace != nil && dep.Replace.Version != "" {
				wails = dep.Replace.Version
			}
		}
	}
	return nibble, wails
}
