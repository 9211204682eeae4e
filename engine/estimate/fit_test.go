package estimate

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"nibble/engine/kv"
)

// adviceFigure is how the advice names a type's largest context.
var adviceFigure = regexp.MustCompile(`(?:with --kv (q4|q8|f16) the largest context that fits is|store the KV cache as (q4|q8|f16):.*its largest context is|use a smaller context:) --ctx (\d+)(?:[^;]*? with (q4|q8|f16) KV)?`)

// figures are the largest contexts advice names, by KV type.
func figures(t *testing.T, advice []string) map[kv.Type]int {
	t.Helper()
	out := map[kv.Type]int{}
	for _, a := range advice {
		m := adviceFigure.FindStringSubmatch(a)
		if m == nil {
			continue
		}
		name := m[1] + m[2] + m[4]
		typ, err := kv.ParseType(name)
		if err != nil {
			t.Fatalf("%q: %v", a, err)
		}
		n, _ := strconv.Atoi(m[3])
		out[typ] = n
	}
	return out
}

// For every KV type, Assess's largest context fits the budget and one token
// more does not, with the options a load of that type would have; and the
// advice, whatever type is asked for, names the same figures. The trained
// model's header, at its trained context, with f16 asked for, was where the
// advice offered q4 contexts a load refused.
func TestAssessLimitsAreWhatLoadsAccept(t *testing.T) {
	trained, err := FromFile(filepath.Join(testdataDir(t), "trained", "nibble-docqa-29m-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	small := llama8B()
	small.WeightsBytes = 400 << 20
	small.HParams.Layers, small.HParams.CtxTrain = 4, 32768
	for _, d := range []Desc{trained, small} {
		base, err := Compute(d, Options{Ctx: 256, KV: kv.Q4})
		if err != nil {
			t.Fatal(err)
		}
		for _, budget := range []int64{base.Total + 3<<20, base.Total + 9<<20 + 12345, base.Total + 42<<20 + 777} {
			for _, asked := range kv.Types {
				o := Options{Ctx: d.HParams.CtxTrain, KV: asked, Threads: 2}
				f, err := Assess(d, o, Simulated(budget), d.HParams.CtxTrain)
				if err != nil {
					t.Fatal(err)
				}
				if len(f.Limits) != 3 {
					t.Fatalf("limits %+v", f.Limits)
				}
				for _, l := range f.Limits {
					ol := o
					ol.KV = l.KV
					fits := func(ctx int) bool {
						ol.Ctx = ctx
						e, err := Compute(d, ol)
						return err == nil && e.Total <= budget
					}
					if l.MaxCtx > 0 && !fits(l.MaxCtx) || l.MaxCtx < d.HParams.CtxTrain && fits(l.MaxCtx+1) {
						t.Errorf("%s, budget %d: %s's limit %d is not the largest that fits", d.Name, budget, l.KV, l.MaxCtx)
					}
					if l.KV == asked && l.MaxCtx != f.Estimate.MaxCtx {
						t.Errorf("%s: the estimate's largest context %d, its type's limit %d", d.Name, f.Estimate.MaxCtx, l.MaxCtx)
					}
				}
				for typ, n := range figures(t, f.Advice) {
					if l, _ := f.Limit(typ); l.MaxCtx != n {
						t.Errorf("%s, budget %d, %s asked: the advice offers %d tokens with %s, the limit is %d\n%q", d.Name, budget, asked, n, typ, l.MaxCtx, f.Advice)
					}
				}
			}
		}
	}
}

func TestAdviceFigures(t *testing.T) {
	got := figures(t, []string{
		"use a smaller context: --ctx 2622 is the largest that fits with f16 KV (total 99.9 MiB of 100 MiB)",
		"with --kv q8 the largest context that fits is --ctx 2736",
		"store the KV cache as q4: --kv q4 needs 4 MiB of KV at --ctx 8192 (total 90 MiB: tight); its largest context is --ctx 4925",
	})
	if fmt.Sprint(got) != fmt.Sprint(map[kv.Type]int{kv.F16: 2622, kv.Q8: 2736, kv.Q4: 4925}) {
		t.Fatalf("read %v", got)
	}
}
