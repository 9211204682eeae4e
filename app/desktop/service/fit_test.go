package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"nibble/engine/estimate"
	"nibble/internal/testdata"
)

// The context panel's figures are one computation, and each is one that
// ApplyContext accepts: for every KV type the largest context the limits
// row offers applies, one token more is refused, and every largest context
// the advice names is the limits row's figure for that type. Over the
// trained model, synthesized llamas and a model with sliding-window layers,
// at several memory limits and with each KV type in force.
func TestOfferedMaximumApplies(t *testing.T) {
	td := testdata.Dir(t)
	s, _, long := loadedService(t)
	short := filepath.Join(s.dirs.Models, "short.gguf")
	tinyModel(t, short, 8192)
	models := []string{filepath.Join(td, "trained", "nibble-docqa-29m-f16.gguf"), long, short}
	if gemma := filepath.Join(td, "families", "tiny-gemma2-f16.gguf"); fileExists(gemma) {
		models = append(models, gemma)
	}
	for _, path := range models {
		t.Run(filepath.Base(path), func(t *testing.T) {
			if _, err := os.Stat(path); err != nil {
				t.Skipf("skipping: %v", err)
			}
			setLimit(t, s, 0)
			if _, err := s.LoadModel(LoadRequest{Path: path, Ctx: 2048, KV: "f16"}); err != nil {
				t.Fatal(err)
			}
			trained := s.Status().Model.CtxTrain
			// Limits where every type's largest context is below the
			// trained one, and where only the compact types reach it.
			for _, limit := range []int64{
				total(t, s, path, trained/8, "f16") + 12345,
				total(t, s, path, trained/3, "f16") + 777,
				total(t, s, path, trained*3/4, "q4") + 4321,
			} {
				setLimit(t, s, limit)
				for _, inForce := range []string{"f16", "q8", "q4"} {
					checkOffers(t, s, limit, inForce, trained)
				}
			}
		})
	}
}

// checkOffers applies each KV type's offered maximum with inForce the
// cache in force, and checks the panel's estimate at the trained context.
func checkOffers(t *testing.T, s *Service, limit int64, inForce string, trained int) {
	t.Helper()
	setLimit(t, s, 0)
	if _, err := s.ApplyContext(1024, inForce); err != nil {
		t.Fatalf("putting %s in force: %v", inForce, err)
	}
	setLimit(t, s, limit)
	e, err := s.Estimate(trained, inForce)
	if err != nil {
		t.Fatal(err)
	}
	offered := map[string]int{}
	for _, l := range e.Limits {
		offered[l.KV] = l.MaxCtx
	}
	if len(offered) != 3 || offered[inForce] != e.MaxCtx {
		t.Fatalf("limit %d, %s in force: limits %+v, max %d", limit, inForce, e.Limits, e.MaxCtx)
	}
	for kvName, n := range adviceMaxima(t, e.Advice) {
		if n != offered[kvName] {
			t.Errorf("limit %d, %s in force: the advice offers %d tokens with %s, the limits row %d\nadvice: %q",
				limit, inForce, n, kvName, offered[kvName], e.Advice)
		}
	}
	for _, l := range e.Limits {
		if l.MaxCtx == 0 {
			continue
		}
		st, err := s.ApplyContext(l.MaxCtx, l.KV)
		if err != nil {
			t.Errorf("limit %d, %s in force: the offered %d tokens with %s are refused: %v", limit, inForce, l.MaxCtx, l.KV, err)
			continue
		}
		// The engine's own estimate of what it now runs is the panel's.
		info, _ := s.loader.engine().Info()
		if at, err := s.Estimate(l.MaxCtx, l.KV); err != nil || at.Total != info.Estimate.Total || at.Verdict == estimate.WillNotFit.String() {
			t.Errorf("limit %d: %d tokens with %s in force take %d by the engine, %d (%s) by the panel (%v)",
				limit, l.MaxCtx, l.KV, info.Estimate.Total, at.Total, at.Verdict, err)
		}
		if st.Model.Ctx != l.MaxCtx || st.Model.KV != l.KV {
			t.Errorf("after applying %d tokens with %s: %+v", l.MaxCtx, l.KV, st.Model)
		}
		if l.MaxCtx >= trained {
			continue // the trained context, not memory, ends the offer
		}
		_, err = s.ApplyContext(l.MaxCtx+1, l.KV)
		var nf *NotFitError
		if !errors.As(err, &nf) {
			t.Errorf("limit %d: %d tokens with %s, one more than offered, gave %v; want refused", limit, l.MaxCtx+1, l.KV, err)
		}
	}
}

// maxFigure finds the largest context an advice line offers for a KV type,
// in each way the advice says it.
var maxFigure = []*regexp.Regexp{
	regexp.MustCompile(`([\d,]+) tokens(?: \([^)]*\))? is the largest that fits with (q4|q8|f16) KV`),
	regexp.MustCompile(`(?i)with (q4|q8|f16) KV the largest context that fits is ([\d,]+) tokens`),
	regexp.MustCompile(`(?i)store the KV cache as (q4|q8|f16):.* its largest context is ([\d,]+) tokens`),
}

// adviceMaxima are the largest contexts the advice names, by KV type.
func adviceMaxima(t *testing.T, advice []string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, a := range advice {
		for i, re := range maxFigure {
			m := re.FindStringSubmatch(a)
			if m == nil {
				continue
			}
			num, kvName := m[1], m[2]
			if i > 0 {
				num, kvName = m[2], m[1]
			}
			n, err := strconv.Atoi(strings.ReplaceAll(num, ",", ""))
			if err != nil {
				t.Fatal(err)
			}
			if prev, ok := out[kvName]; ok && prev != n {
				t.Errorf("the advice names two largest contexts for %s: %d and %d", kvName, prev, n)
			}
			out[kvName] = n
		}
	}
	return out
}

func TestAdviceMaximaReadsEveryWording(t *testing.T) {
	if got := appAdvice([]string{"use a smaller context: --ctx 1234567 is the largest", "--ctx 512 with --kv q8"}); got[0] != "Use a smaller context: 1,234,567 tokens is the largest" || got[1] != "512 tokens with q8 KV" {
		t.Fatalf("app advice %q", got)
	}
	got := adviceMaxima(t, []string{
		"Use a smaller context: 2,622 tokens is the largest that fits with f16 KV (total 99.9 MiB of 100 MiB)",
		"With q8 KV the largest context that fits is 2736 tokens",
		"Store the KV cache as q4: q4 KV needs 4 MiB of KV at 8192 tokens (total 90 MiB: tight); its largest context is 4,925 tokens",
	})
	if fmt.Sprint(got) != "map[f16:2622 q4:4925 q8:2736]" {
		t.Fatalf("read %v", got)
	}
}
