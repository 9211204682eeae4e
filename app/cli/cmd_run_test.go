package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nibble/internal/testdata"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// In `run --chat`, Ctrl-C stops the reply being written and returns to the
// prompt; Ctrl-C at the prompt exits.
func TestChatCtrlCStopsReplyThenExits(t *testing.T) {
	td := testdata.Dir(t)
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var stdout, stderr syncBuffer
	sig := make(chan os.Signal, 1)
	env := &Env{Stdin: stdinR, Stdout: &stdout, Stderr: &stderr, Interrupts: sig}
	code := make(chan int, 1)
	go func() {
		code <- Run(env, []string{"run", "-m", filepath.Join(td, "models", "tiny-llama-spm-q4_0.gguf"), "--chat",
			"--ctx", "4096", "-n", "3000", "--ignore-eos", "--temp", "0"})
	}()
	waitFor(t, "the first prompt", func() bool { return strings.Contains(stderr.String(), "> ") })
	io.WriteString(stdinW, "Tell me a very long story.\n")
	waitFor(t, "the reply to start", func() bool { return len(stdout.String()) > 20 })
	sig <- os.Interrupt
	waitFor(t, "the reply to stop", func() bool { return strings.Contains(stderr.String(), "[stopped]") })
	waitFor(t, "the prompt again", func() bool { return strings.Count(stderr.String(), "> ") == 2 })
	select {
	case c := <-code:
		t.Fatalf("exited (%d) after the first Ctrl-C: %s", c, stderr.String())
	default:
	}
	if !strings.Contains(stderr.String(), "generated ") || strings.Contains(stderr.String(), "generated 3000 ") {
		t.Fatalf("the stopped reply's stats: %s", stderr.String())
	}
	sig <- os.Interrupt
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d after Ctrl-C at the prompt: %s", c, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Ctrl-C at the prompt did not exit")
	}
}

// Invalid numeric flags are usage errors naming the flag; a context above
// the trained one runs with a warning.
func TestRunNumericFlags(t *testing.T) {
	td := testdata.Dir(t)
	model := filepath.Join(td, "models", "tiny-llama-spm-q4_0.gguf")
	for flag, args := range map[string][]string{
		"--ctx":     {"--ctx", "-5"},
		"-n":        {"-n", "-7"},
		"--threads": {"--threads", "-1"},
		"--batch":   {"--batch", "0"},
		"--keep":    {"--keep", "-1"},
		"--top-k":   {"--top-k", "-3"},
	} {
		_, stderr, code := runCLI(t, append([]string{"run", "-m", model, "-p", "hi"}, args...)...)
		if first, _, _ := strings.Cut(stderr, "\n"); code != 2 || !strings.Contains(first, flag+" ") {
			t.Errorf("%v: exit %d, %q: want exit 2 naming %s", args, code, first, flag)
		}
	}
	_, stderr, code := runCLI(t, "run", "-m", model, "-p", "hi", "-n", "2", "--ctx", "8192", "--temp", "0")
	if code != 0 || !strings.Contains(stderr, "above the model's trained context of 4096") {
		t.Fatalf("--ctx above trained: exit %d, %q", code, stderr)
	}
	// Sampling settings that once panicked run.
	if _, stderr, code := runCLI(t, "run", "-m", model, "-p", "x", "-n", "4", "--top-k", "0", "--min-p", "2"); code != 0 {
		t.Fatalf("--top-k 0 --min-p 2: exit %d, %q", code, stderr)
	}
}
