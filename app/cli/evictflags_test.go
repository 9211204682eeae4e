package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/internal/testdata"
)

// run --evict: a bad policy or budget is a usage error; a prompt longer
// than the budget runs, its cache bounded.
func TestRunEvict(t *testing.T) {
	model := tinyQ4Model(t)
	for _, bad := range []string{"lru:10", "h2o:0", "window:100%", "h2o"} {
		if _, stderr, code := runCLI(t, "run", "-m", model, "-p", "hi", "--evict", bad); code != 2 || !strings.Contains(stderr, "--evict") {
			t.Errorf("--evict %s: exit %d, %q; want a usage error naming --evict", bad, code, stderr)
		}
	}
	text, err := os.ReadFile(filepath.Join(testdata.Dir(t), "long_prompt.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, evict := range []string{"h2o:64", "window:25%"} {
		stdout, stderr, code := runCLI(t, "run", "-m", model, "-p", string(text), "-n", "4", "--temp", "0", "--ctx", "2048", "--evict", evict, "--json")
		if code != 0 {
			t.Fatalf("--evict %s: exit %d, %q", evict, code, stderr)
		}
		var out struct {
			PromptTokens int `json:"prompt_tokens"`
			GenTokens    int `json:"gen_tokens"`
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("--evict %s: %v in %q", evict, err, stdout)
		}
		if out.PromptTokens <= 512 || out.GenTokens != 4 {
			t.Errorf("--evict %s: %+v; want a prompt above the budget and 4 tokens", evict, out)
		}
	}
}
