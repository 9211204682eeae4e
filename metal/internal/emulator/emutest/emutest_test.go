package emutest

import (
	"errors"
	"testing"
)

// recorder is a testing.TB that records how a test ended.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Skipf(string, ...any)  { r.skipped = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

func TestUnavailable(t *testing.T) {
	err := errors.New("clang-19 not found")
	t.Setenv("CI", "")
	r := &recorder{TB: t}
	Unavailable(r, err)
	if !r.skipped || r.failed {
		t.Fatalf("outside CI: skipped %v, failed %v; want a skip", r.skipped, r.failed)
	}
	t.Setenv("CI", "true")
	r = &recorder{TB: t}
	Unavailable(r, err)
	if r.skipped || !r.failed {
		t.Fatalf("in CI: skipped %v, failed %v; want a failure", r.skipped, r.failed)
	}
}
