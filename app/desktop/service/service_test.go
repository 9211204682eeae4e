package service

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nibble/app/desktop/demo"
	"nibble/app/settings"
	"nibble/engine/kv"
	"nibble/engine/synth"
)

// recorder keeps every event, and signals each chat:final.
type recorder struct {
	mu     sync.Mutex
	events []struct {
		name string
		data any
	}
	finals chan Final
}

func newRecorder() *recorder { return &recorder{finals: make(chan Final, 16)} }

func (r *recorder) emit(name string, data any) {
	r.mu.Lock()
	r.events = append(r.events, struct {
		name string
		data any
	}{name, data})
	r.mu.Unlock()
	if f, ok := data.(Final); ok {
		r.finals <- f
	}
}

// lastStatus is the last EventStatus emitted.
func (r *recorder) lastStatus(t *testing.T) Status {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if st, ok := r.events[i].data.(Status); ok && r.events[i].name == EventStatus {
			return st
		}
	}
	t.Fatal("no status event")
	return Status{}
}

func (r *recorder) text(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, e := range r.events {
		if d, ok := e.data.(Delta); ok && d.ID == id {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

func (r *recorder) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.name == name {
			n++
		}
	}
	return n
}

func (r *recorder) final(t *testing.T) Final {
	t.Helper()
	select {
	case f := <-r.finals:
		return f
	case <-time.After(60 * time.Second):
		t.Fatal("no chat:final within a minute")
		return Final{}
	}
}

// newService has a tiny random model standing where the demo model goes,
// so Start loads it without synthesizing the large one.
func newService(t *testing.T) (*Service, *recorder) {
	t.Helper()
	return newServiceWith(t, nil)
}

// newServiceWith is newService with prep run on the folders first.
func newServiceWith(t *testing.T, prep func(settings.Dirs)) (*Service, *recorder) {
	t.Helper()
	t.Setenv(settings.HomeEnv, t.TempDir())
	dirs, err := settings.DefaultDirs()
	if err != nil {
		t.Fatal(err)
	}
	if err := dirs.Ensure(); err != nil {
		t.Fatal(err)
	}
	if prep != nil {
		prep(dirs)
	}
	o := demo.Options()
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 64, 2, 1, 128
	if err := synth.Generate(demo.Path(dirs.Cache), o); err != nil {
		t.Fatal(err)
	}
	store, err := settings.Open(dirs.SettingsFile())
	if err != nil {
		t.Fatal(err)
	}
	// KV q4, not auto: the KV check would run in the background of every
	// test and may move a random-weight model to q8 (kvcheck_test.go
	// tests auto).
	if err := store.Update(func(s *settings.Settings) error { s.ContextTokens = 1024; s.Threads = 2; s.KVType = "q4"; return nil }); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	s := New(store, dirs, rec.emit)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, rec
}

func TestStartLoadsTheDemoModel(t *testing.T) {
	s, rec := newService(t)
	if st := s.Status(); st.State != StateStarting || st.Model != nil {
		t.Fatalf("before Start: %+v", st)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	st := s.Status()
	if st.State != StateReady || st.Model == nil || !st.Model.Demo || st.Busy {
		t.Fatalf("after Start: %+v (model %+v)", st, st.Model)
	}
	if st.Model.Ctx != 1024 || st.Model.KV != "q4" {
		t.Fatalf("model options: ctx %d kv %s, want the settings' 1024 and auto = q4", st.Model.Ctx, st.Model.KV)
	}
	if rec.count(EventStatus) < 2 {
		t.Fatalf("%d status events, want loading and ready", rec.count(EventStatus))
	}
}

func TestSendStreamsAndEnds(t *testing.T) {
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "Hello there"}}, MaxTokens: 12})
	id := res.ReplyID
	if err != nil {
		t.Fatal(err)
	}
	f := rec.final(t)
	if f.ID != id || f.FinishReason != "length" || f.GenTokens != 12 || f.Error != "" {
		t.Fatalf("final %+v", f)
	}
	if f.DecodeTokPerSec <= 0 || f.TTFTMs <= 0 || f.PromptTokens == 0 {
		t.Fatalf("final stats %+v", f)
	}
	if got := rec.text(id); got != f.Text {
		t.Fatalf("deltas %q, final text %q", got, f.Text)
	}
	// The demo model caps replies that ask for more, or for no limit.
	res2, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "Again"}}})
	id2 := res2.ReplyID
	if err != nil {
		t.Fatal(err)
	}
	f2 := rec.final(t)
	if f2.ID != id2 || f2.GenTokens > DemoMaxTokens {
		t.Fatalf("demo reply %+v, want at most %d tokens", f2, DemoMaxTokens)
	}
	if st := s.Status(); st.Busy || st.Running != 0 {
		t.Fatalf("after the replies: %+v", st)
	}
}

func TestStopCancels(t *testing.T) {
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "Go on"}}, MaxTokens: 100000})
	id := res.ReplyID
	if err != nil {
		t.Fatal(err)
	}
	if !s.Status().Busy {
		t.Fatal("not busy while a reply runs")
	}
	s.Stop(id)
	f := rec.final(t)
	if f.ID != id || f.FinishReason != "cancelled" {
		t.Fatalf("final %+v, want cancelled", f)
	}
	s.Stop(id) // ended already: nothing happens
}

func TestSendRefuses(t *testing.T) {
	s, _ := newService(t)
	if _, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "hi"}}}); err == nil {
		t.Fatal("Send before a model is loaded succeeded")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	for _, req := range []SendRequest{
		{},
		{Messages: []Message{{Role: "tool", Content: "x"}}},
		{Messages: []Message{{Role: "user", Content: strings.Repeat("word ", 2000)}}},
	} {
		if id, err := s.Send(req); err == nil {
			t.Errorf("Send(%.40v) = %+v, want an error", req, id)
		}
	}
}

func TestLoadModelRemembersAndFails(t *testing.T) {
	s, _ := newService(t)
	bad := filepath.Join(t.TempDir(), "missing.gguf")
	st, err := s.LoadModel(LoadRequest{Path: bad})
	if err == nil || st.State != StateError || !strings.Contains(st.Error, "missing.gguf") {
		t.Fatalf("LoadModel(missing) = %+v, %v", st, err)
	}
	other := filepath.Join(t.TempDir(), "other.gguf")
	o := demo.Options()
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 1, 64, 2, 1, 128
	if err := synth.Generate(other, o); err != nil {
		t.Fatal(err)
	}
	st, err = s.LoadModel(LoadRequest{Path: other})
	if err != nil || st.State != StateReady || st.Model == nil || st.Model.Demo || st.Error != "" {
		t.Fatalf("LoadModel(other) = %+v, %v", st, err)
	}
	if got := s.store.Get().LastModel; got != other {
		t.Fatalf("settings last_model %q, want %q", got, other)
	}
}

func TestEstimate(t *testing.T) {
	s, _ := newService(t)
	if _, err := s.Estimate(0, ""); err == nil {
		t.Fatal("Estimate without a model succeeded")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	q4, err := s.Estimate(2048, "auto")
	if err != nil {
		t.Fatal(err)
	}
	f16, err := s.Estimate(2048, "f16")
	if err != nil {
		t.Fatal(err)
	}
	if q4.Ctx != 2048 || q4.KV != "q4" || q4.KVBytes <= 0 || q4.Total != q4.Weights+q4.KVBytes+q4.Scratch+q4.Overhead {
		t.Fatalf("q4 %+v\nf16 %+v", q4, f16)
	}
	// q4's codes are 0.625 bytes an element (groups of 32) against f16's 2;
	// a backend that reads the f16 residual window (the CPU) adds its ring,
	// W of the 2048 positions at f16's size.
	codes := f16.KVBytes * 5 / 16
	ring := f16.KVBytes * int64(kv.DefaultResidual(kv.Q4)) / 2048
	if q4.KVBytes != codes && q4.KVBytes != codes+ring {
		t.Fatalf("q4 KV %d bytes, want %d (codes) or %d (codes and the residual window), from f16's %d", q4.KVBytes, codes, codes+ring, f16.KVBytes)
	}
	if _, err := s.Estimate(2048, "q3"); err == nil {
		t.Fatal("Estimate with kv q3 succeeded")
	}
}
