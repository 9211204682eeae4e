//go:build !darwin

package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// --backend metal where there is no Metal says so before anything is
// loaded; auto runs on the CPU.
func TestBackendMetalWithoutMac(t *testing.T) {
	model := filepath.Join(t.TempDir(), "absent.gguf")
	for _, args := range [][]string{
		{"bench", "decode", "-m", model, "--backend", "metal"},
		{"run", "-m", model, "-p", "x", "--backend", "metal"},
		{"logits", "-m", model, "--prompt", "x", "--backend", "metal"},
	} {
		_, stderr, code := runCLI(t, args...)
		if code != 1 || !strings.Contains(stderr, "--backend metal: the Metal backend needs macOS") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	// auto: the CPU, then the absent model is the error.
	_, stderr, code := runCLI(t, "run", "-m", model, "-p", "x", "--backend", "auto")
	if code == 0 || strings.Contains(stderr, "macOS") || !strings.Contains(stderr, "absent.gguf") {
		t.Errorf("auto: exit %d, stderr %q", code, stderr)
	}
}
