package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"nibble/internal/testdata"
)

var listenLine = regexp.MustCompile(`listening on (http://\S+/v1) \(model (\S+),`)

// serve refuses a non-loopback address without a token before loading
// anything, and bad flags are usage errors.
func TestServeFlags(t *testing.T) {
	model := filepath.Join(t.TempDir(), "absent.gguf") // never opened
	t.Setenv("NIBBLE_TOKEN", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, "refusing to listen on 0.0.0.0:0 without a token"},
		{[]string{"--addr", ":11435"}, "pass --token T"},
		{[]string{"--slots", "0"}, "--slots must be positive"},
		{[]string{"--queue", "-1"}, "--queue must be positive"},
		{[]string{"--max-body", "lots"}, "--max-body"},
		{[]string{"--cors", "localhost:3000"}, "want scheme://host[:port]"},
	} {
		_, stderr, code := runCLI(t, append([]string{"serve", "-m", model}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if _, stderr, code := runCLI(t, "serve", "--addr", "127.0.0.1:0"); code != 2 || !strings.Contains(stderr, "-m MODEL is required") {
		t.Errorf("no model: exit %d, %q", code, stderr)
	}
}

// `nibble serve` in process: one line with the address, the API behind
// the token, and Ctrl-C shutting down with a reply in progress (the second
// Ctrl-C stops it at once).
func TestServeInProcess(t *testing.T) {
	td := testdata.Dir(t)
	var stdout, stderr syncBuffer
	sig := make(chan os.Signal, 1)
	code := make(chan int, 1)
	go func() {
		code <- Run(&Env{Stdout: &stdout, Stderr: &stderr, Interrupts: sig}, []string{"serve", "--addr", "127.0.0.1:0",
			"-m", filepath.Join(td, "models", "tiny-llama-spm-q4_0.gguf"), "--token", "tok-in-process", "--cors", "http://localhost:3000,http://localhost:5173", "--slots", "1"})
	}()
	waitFor(t, "the address", func() bool { return listenLine.MatchString(stdout.String()) })
	if n := strings.Count(stdout.String(), "\n"); n != 1 {
		t.Fatalf("%d lines: %q", n, stdout.String())
	}
	m := listenLine.FindStringSubmatch(stdout.String())
	base, id := m[1], m[2]
	if id != "tiny-llama-spm-q4_0" {
		t.Fatalf("model id %q", id)
	}
	get := func(path, token, origin string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if s := get("/models", "", ""); s != 401 {
		t.Fatalf("no token: %d", s)
	}
	if s := get("/models", "tok-in-process", "http://localhost:5173"); s != 200 {
		t.Fatalf("token, allowed origin: %d", s)
	}
	if s := get("/models", "tok-in-process", "http://evil.example"); s != 403 {
		t.Fatalf("other origin: %d", s)
	}

	// A long reply is in progress when Ctrl-C comes.
	req, _ := http.NewRequest("POST", base+"/completions", strings.NewReader(`{"prompt":"Once","max_tokens":3500,"ignore_eos":true,"stream":true}`))
	req.Header.Set("Authorization", "Bearer tok-in-process")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	sig <- os.Interrupt
	waitFor(t, "the shutdown notice", func() bool { return strings.Contains(stderr.String(), "shutting down") })
	select {
	case c := <-code:
		t.Fatalf("exited (%d) with a reply in progress", c)
	case <-time.After(100 * time.Millisecond):
	}
	sig <- os.Interrupt
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d: %s", c, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the second Ctrl-C did not stop the server")
	}
	rest, _ := io.ReadAll(rd)
	if strings.Contains(string(rest), "[DONE]") {
		t.Fatal("a reply stopped by the shutdown ended with [DONE]")
	}
	if _, err := http.Get(base + "/models"); err == nil {
		t.Fatal("still listening after shutdown")
	}
}

// TestServeOpenAINode builds nibble, starts `nibble serve` on a free
// loopback port and lets the official openai npm package (a client we did
// not write, pinned in app/server/testdata/openai-e2e) drive it with
// node:test: models, chat (plain and streamed), completions, a useful 400,
// and an aborted stream whose generation the server's counters show
// cancelled early.
func TestServeOpenAINode(t *testing.T) {
	node, nodeErr := exec.LookPath("node")
	npm, npmErr := exec.LookPath("npm")
	if nodeErr != nil || npmErr != nil {
		t.Skip("skipping: node and npm (Node.js 20 or later) are needed to run the openai npm package against nibble serve")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipping: the go command is needed to build nibble")
	}
	td := testdata.Dir(t)
	root := testdata.RepoRoot(t)
	dir := filepath.Join(root, "app", "server", "testdata", "openai-e2e")
	npmCI(t, npm, dir)

	bin := filepath.Join(t.TempDir(), "nibble")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	token := rand.Text()
	srv := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "-m", filepath.Join(td, "models", "tiny-qwen2-q4_0.gguf"))
	srv.Env = append(os.Environ(), "NIBBLE_TOKEN="+token)
	var stderr syncBuffer
	srv.Stderr = &stderr
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		srv.Process.Kill()
		<-exited
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		exited <- srv.Wait()
	}()
	var m []string
	select {
	case line := <-lines:
		if m = listenLine.FindStringSubmatch(line); m == nil {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("nibble serve printed no address: %s", stderr.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	test := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "openai.test.js")
	test.Dir = dir
	test.Env = append(os.Environ(), "NIBBLE_BASE_URL="+m[1], "NIBBLE_TOKEN="+token, "NIBBLE_MODEL="+m[2], "NO_COLOR=1")
	out, err := test.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("the openai npm package's tests failed: %v\nserver stderr:\n%s", err, stderr.String())
	}

	// Ctrl-C with nothing in progress: a clean, quick exit.
	srv.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		exited <- err // for the deferred wait
		if err != nil || !strings.Contains(stderr.String(), "shutting down") {
			t.Fatalf("after Ctrl-C: %v, %s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("nibble serve did not stop on Ctrl-C")
	}
}

// npmCI installs the pinned packages unless node_modules already matches
// package-lock.json (a stamp holds the lock file's hash).
func npmCI(t *testing.T, npm, dir string) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", ".nibble-lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
		return
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(stamp, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
}
