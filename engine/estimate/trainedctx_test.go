package estimate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"nibble/engine/kv"
)

var ctxFlagRE = regexp.MustCompile(`--ctx (\d+)`)

// proposedAboveTrained checks every context the advice proposes (any --ctx other than the
// requested one): above the trained context it must say so. It returns how many it saw above.
func proposedAboveTrained(t *testing.T, advice []string, requested, trained int) int {
	t.Helper()
	above := 0
	note := fmt.Sprintf(" (above the trained context of %d; needs RoPE scaling)", trained)
	for _, a := range advice {
		for _, m := range ctxFlagRE.FindAllStringSubmatchIndex(a, -1) {
			n, _ := strconv.Atoi(a[m[2]:m[3]])
			if n == requested || trained <= 0 || n <= trained {
				continue
			}
			above++
			if !strings.HasPrefix(a[m[1]:], note) {
				t.Errorf("--ctx %d proposed above the trained context %d without saying so: %q", n, trained, a)
			}
		}
	}
	return above
}

// The largest context that fits in memory can exceed what the model was trained on; the advice
// must not propose such a context as if it were an ordinary setting.
func TestAdviceAboveTrainedContext(t *testing.T) {
	d := llama8B()
	d.HParams.CtxTrain = 8192 // Llama 3 8B
	seen := 0
	for _, ctx := range []int{4096, 8192, 32768} {
		for _, t0 := range kv.Types {
			for gb := 5.4; gb < 12; gb += 0.2 {
				o := Options{Ctx: ctx, KV: t0, Threads: 4}
				b := Simulated(int64(gb * 1e9))
				r, err := NewReport(d, o, b)
				if err != nil {
					t.Fatal(err)
				}
				seen += proposedAboveTrained(t, r.Advice, ctx, d.HParams.CtxTrain)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no advice proposed a context above the trained one: the test no longer covers the case")
	}

	// Unknown trained context: nothing to compare with, no note.
	d.HParams.CtxTrain = 0
	r, err := NewReport(d, Options{Ctx: 8192, KV: kv.F16, Threads: 4}, Simulated(6_500_000_000))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Advice {
		if strings.Contains(a, "trained context") {
			t.Errorf("trained context unknown, yet: %q", a)
		}
	}
}
