package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"nibble/engine/ggml"
)

// remoteShape is the second server's model: small, so its replies come
// quickly on a shared machine.
var remoteShape = shape{layers: 2, embd: 256, heads: 4, kvHeads: 2, ff: 768, ctx: 4096, typ: ggml.Q8_0, seed: 14}

// remoteCtx is the context the second server runs its model with, which
// its /v1/models reports and the app's form takes.
const remoteCtx = 2048

// secondServer is another Nibble, `nibble serve` on a free loopback port,
// that the app uses as its remote endpoint.
type secondServer struct {
	URL     string `json:"url"`   // the API base, http://127.0.0.1:PORT/v1
	Model   string `json:"model"` // its model's id
	Ctx     int    `json:"ctx"`
	Host    string `json:"host"`
	pid     int
	done    <-chan error
	log     *syncBuffer
	stopped bool
}

// startSecondServer runs the app's own binary with the serve subcommand
// (main.go runs the CLI for any subcommand) on a synthesized model, and
// waits until it answers.
func startSecondServer(t *testing.T, bin, dir string) *secondServer {
	t.Helper()
	model := filepath.Join(dir, "e2e-remote-q8_0.gguf")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	remoteShape.synth(t, model)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	host := "127.0.0.1:" + strconv.Itoa(port)
	s := &secondServer{URL: "http://" + host + "/v1", Model: "e2e-remote-q8_0", Ctx: remoteCtx, Host: host, log: &syncBuffer{}}
	cmd := exec.Command(bin, "serve", "-m", model, "--addr", host, "--ctx", strconv.Itoa(remoteCtx), "--threads", "2", "--slots", "1")
	cmd.Stdout, cmd.Stderr = s.log, s.log
	done, err := startProcess(cmd)
	if err != nil {
		t.Fatalf("starting %s serve: %v", bin, err)
	}
	s.pid, s.done = cmd.Process.Pid, done
	t.Cleanup(func() { s.stop() })
	answered, exited, exitErr := waitAnswer(context.Background(), s.URL+"/models", done)
	switch {
	case exited:
		s.stopped = true
		t.Fatalf("nibble serve exited before it answered (%v):\n%s", exitErr, s.log.String())
	case !answered:
		t.Fatalf("nibble serve on %s did not answer within 60s:\n%s", host, s.log.String())
	}
	return s
}

// stats are the second server's counters (its loopback-only stats endpoint).
func (s *secondServer) stats() (map[string]int64, error) {
	resp, err := http.Get(s.URL + "/nibble/stats")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/nibble/stats: %s", resp.Status)
	}
	var st map[string]int64
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// checkServed checks, after the run, that the second server
// generated the replies the remote step asked for.
func (s *secondServer) checkServed(t *testing.T) {
	t.Helper()
	st, err := s.stats()
	if err != nil {
		t.Errorf("the second server's stats: %v\n%s", err, s.log.String())
		return
	}
	if st["requests"] < 1 || st["completed"] < 1 || st["completion_tokens"] < 1 {
		t.Errorf("the second server served no completed reply: %v", st)
	}
}

func (s *secondServer) stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	stopGroup(s.pid, s.done, syscall.SIGTERM, 5*time.Second)
}
