package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProcess starts cmd in a process group of its own, so that stopping
// it also stops what it started (WebKit's web and network processes).
func startProcess(cmd *exec.Cmd) (done <-chan error, err error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	return ch, nil
}

// stopGroup sends sig to the process group of pid, then SIGKILL when it
// has not ended within grace. It returns the process's exit error and
// whether it ended by itself within grace.
func stopGroup(pid int, done <-chan error, sig syscall.Signal, grace time.Duration) (error, bool) {
	_ = syscall.Kill(pid, sig)
	select {
	case err := <-done:
		_ = syscall.Kill(-pid, syscall.SIGKILL) // whatever it left behind
		return err, true
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	return <-done, false
}

// xvfb is a virtual X display for the app's window.
type xvfb struct {
	display string
	pid     int
	done    <-chan error
	log     *syncBuffer
}

func startXvfb(t *testing.T, bin string) *xvfb {
	t.Helper()
	// A free display number: Xvfb takes /tmp/.X<n>-lock.
	n := 99
	for ; n < 400; n++ {
		_, e1 := os.Stat(fmt.Sprintf("/tmp/.X%d-lock", n))
		_, e2 := os.Stat(fmt.Sprintf("/tmp/.X11-unix/X%d", n))
		if errors.Is(e1, os.ErrNotExist) && errors.Is(e2, os.ErrNotExist) {
			break
		}
	}
	x := &xvfb{display: fmt.Sprintf(":%d", n), log: &syncBuffer{}}
	cmd := exec.Command(bin, x.display, "-screen", "0", "1024x768x24", "-nolisten", "tcp")
	cmd.Stdout, cmd.Stderr = x.log, x.log
	done, err := startProcess(cmd)
	if err != nil {
		t.Fatalf("starting Xvfb: %v", err)
	}
	x.pid, x.done = cmd.Process.Pid, done
	t.Cleanup(func() { stopGroup(x.pid, x.done, syscall.SIGTERM, 5*time.Second) })
	socket := fmt.Sprintf("/tmp/.X11-unix/X%d", n)
	for deadline := time.Now().Add(15 * time.Second); ; {
		if _, err := os.Stat(socket); err == nil {
			return x
		}
		select {
		case err := <-done:
			t.Fatalf("Xvfb %s exited: %v\n%s", x.display, err, x.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Xvfb %s did not start within 15s:\n%s", x.display, x.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// appRun is one run of the app under test.
type appRun struct {
	url  string // the dev server: the frontend and its websocket bridge
	pid  int
	done <-chan error
	out  *syncBuffer // stdout and stderr

	exitErr  error
	exited   bool
	graceful bool // ended by itself after the signal
}

// appHarness starts, stops and restarts the app on one NIBBLE_HOME.
type appHarness struct {
	bin, assets string
	env         []string

	mu   sync.Mutex
	runs []*appRun
}

func (h *appHarness) current() *appRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.runs) == 0 {
		return nil
	}
	return h.runs[len(h.runs)-1]
}

// output is what every run printed, oldest first, each under a heading.
func (h *appHarness) output() string {
	h.mu.Lock()
	runs := append([]*appRun(nil), h.runs...)
	h.mu.Unlock()
	var b bytes.Buffer
	for i, r := range runs {
		fmt.Fprintf(&b, "==== app run %d (%s)\n%s", i+1, r.url, r.out.String())
	}
	return b.String()
}

// start starts a run and waits until its dev server answers.
func (h *appHarness) start(ctx context.Context) (*appRun, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	r := &appRun{url: "http://" + addr, out: &syncBuffer{}}
	cmd := exec.Command(h.bin)
	cmd.Env = append(append(os.Environ(), h.env...), "devserver="+addr, "assetdir="+h.assets, "loglevel=Warning")
	cmd.Stdout, cmd.Stderr = r.out, r.out
	done, err := startProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", h.bin, err)
	}
	r.pid, r.done = cmd.Process.Pid, done
	h.mu.Lock()
	h.runs = append(h.runs, r)
	h.mu.Unlock()

	answered, exited, exitErr := waitAnswer(ctx, r.url+"/", done)
	switch {
	case exited:
		r.exited, r.exitErr = true, exitErr
		return nil, fmt.Errorf("the app exited before its dev server answered (%v):\n%s", exitErr, r.out.String())
	case !answered:
		return nil, fmt.Errorf("the app's dev server %s did not answer within 60s:\n%s", r.url, r.out.String())
	}
	return r, nil
}

// waitAnswer polls url until it answers 200 (answered), the process
// whose end done reports exits first (exited, with its error), or 60
// seconds pass (neither).
func waitAnswer(ctx context.Context, url string, done <-chan error) (answered, exited bool, exitErr error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true, false, nil
			}
		}
		select {
		case err := <-done:
			return false, true, err
		case <-ctx.Done():
			return false, false, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop ends the current run with sig (Wails quits cleanly on SIGTERM),
// killing it when it has not ended within grace.
func (h *appHarness) stop(sig syscall.Signal, grace time.Duration) *appRun {
	r := h.current()
	if r == nil || r.exited {
		return r
	}
	r.exitErr, r.graceful = stopGroup(r.pid, r.done, sig, grace)
	r.exited = true
	return r
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// repoRoot is the directory holding go.mod, above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}
