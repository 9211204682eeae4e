package service

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/app/desktop/demo"
	"nibble/engine/estimate"
)

// loadedService has the demo-shaped model loaded and a long-context model
// (trained on 131072 tokens) in the models folder, with the machine's
// budget pinned far above both.
func loadedService(t *testing.T) (*Service, *recorder, string) {
	t.Helper()
	s, rec := newService(t)
	pinBudget(s, 8<<30)
	long := filepath.Join(s.dirs.Models, "long.gguf")
	tinyModel(t, long, 131072)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s, rec, long
}

// total is what loading path at ctx with kv takes, by the estimator.
func total(t *testing.T, s *Service, path string, ctx int, kvName string) int64 {
	t.Helper()
	e, err := s.CheckLoad(LoadRequest{Path: path, Ctx: ctx, KV: kvName})
	if err != nil {
		t.Fatal(err)
	}
	return e.Total
}

func TestCheckLoadVerdictsAndLimits(t *testing.T) {
	s, _, long := loadedService(t)
	small, big := total(t, s, long, 2048, "q4"), total(t, s, long, 131072, "q4")
	if big <= small {
		t.Fatalf("131072 tokens take %d, 2048 take %d", big, small)
	}
	limit := small + (big-small)/2
	setLimit(t, s, limit)
	e, err := s.CheckLoad(LoadRequest{Path: long, Ctx: 131072, KV: "q4"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Verdict != "will-not-fit" || e.Budget != limit || e.BudgetSource != BudgetSettings || e.CtxTrain != 131072 || e.Approx {
		t.Fatalf("estimate %+v", e)
	}
	if e.Total != e.Weights+e.KVBytes+e.Scratch+e.Overhead || e.MaxCtx <= 2048 || e.MaxCtx >= 131072 {
		t.Fatalf("breakdown %+v", e)
	}
	if len(e.Advice) == 0 || !strings.Contains(strings.Join(e.Advice, " "), "tokens") || strings.Contains(strings.Join(e.Advice, " "), "--ctx") {
		t.Fatalf("advice %q: want it in the app's words", e.Advice)
	}
	var kinds []string
	for _, l := range e.Limits {
		kinds = append(kinds, l.KV)
	}
	if strings.Join(kinds, ",") != "q4,q8,f16" {
		t.Fatalf("limits %+v", e.Limits)
	}
	q4, q8, f16 := e.Limits[0], e.Limits[1], e.Limits[2]
	if !(q4.MaxCtx > q8.MaxCtx && q8.MaxCtx > f16.MaxCtx && q4.MaxCtx == e.MaxCtx) || !(q4.Bytes < q8.Bytes && q8.Bytes < f16.Bytes) || q4.Bytes != e.KVBytes {
		t.Fatalf("limits %+v", e.Limits)
	}
	// With room for far more than the model was trained on, the largest
	// context shown is the trained one, for every KV type.
	setLimit(t, s, 64*big)
	if e, err := s.CheckLoad(LoadRequest{Path: long, Ctx: 2048, KV: "q4"}); err != nil || e.MaxCtx != 131072 {
		t.Fatalf("a budget of %d: %+v, %v", 64*big, e, err)
	} else {
		for _, l := range e.Limits {
			if l.MaxCtx != 131072 {
				t.Fatalf("a budget of %d: limits %+v, want the trained context", 64*big, e.Limits)
			}
		}
	}
	setLimit(t, s, limit)
	// The context slider's other end fits; tight in between.
	if e, _ := s.CheckLoad(LoadRequest{Path: long, Ctx: 2048, KV: "q4"}); e.Verdict != "fits" && e.Verdict != "tight" {
		t.Fatalf("2048 tokens: %+v", e)
	}
	// A machine budget below the limit in Settings is the one that counts.
	pinBudget(s, limit/2)
	if e, _ := s.CheckLoad(LoadRequest{Path: long, Ctx: 2048}); e.Budget != limit/2 || e.BudgetSource != BudgetAvailable {
		t.Fatalf("budget %d from %q, want the machine's %d", e.Budget, e.BudgetSource, limit/2)
	}
	// Defaults: the settings' context, at most the trained one; auto = q4.
	pinBudget(s, 8<<30)
	if e, _ := s.CheckLoad(LoadRequest{Path: long}); e.Ctx != 1024 || e.KV != "q4" {
		t.Fatalf("defaults: ctx %d kv %s, want the settings' 1024 and q4", e.Ctx, e.KV)
	}
	for _, req := range []LoadRequest{{}, {Path: long, KV: "q3"}, {Path: long, Ctx: -1}} {
		if _, err := s.CheckLoad(req); err == nil {
			t.Errorf("CheckLoad(%+v) succeeded", req)
		}
	}
}

// A load that will not fit is refused before anything is allocated, with
// what it needs and the advice, and the model loaded before stays.
func TestLoadModelRefusesWhatWillNotFit(t *testing.T) {
	s, rec, long := loadedService(t)
	before := s.Status().Model
	seen := len(rec.all(EventStatus))
	setLimit(t, s, total(t, s, long, 2048, "f16")+1<<20)
	st, err := s.LoadModel(LoadRequest{Path: long, Ctx: 131072, KV: "f16"})
	var nf *NotFitError
	if !errors.As(err, &nf) {
		t.Fatalf("LoadModel = %v, want a *NotFitError", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if !strings.HasPrefix(lines[0], s.Describe(long).Name+" will not fit: needs ") || !strings.HasSuffix(lines[0], " MiB.") || len(lines) < 2 {
		t.Fatalf("refusal %q: want a first line with what it needs, then the advice", err)
	}
	if st.State != StateReady || st.Model == nil || st.Model.Path != before.Path || st.Error != "" {
		t.Fatalf("after the refusal: %+v", st)
	}
	if got := s.Settings().LastModel; got != "" {
		t.Fatalf("a refused model was remembered: %q", got)
	}
	// Bad files: refused, in words, and the loaded model stays.
	data, _ := os.ReadFile(long)
	cut := filepath.Join(t.TempDir(), "cut.gguf")
	writeFile(t, cut, truncated(data))
	junk := filepath.Join(t.TempDir(), "junk.gguf")
	writeFile(t, junk, []byte("GGUX nonsense"))
	for path, want := range map[string]string{cut: "cut short (truncated)", junk: "not a GGUF file"} {
		st, err := s.LoadModel(LoadRequest{Path: path})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadModel(%s) = %v, want %q", filepath.Base(path), err, want)
		}
		if st.State != StateReady || st.Model == nil || st.Model.Path != before.Path {
			t.Errorf("after LoadModel(%s): %+v", filepath.Base(path), st)
		}
	}
	for _, ev := range rec.all(EventStatus)[seen:] {
		if st := ev.(Status); st.State == StateLoading {
			t.Fatalf("a refused load began loading: %+v", st)
		}
	}
}

// A load that fits is remembered with the context and KV type it asked
// for; the models list shows it loaded.
func TestLoadModelRemembers(t *testing.T) {
	s, rec, long := loadedService(t)
	st, err := s.LoadModel(LoadRequest{Path: long, Ctx: 8192, KV: "q8"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Model == nil || st.Model.Path != long || st.Model.Ctx != 8192 || st.Model.KV != "q8" || st.Model.Demo {
		t.Fatalf("status %+v", st.Model)
	}
	c := s.Settings()
	if c.LastModel != long || c.ContextTokens != 8192 || c.KVType != "q8" {
		t.Fatalf("settings last_model %q context_tokens %d kv_type %q", c.LastModel, c.ContextTokens, c.KVType)
	}
	ev, _ := rec.last(EventModels)
	list, _ := ev.([]LocalModel)
	if m, ok := findModel(list, long); !ok || !m.Loaded {
		t.Fatalf("models:changed after the load: %+v", list)
	}
	// Back to the demo model: the next start makes and loads it again.
	if _, err := s.LoadModel(LoadRequest{Path: demo.Path(s.dirs.Cache)}); err != nil {
		t.Fatal(err)
	}
	if got := s.Settings().LastModel; got != "" {
		t.Fatalf("last_model %q after loading the demo model, want \"\"", got)
	}
}

// The service asks the scheduler to check the same budget: a load its own
// check let through is refused there too, and the old model comes back.
func TestSchedulerRefusesToo(t *testing.T) {
	s, _, long := loadedService(t)
	before := s.Status().Model
	p, err := s.loader.plan(LoadRequest{Path: long, Ctx: 131072, KV: "f16"})
	if err != nil {
		t.Fatal(err)
	}
	p.budget = estimate.Budget{Bytes: 1 << 20, OS: "linux"} // as if memory went elsewhere meanwhile
	err = s.loader.loadPlanned(p)
	var nf *estimate.NotFitError
	if !errors.As(err, &nf) {
		t.Fatalf("loadPlanned = %v, want the scheduler's *estimate.NotFitError", err)
	}
	st := s.Status()
	if st.State != StateReady || st.Model == nil || st.Model.Path != before.Path || st.Model.Ctx != before.Ctx {
		t.Fatalf("after the scheduler's refusal: %+v", st)
	}
}

func TestSmallerContext(t *testing.T) {
	s, _, long := loadedService(t)
	small, big := total(t, s, long, 2048, "q4"), total(t, s, long, 131072, "q4")
	for _, tc := range []struct {
		limit int64
		want  string // the offered context's verdict
	}{
		{int64(float64(small+(big-small)/4) / estimate.TightFraction), "fits"}, // one clear of "tight" exists
		{small + (big-small)/2, "tight"},                                       // only a tight one fits
	} {
		setLimit(t, s, tc.limit)
		n, err := s.SmallerContext(LoadRequest{Path: long, Ctx: 131072, KV: "q4"})
		if err != nil {
			t.Fatal(err)
		}
		if n < 2048 || n%1024 != 0 || n >= 131072 {
			t.Fatalf("limit %d: offered %d tokens", tc.limit, n)
		}
		if e, _ := s.CheckLoad(LoadRequest{Path: long, Ctx: n, KV: "q4"}); e.Verdict != tc.want {
			t.Fatalf("limit %d: the offered %d tokens are %q, want %q", tc.limit, n, e.Verdict, tc.want)
		}
	}
	// Nothing fits: nothing to offer.
	setLimit(t, s, small/4)
	if n, err := s.SmallerContext(LoadRequest{Path: long, Ctx: 131072, KV: "q4"}); err != nil || n != 0 {
		t.Fatalf("offered %d (%v) when nothing fits", n, err)
	}
}

func TestApplyContext(t *testing.T) {
	s, _, long := loadedService(t)
	if _, err := s.LoadModel(LoadRequest{Path: long, Ctx: 4096, KV: "q4"}); err != nil {
		t.Fatal(err)
	}
	setLimit(t, s, total(t, s, long, 4096, "q4")+1<<20)
	st, err := s.ApplyContext(131072, "f16")
	var nf *NotFitError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "will not fit") {
		t.Fatalf("ApplyContext(131072, f16) = %v", err)
	}
	if st.Model == nil || st.Model.Ctx != 4096 || st.Model.KV != "q4" || st.State != StateReady {
		t.Fatalf("after a refused apply: %+v", st.Model)
	}
	st, err = s.ApplyContext(2048, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if st.Model.Ctx != 2048 || st.Model.KV != "q4" || st.Model.Path != long {
		t.Fatalf("after the apply: %+v", st.Model)
	}
	if c := s.Settings(); c.ContextTokens != 2048 || c.KVType != "auto" {
		t.Fatalf("settings %d %q", c.ContextTokens, c.KVType)
	}
	if _, err := s.ApplyContext(0, "q4"); err == nil {
		t.Fatal("ApplyContext(0) succeeded")
	}
}

func TestEstimateOfTheLoadedModel(t *testing.T) {
	s, _, long := loadedService(t)
	if _, err := s.LoadModel(LoadRequest{Path: long, Ctx: 4096, KV: "q4"}); err != nil {
		t.Fatal(err)
	}
	e, err := s.Estimate(0, "")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.loader.engine().Info()
	if e.Ctx != 4096 || e.Total != info.Estimate.Total {
		t.Fatalf("Estimate(0) = ctx %d total %d; the engine's own estimate is %d", e.Ctx, e.Total, info.Estimate.Total)
	}
	if e.CtxTrain != 131072 || len(e.Limits) != 3 || e.BudgetSource != BudgetAvailable || e.Budget != 8<<30 || e.Verdict != "fits" {
		t.Fatalf("estimate %+v", e)
	}
}
