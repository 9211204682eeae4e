package service

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nibble/app/settings"
	"nibble/catalog/vocab"
	"nibble/engine/ggml"
	"nibble/engine/synth"
	"nibble/internal/testdata"
)

// autoService is a service whose KV setting is auto (the app's default),
// with the machine's budget pinned far above the test models.
func autoService(t *testing.T) (*Service, *recorder) {
	t.Helper()
	s, rec := newService(t)
	pinBudget(s, 8<<30)
	if err := s.store.Update(func(c *settings.Settings) error { c.KVType = "auto"; return nil }); err != nil {
		t.Fatal(err)
	}
	return s, rec
}

// waitKVCheck waits for the loaded model's KV check to end (and, when
// wantNote, for its note) and returns the status then.
func waitKVCheck(t *testing.T, s *Service, wantNote bool) Status {
	t.Helper()
	var st Status
	// A check on the trained model under the race detector takes most of
	// a minute on a busy two-core machine.
	waitWithin(t, 3*time.Minute, "the KV check", func() bool {
		st = s.Status()
		k := st.Model.KVCheck
		return k != nil && k.State != KVCheckRunning && (!wantNote || k.Note != "")
	})
	return st
}

// kvProgress are the KV check progress figures the status events carried.
func kvProgress(rec *recorder) [][2]int {
	var out [][2]int
	for _, e := range rec.all(EventStatus) {
		if st := e.(Status); st.Model != nil && st.Model.KVCheck != nil && st.Model.KVCheck.State == KVCheckRunning {
			out = append(out, [2]int{st.Model.KVCheck.Done, st.Model.KVCheck.Total})
		}
	}
	return out
}

func logCheck(t *testing.T, k *KVCheck) {
	t.Helper()
	for _, r := range k.Rows {
		t.Logf("%-8s top-1 %6.2f%% cos %.6f passed=%-5v %s", r.Mode, 100*r.Top1, r.Cosine, r.Passed, r.Skipped)
	}
	t.Logf("scale ratio %.2f, %d tokens, %.0f ms: %s; note %q", k.ScaleRatio, k.Tokens, k.ElapsedMs, k.Summary, k.Note)
}

// With KV auto the trained model loads at once with q4 (rotated), the
// check runs in the background with progress and keeps q4, and its result
// is kept per file: the next load shows it at once and checks nothing.
func TestKVCheckTrainedModelKeepsQ4(t *testing.T) {
	path := filepath.Join(testdata.Dir(t), "trained", "nibble-docqa-29m-f16.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("skipping: the trained model is not at %s", path)
	}
	s, rec := autoService(t)
	st, err := s.LoadModel(LoadRequest{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if st.Model.KV != "q4" || st.Model.KVLabel != "q4 KV (rotated)" || st.Model.KVCheck == nil {
		t.Fatalf("right after the load: KV %q label %q check %+v", st.Model.KV, st.Model.KVLabel, st.Model.KVCheck)
	}
	st = waitKVCheck(t, s, false)
	k := st.Model.KVCheck
	logCheck(t, k)
	if k.State != KVCheckDone || k.Chosen != "q4-rot" || k.Cached || len(k.Rows) != 3 || k.Reason == "" || k.Error != "" {
		t.Fatalf("check %+v, want q4-rot measured now", k)
	}
	if st.Model.KV != "q4" || st.Model.KVLabel != "q4 KV (rotated)" || k.Note != "" {
		t.Fatalf("after the check: KV %q label %q note %q", st.Model.KV, st.Model.KVLabel, k.Note)
	}
	prog := kvProgress(rec)
	if len(prog) < 3 || prog[len(prog)-1][0] <= prog[0][0] || prog[0][1] != 4*((k.Tokens+15)/16) {
		t.Fatalf("progress %v", prog)
	}
	data, err := os.ReadFile(filepath.Join(s.dirs.Data, KVChoicesFile))
	if err != nil {
		t.Fatal(err)
	}
	var kept map[string]kvChoiceEntry
	if err := json.Unmarshal(data, &kept); err != nil || kept[path].Choice.Type.String() != "q4" || !kept[path].Choice.Rotate {
		t.Fatalf("kept %s (%v)", data, err)
	}

	before := len(kvProgress(rec))
	st, err = s.LoadModel(LoadRequest{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if k := st.Model.KVCheck; k == nil || k.State != KVCheckDone || !k.Cached || k.Chosen != "q4-rot" || st.Model.KV != "q4" {
		t.Fatalf("second load: KV %q check %+v, want the kept q4-rot at once", st.Model.KV, k)
	}
	if n := len(kvProgress(rec)); n != before {
		t.Fatalf("the second load checked again (%d progress events)", n-before)
	}
}

// probeSynth writes a small llama model with attention scale 1.0 and
// outlier key channels, on which q4 fails the check.
func probeSynth(t *testing.T, path string) {
	t.Helper()
	o := synth.DefaultOptions("llama")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 256, 4, 2, 512
	o.Type, o.Seed, o.VocabData = ggml.F16, 7, vocab.LlamaSPM
	o.AttnScale, o.KeyOutliers, o.KeyOutlierGain = 1, 2, 20
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
}

// Where q4 fails the check and q8 fits, the session moves to q8 once idle
// (a reply sent meanwhile ends normally) and says why; the next load takes
// q8 at once. Where q8 does not fit, q4 stays and the note says so.
func TestKVCheckSwitchesToQ8WhereQ4Fails(t *testing.T) {
	s, rec := autoService(t)
	path := filepath.Join(t.TempDir(), "outliers.gguf")
	probeSynth(t, path)
	st, err := s.LoadModel(LoadRequest{Path: path, Ctx: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if st.Model.KV != "q4" || st.Model.KVCheck == nil || st.Model.KVCheck.State != KVCheckRunning {
		t.Fatalf("right after the load: KV %q check %+v", st.Model.KV, st.Model.KVCheck)
	}
	res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "Tell me about the lighthouse."}}, MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	if f := rec.final(t); f.ID != res.ReplyID || f.FinishReason == "error" || f.FinishReason == "cancelled" || f.GenTokens == 0 {
		t.Fatalf("reply during the check: %+v", f)
	}
	st = waitKVCheck(t, s, true)
	k := st.Model.KVCheck
	logCheck(t, k)
	if k.Chosen != "q8" || !strings.HasPrefix(k.Note, "KV switched to q8: ") || !strings.Contains(k.Note, k.Reason) {
		t.Fatalf("check %+v", k)
	}
	waitFor(t, "the switch to q8", func() bool { return s.Status().Model.KV == "q8" })
	if st := s.Status(); st.Model.Ctx != 4096 || st.Model.KVLabel != "q8 KV" {
		t.Fatalf("after the switch: ctx %d label %q", st.Model.Ctx, st.Model.KVLabel)
	}
	if c := s.Settings(); c.KVType != "auto" {
		t.Fatalf("the switch changed the KV setting to %q", c.KVType)
	}
	// The window learns it from the last status event: the switch and its note.
	if last := rec.lastStatus(t); last.Model == nil || last.Model.KVLabel != "q8 KV" || last.Model.KVCheck == nil ||
		!strings.HasPrefix(last.Model.KVCheck.Note, "KV switched to q8: ") {
		t.Fatalf("the last status event after the switch: %+v (check %+v)", last.Model, last.Model.KVCheck)
	}

	st, err = s.LoadModel(LoadRequest{Path: path, Ctx: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if st.Model.KV != "q8" || st.Model.KVCheck == nil || !st.Model.KVCheck.Cached {
		t.Fatalf("second load: KV %q check %+v, want the kept q8 at once", st.Model.KV, st.Model.KVCheck)
	}

	// A limit between q4's and q8's totals at 4096 tokens: q8 does not fit.
	q4, q8 := total(t, s, path, 4096, "q4"), total(t, s, path, 4096, "q8")
	setLimit(t, s, (q4+q8)/2)
	st, err = s.LoadModel(LoadRequest{Path: path, Ctx: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if k := st.Model.KVCheck; st.Model.KV != "q4" || k == nil || !strings.Contains(k.Note, "does not fit") {
		t.Fatalf("kept q8 that does not fit: KV %q check %+v", st.Model.KV, k)
	}
	// Checked afresh, the switch is refused the same way.
	if err := os.Remove(filepath.Join(s.dirs.Data, KVChoicesFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadModel(LoadRequest{Path: path, Ctx: 4096}); err != nil {
		t.Fatal(err)
	}
	st = waitKVCheck(t, s, true)
	if k := st.Model.KVCheck; st.Model.KV != "q4" || k.Cached || !strings.Contains(k.Note, "does not fit here: keeping q4") {
		t.Fatalf("fresh check where q8 does not fit: KV %q check %+v", st.Model.KV, k)
	}
}
