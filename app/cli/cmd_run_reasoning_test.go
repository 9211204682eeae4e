package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"nibble/internal/testmodel"
)

// A reasoning model's thinking goes to stderr (and the JSON's reasoning); stdout is the answer.
func TestRunSplitsReasoning(t *testing.T) {
	model := testmodel.Thinker(t, t.TempDir(), "thinker.gguf")
	stdout, stderr, code := runCLI(t, "run", "-m", model, "--chat", "-p", "Hi", "--temp", "0")
	if code != 0 || strings.TrimSpace(stdout) != testmodel.ThinkerAnswer || !strings.Contains(stderr, testmodel.ThinkerReasoning) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, _, code = runCLI(t, "run", "-m", model, "--chat", "-p", "Hi", "--temp", "0", "--json")
	var out runResult
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != 0 {
		t.Fatalf("exit %d, %q: %v", code, stdout, err)
	}
	if out.Text != testmodel.ThinkerAnswer || out.Reasoning != testmodel.ThinkerReasoning {
		t.Fatalf("--json: text %q, reasoning %q", out.Text, out.Reasoning)
	}
}
