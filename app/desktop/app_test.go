package desktop

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"nibble/app/desktop/demo"
	"nibble/app/desktop/service"
	"nibble/app/settings"
	"nibble/engine/synth"
)

type noWindow struct{}

func (noWindow) Show()                {}
func (noWindow) Hide()                {}
func (noWindow) SetPosition(int, int) {}

func TestAutotestFromEnv(t *testing.T) {
	t.Setenv(AutotestEnv, "hi")
	t.Setenv(AutotestStopEnv, "7")
	if got := autotestFromEnv(); got != (Autotest{Prompt: "hi", StopAfter: 7}) {
		t.Fatalf("%+v", got)
	}
	t.Setenv(AutotestStopEnv, "-3")
	if got := autotestFromEnv(); got.StopAfter != 0 {
		t.Fatalf("negative stop-after kept: %+v", got)
	}
}

// Events reach the window only after Startup; with an autotest prompt set,
// each final event also prints one line.
func TestEmit(t *testing.T) {
	t.Setenv(settings.HomeEnv, t.TempDir())
	t.Setenv(AutotestEnv, "hello")
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown()
	var out bytes.Buffer
	d.log = &out
	var got []string
	d.emit(service.EventStatus, service.Status{}) // before Startup: dropped
	var emit service.Emitter = func(name string, _ any) { got = append(got, name) }
	d.emitTo.Store(&emit)
	d.emit(service.EventDelta, service.Delta{ID: "r1", Text: "x"})
	d.emit(service.EventFinal, service.Final{ID: "r1", FinishReason: "stop", GenTokens: 3, DecodeTokPerSec: 12.5, Text: " 6265-96\n"})
	if strings.Join(got, ",") != "chat:delta,chat:final" {
		t.Fatalf("window got %v", got)
	}
	if want := "autotest: reply r1 ended (stop): 3 tokens, first token after 0 ms, 12.5 tok/s: \"6265-96\"\n"; out.String() != want {
		t.Fatalf("log %q, want %q", out.String(), want)
	}
}

// Startup loads the demo model (synthesized on a first run) in the
// background and reports it ready.
func TestStartup(t *testing.T) {
	t.Setenv(settings.HomeEnv, t.TempDir())
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown()
	ready := make(chan service.Status, 1)
	d.Startup(context.Background(), Shell{Window: noWindow{}, Emit: func(name string, data any) {
		if st, ok := data.(service.Status); ok && st.State != service.StateLoading && st.State != service.StatePreparing {
			select {
			case ready <- st:
			default:
			}
		}
	}})
	select {
	case st := <-ready:
		if st.State != service.StateReady || st.Model == nil || !st.Model.Demo {
			t.Fatalf("status %+v", st)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("not ready within two minutes")
	}
	if a := d.App.Autotest(); a.Prompt != "" {
		t.Fatalf("autotest %+v without the variable", a)
	}
}

// fakeDialogs answers from a script and records what was asked.
type fakeDialogs struct {
	mu       sync.Mutex
	asked    []Question
	answer   func(Question) string
	open     string
	save     string
	opened   []string
	saveName string
}

func (f *fakeDialogs) OpenFile(title string, patterns []FilePattern) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened = append(f.opened, title)
	if len(patterns) != 1 || patterns[0].Extensions[0] != "gguf" {
		return "", fmt.Errorf("open dialog patterns %+v", patterns)
	}
	return f.open, nil
}

func (f *fakeDialogs) SaveFile(title, defaultName string, _ []FilePattern) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saveName = defaultName
	return f.save, nil
}

func (f *fakeDialogs) Ask(q Question) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, q)
	if f.answer == nil {
		return q.Cancel, nil
	}
	return f.answer(q), nil
}

func (f *fakeDialogs) questions() []Question {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

type fakePlatform struct {
	mu         sync.Mutex
	models     []string
	statusItem bool
}

func (p *fakePlatform) Window() WindowBehaviour                      { return WindowBehaviour{} }
func (p *fakePlatform) Started(context.Context, WindowControl) error { return nil }
func (p *fakePlatform) HasStatusItem() bool                          { return p.statusItem }

func (p *fakePlatform) ModelChanged(name string) {
	p.mu.Lock()
	p.models = append(p.models, name)
	p.mu.Unlock()
}

type fakeWindow struct{ hidden atomic.Int32 }

func (w *fakeWindow) Show()                {}
func (w *fakeWindow) Hide()                { w.hidden.Add(1) }
func (w *fakeWindow) SetPosition(int, int) {}

// tinyGGUF synthesizes a small llama model (named after its shape)
// trained on ctx tokens.
func tinyGGUF(t *testing.T, path string, layers, ctx int) {
	t.Helper()
	o := demo.Options()
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.Ctx = layers, 64, 2, 1, 128, ctx
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
}

// testDesktop is a Desktop on a fresh NIBBLE_HOME with fake dialogs, a
// fake platform and a small model loaded (no demo model is made).
func testDesktop(t *testing.T) (*Desktop, *fakeDialogs, *fakePlatform, string) {
	t.Helper()
	t.Setenv(settings.HomeEnv, t.TempDir())
	t.Setenv(TestDialogsEnv, "")
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Shutdown)
	plat := &fakePlatform{}
	d.Platform = plat
	dl := &fakeDialogs{}
	// As Startup does, without loading the demo model.
	d.App.setShell(Shell{Window: &fakeWindow{}, Dialogs: dl})
	dirs, _ := settings.DefaultDirs()
	first := filepath.Join(dirs.Models, "first.gguf")
	tinyGGUF(t, first, 1, 4096)
	if _, err := d.App.LoadModel(service.LoadRequest{Path: first, Ctx: 2048}); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dirs.Models, "long.gguf")
	tinyGGUF(t, long, 2, 131072)
	return d, dl, plat, long
}

func setMemoryLimit(t *testing.T, a *App, n int64) {
	t.Helper()
	c := a.Settings()
	c.MemoryLimit = n
	if _, err := a.UpdateSettings(c); err != nil {
		t.Fatal(err)
	}
}

func totalAt(t *testing.T, a *App, path string, ctx int) int64 {
	t.Helper()
	e, err := a.CheckLoad(service.LoadRequest{Path: path, Ctx: ctx, KV: "q4"})
	if err != nil {
		t.Fatal(err)
	}
	return e.Total
}

func TestLoadModelAsksFirst(t *testing.T) {
	d, dl, plat, long := testDesktop(t)
	a := d.App
	first := a.Status().Model.Path
	small, big := totalAt(t, a, long, 2048), totalAt(t, a, long, 131072)

	// Will not fit, a smaller context would: asked; Cancel refuses with
	// the advice and keeps the loaded model.
	setMemoryLimit(t, a, small+(big-small)/2)
	st, err := a.LoadModel(service.LoadRequest{Path: long, Ctx: 131072, KV: "q4"})
	qs := dl.questions()
	if len(qs) != 1 || !regexp.MustCompile(`^Load with \d+K context\?$`).MatchString(qs[0].Title) ||
		qs[0].Cancel != "Cancel" || qs[0].Default != strings.TrimSuffix(qs[0].Title, "?") || !qs[0].Warning ||
		!strings.Contains(qs[0].Message, "will not fit at 131072 tokens") {
		t.Fatalf("questions %+v", qs)
	}
	if err == nil || !strings.Contains(strings.Split(err.Error(), "\n")[0], "will not fit: needs ") || len(strings.Split(err.Error(), "\n")) < 2 {
		t.Fatalf("cancelled: %v", err)
	}
	if st.Model == nil || st.Model.Path != first {
		t.Fatalf("after cancel the model is %+v", st.Model)
	}
	// Accepted: loaded with the offered context.
	dl.answer = func(q Question) string { return q.Default }
	st, err = a.LoadModel(service.LoadRequest{Path: long, Ctx: 131072, KV: "q4"})
	if err != nil {
		t.Fatal(err)
	}
	var offered int
	fmt.Sscanf(dl.questions()[1].Title, "Load with %dK", &offered)
	if st.Model == nil || st.Model.Path != long || st.Model.Ctx != offered*1024 || offered < 2 {
		t.Fatalf("accepted %d K: %+v", offered, st.Model)
	}

	// Tight: asked whether to load anyway.
	setMemoryLimit(t, a, int64(float64(small)/0.9))
	if e, _ := a.CheckLoad(service.LoadRequest{Path: first, Ctx: 2048, KV: "q4"}); e.Verdict != "tight" {
		t.Fatalf("want a tight load, got %+v", e)
	}
	dl.answer = nil
	st, err = a.LoadModel(service.LoadRequest{Path: first, Ctx: 2048, KV: "q4"})
	qs = dl.questions()
	if err != nil || st.Model.Path != long || len(qs) != 3 || qs[2].Title != "Load anyway?" || qs[2].Default != "Load anyway" {
		t.Fatalf("tight, cancelled: %+v, %v, asked %+v", st.Model, err, qs)
	}
	dl.answer = func(q Question) string { return q.Default }
	if st, err = a.LoadModel(service.LoadRequest{Path: first, Ctx: 2048, KV: "q4"}); err != nil || st.Model.Path != first {
		t.Fatalf("tight, load anyway: %+v, %v", st.Model, err)
	}

	// Nothing fits: refused without a question.
	setMemoryLimit(t, a, small/4)
	n := len(dl.questions())
	if _, err := a.LoadModel(service.LoadRequest{Path: long, Ctx: 131072}); err == nil || !strings.Contains(err.Error(), "will not fit") {
		t.Fatalf("nothing fits: %v", err)
	}
	if len(dl.questions()) != n {
		t.Fatalf("asked %+v when nothing fits", dl.questions()[n:])
	}
	// A file that is not a model: no question, the reason.
	junk := filepath.Join(t.TempDir(), "junk.gguf")
	os.WriteFile(junk, []byte("junk"), 0o644)
	if _, err := a.LoadModel(service.LoadRequest{Path: junk}); err == nil || !strings.Contains(err.Error(), "not a GGUF file") {
		t.Fatalf("junk: %v", err)
	}

	// The platform heard of each model change, once each.
	plat.mu.Lock()
	defer plat.mu.Unlock()
	if len(plat.models) < 3 || plat.models[len(plat.models)-1] == "" {
		t.Fatalf("ModelChanged calls %q", plat.models)
	}
	for i := 1; i < len(plat.models); i++ {
		if plat.models[i] == plat.models[i-1] {
			t.Fatalf("ModelChanged told twice: %q", plat.models)
		}
	}
}

func TestChooseModelFile(t *testing.T) {
	d, dl, _, long := testDesktop(t)
	a := d.App
	if p, err := a.ChooseModelFile(); p != "" || err != nil {
		t.Fatalf("cancelled: %q, %v", p, err)
	}
	elsewhere := filepath.Join(t.TempDir(), "mine.gguf")
	data, _ := os.ReadFile(long)
	os.WriteFile(elsewhere, data, 0o644)
	dl.open = elsewhere
	if p, err := a.ChooseModelFile(); p != elsewhere || err != nil {
		t.Fatalf("chose %q, %v", p, err)
	}
	models, _ := a.Models()
	if !slices.ContainsFunc(models, func(m service.LocalModel) bool { return m.Path == elsewhere && m.Source == service.SourceAdded }) {
		t.Fatalf("not added: %+v", models)
	}
	cut := filepath.Join(t.TempDir(), "cut.gguf")
	os.WriteFile(cut, data[:len(data)/2], 0o644)
	dl.open = cut
	if p, err := a.ChooseModelFile(); p != "" || err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("cut file: %q, %v", p, err)
	}
}

func TestSaveConversation(t *testing.T) {
	d, dl, _, _ := testDesktop(t)
	a := d.App
	finals := make(chan service.Final, 1)
	emit := func(name string, data any) {
		if f, ok := data.(service.Final); ok {
			finals <- f
		}
	}
	d.emitTo.Store((*service.Emitter)(&emit))
	res, err := a.Send(service.SendRequest{Messages: []service.Message{{Role: "user", Content: "What is 2/3 of 9?"}}, MaxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	<-finals
	if p, err := a.SaveConversation(res.ConversationID); p != "" || err != nil {
		t.Fatalf("cancelled: %q, %v", p, err)
	}
	if dl.saveName != "What is 2-3 of 9.md" {
		t.Fatalf("suggested name %q", dl.saveName)
	}
	dl.save = filepath.Join(t.TempDir(), "chat.md")
	p, err := a.SaveConversation(res.ConversationID)
	if err != nil || p != dl.save {
		t.Fatalf("saved to %q, %v", p, err)
	}
	got, _ := os.ReadFile(p)
	want, _ := a.ExportConversation(res.ConversationID)
	if string(got) != want || !strings.Contains(want, "What is 2/3 of 9?") {
		t.Fatalf("file %q, export %q", got, want)
	}
	if _, err := a.SaveConversation(999); err == nil {
		t.Fatal("saved a conversation that does not exist")
	}
}

func TestHideAndQuit(t *testing.T) {
	w := &fakeWindow{}
	quits := 0
	plat := &fakePlatform{statusItem: true}
	a := &App{hasStatusItem: plat.HasStatusItem}
	a.HideWindow() // before Startup: nothing to do, no panic
	a.Quit()
	a.setShell(Shell{Window: w, Quit: func() { quits++ }})
	a.HideWindow()
	a.Quit()
	if w.hidden.Load() != 1 || quits != 1 {
		t.Fatalf("hidden %d, quit %d", w.hidden.Load(), quits)
	}
	if _, err := a.ChooseModelFile(); err == nil {
		t.Fatal("a dialog without a window succeeded")
	}
}

// Without a menu-bar item (Linux) nothing could show a hidden window
// again: Escape's HideWindow leaves it shown, and the window is told so.
func TestHideOnlyWithAStatusItem(t *testing.T) {
	for _, tc := range []struct {
		name     string
		app      *App
		wantHide bool
	}{
		{"no platform", &App{}, false},
		{"no status item", &App{hasStatusItem: (&fakePlatform{}).HasStatusItem}, false},
		{"status item", &App{hasStatusItem: (&fakePlatform{statusItem: true}).HasStatusItem}, true},
		{"this system's platform", &App{hasStatusItem: newPlatform().HasStatusItem}, false}, // not made before Started
	} {
		w := &fakeWindow{}
		tc.app.setShell(Shell{Window: w})
		if got := tc.app.CanHideWindow(); got != tc.wantHide {
			t.Errorf("%s: CanHideWindow = %v, want %v", tc.name, got, tc.wantHide)
		}
		tc.app.HideWindow()
		if got := w.hidden.Load() == 1; got != tc.wantHide {
			t.Errorf("%s: hidden %d times, want hidden %v", tc.name, w.hidden.Load(), tc.wantHide)
		}
	}
	// The Desktop asks its platform as it is now.
	t.Setenv(settings.HomeEnv, t.TempDir())
	t.Setenv(TestDialogsEnv, "")
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown()
	plat := &fakePlatform{}
	d.Platform = plat
	if d.App.CanHideWindow() {
		t.Fatal("CanHideWindow with a platform without a status item")
	}
	plat.statusItem = true
	if !d.App.CanHideWindow() {
		t.Fatal("not CanHideWindow once the platform has a status item")
	}
}

func TestExportName(t *testing.T) {
	for title, want := range map[string]string{
		"Why is the sky blue?":   "Why is the sky blue.md",
		"a/b\\c: d":              "a-b-c- d.md",
		"":                       "Conversation.md",
		"...":                    "Conversation.md",
		strings.Repeat("é", 100): strings.Repeat("é", 80) + ".md",
	} {
		if got := exportName(title); got != want {
			t.Errorf("exportName(%q) = %q, want %q", title, got, want)
		}
	}
}

func TestScriptedDialogs(t *testing.T) {
	var out bytes.Buffer
	w := func() io.Writer { return &out }
	t.Setenv(TestDialogsEnv, "")
	if s, err := scriptedFromEnv(w); s != nil || err != nil {
		t.Fatalf("unset: %v, %v", s, err)
	}
	t.Setenv(TestDialogsEnv, "yes")
	if _, err := scriptedFromEnv(w); err == nil {
		t.Fatal("NIBBLE_TEST_DIALOGS=yes accepted")
	}
	q := Question{Title: "Load with 8K context?", Message: "long.gguf will not fit.\nMore.", Buttons: []string{"Load with 8K context", "Cancel"},
		Default: "Load with 8K context", Cancel: "Cancel"}
	t.Setenv(TestDialogsEnv, "cancel")
	t.Setenv(TestSaveDirEnv, "")
	s, err := scriptedFromEnv(w)
	if err != nil {
		t.Fatal(err)
	}
	if ans, _ := s.Ask(q); ans != "Cancel" {
		t.Fatalf("cancel answered %q", ans)
	}
	if p, _ := s.OpenFile("Open a GGUF model", nil); p != "" {
		t.Fatalf("open answered %q", p)
	}
	if p, _ := s.SaveFile("Export conversation", "chat.md", nil); p != "" {
		t.Fatalf("save answered %q", p)
	}
	dir := t.TempDir()
	t.Setenv(TestDialogsEnv, "default")
	t.Setenv(TestSaveDirEnv, dir)
	s, _ = scriptedFromEnv(w)
	if ans, _ := s.Ask(q); ans != "Load with 8K context" {
		t.Fatalf("default answered %q", ans)
	}
	if p, _ := s.SaveFile("Export conversation", "chat.md", nil); p != filepath.Join(dir, "chat.md") {
		t.Fatalf("save answered %q", p)
	}
	want := "dialog: Load with 8K context?: long.gguf will not fit. -> Cancel\n" +
		"dialog: Open a GGUF model: choose a file to open -> cancel\n" +
		"dialog: Export conversation: save as chat.md -> cancel\n" +
		"dialog: Load with 8K context?: long.gguf will not fit. -> Load with 8K context\n" +
		"dialog: Export conversation: save as chat.md -> " + filepath.Join(dir, "chat.md") + "\n"
	if out.String() != want {
		t.Fatalf("lines\n%s\nwant\n%s", out.String(), want)
	}
	t.Setenv(TestSaveDirEnv, "relative/dir")
	if _, err := scriptedFromEnv(w); err == nil {
		t.Fatal("a relative save folder was accepted")
	}
}

// Under NIBBLE_TEST_DIALOGS the scripted dialogs stand in for the native
// ones Startup is given, and their lines go to the app's output.
func TestStartupUsesScriptedDialogs(t *testing.T) {
	t.Setenv(settings.HomeEnv, t.TempDir())
	t.Setenv(TestDialogsEnv, "cancel")
	t.Setenv(TestSaveDirEnv, "")
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown()
	var out bytes.Buffer
	d.log = &out
	native := &fakeDialogs{open: "/should/not/be/used.gguf"}
	d.Startup(context.Background(), Shell{Window: noWindow{}, Dialogs: native})
	if p, err := d.App.ChooseModelFile(); p != "" || err != nil {
		t.Fatalf("ChooseModelFile = %q, %v", p, err)
	}
	if len(native.opened) != 0 || out.String() != "dialog: Open a GGUF model: choose a file to open -> cancel\n" {
		t.Fatalf("native dialogs opened %v; output %q", native.opened, out.String())
	}
	for st := d.App.Status(); st.State != service.StateReady && st.State != service.StateError; st = d.App.Status() {
		time.Sleep(10 * time.Millisecond) // the demo model, loading in the background
	}
	t.Setenv(TestDialogsEnv, "sometimes")
	if _, err := New(); err == nil || !strings.Contains(err.Error(), TestDialogsEnv) {
		t.Fatalf("New with a bad %s: %v", TestDialogsEnv, err)
	}
}
