package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"nibble/internal/testdata"
)

// A negative --top used to reach make with a negative capacity and panic after the model ran.
func TestLogitsTopFlag(t *testing.T) {
	path := filepath.Join(testdata.Dir(t), "models", "tiny-llama-spm-f16.gguf")
	_, stderr, code := runCLI(t, "logits", "-m", path, "--prompt", "Hello", "--top", "-1")
	if code != 2 || !strings.Contains(stderr, "--top") {
		t.Fatalf("--top -1: exit %d, stderr %q; want a usage error (2) naming --top", code, stderr)
	}
	out, stderr, code := runCLI(t, "logits", "-m", path, "--prompt", "Hello", "--top", "0", "--kv", "f16", "--json")
	if code != 0 {
		t.Fatalf("--top 0: exit %d: %s", code, stderr)
	}
	var lg struct{ Top [][2]float64 }
	if err := json.Unmarshal([]byte(out), &lg); err != nil || len(lg.Top) != 0 {
		t.Fatalf("--top 0: %s (err %v), want no top entries", out, err)
	}
}
