package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"nibble/app/history"
)

// AppEnv names the app binary the test drives: built with -tags
// dev,webkit2_41 and cgo (make app-e2e builds it and sets this).
const AppEnv = "NIBBLE_E2E_APP"

// The whole run must end well inside make test's budget.
const (
	scriptTimeout = 4 * time.Minute
	settleTimeout = 20 * time.Second // a clean quit
)

// TestAppE2E drives the real app from headless Chromium: e2e.mjs holds the
// steps (each saves a screenshot); this test makes the fixtures, serves
// the catalog, runs the app under Xvfb, restarts it when the script asks
// (a quit mid-reply), and checks afterwards what must be on disk.
func TestAppE2E(t *testing.T) {
	appBin := os.Getenv(AppEnv)
	if appBin == "" {
		t.Skipf("skipping: set %s to the app built with -tags dev,webkit2_41 (make app-e2e builds it and runs this test)", AppEnv)
	}
	root := repoRoot(t)
	// A relative path is from the repository's root, where make runs.
	if !filepath.IsAbs(appBin) {
		appBin = filepath.Join(root, appBin)
	}
	if st, err := os.Stat(appBin); err != nil || st.IsDir() {
		t.Fatalf("$%s=%s: not an app binary (make app-dev builds one): %v", AppEnv, appBin, err)
	}
	dir := filepath.Join(root, "app", "desktop", "e2e")
	chromium := envOr("NIBBLE_E2E_CHROMIUM", "/usr/bin/chromium")
	node := lookPath(t, "node")
	npm := lookPath(t, "npm")
	xvfbBin := lookPath(t, "Xvfb")
	lookPath(t, "xwininfo") // the window's state on the display (x11-utils)
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("Chromium is needed (apt-get install chromium, or set NIBBLE_E2E_CHROMIUM): %v", err)
	}
	assets := envOr("NIBBLE_E2E_ASSETS", filepath.Join(root, "frontend", "dist"))
	if _, err := os.Stat(filepath.Join(assets, "index.html")); err != nil {
		t.Fatalf("the built frontend is needed (make frontend): %v", err)
	}
	shots := envOr("NIBBLE_E2E_SHOTS", filepath.Join(root, "bin", "e2e"))
	if err := os.RemoveAll(shots); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	npmCI(t, npm, dir)

	work := t.TempDir()
	home := filepath.Join(work, "home")
	fx := makeFixtures(t, home, filepath.Join(work, "fixtures"))

	files := &fileServer{files: fx.served, bytesPerSec: 3 << 20}
	// The first whole-file request of the good download is cut at 35%:
	// the app must reconnect and continue from where it was.
	files.armDrop(fx.Tiny.URLPath, 0.35)
	h := &appHarness{bin: appBin, assets: assets, env: []string{
		"NIBBLE_HOME=" + home,
		"NIBBLE_CATALOG_FILE=" + filepath.Join(work, "fixtures", "catalog.json"),
		"NIBBLE_TEST_DIALOGS=cancel",
		"NIBBLE_TEST_SAVE_DIR=" + fx.SaveDir,
	}}

	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout+time.Minute)
	defer cancel()
	mux := http.NewServeMux()
	mux.Handle("/files/", files)
	mux.HandleFunc("GET /ctl/requests", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, files.requests()) })
	mux.HandleFunc("GET /ctl/output", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, h.output())
	})
	// The script's "close the window mid-reply": SIGTERM (Wails quits and
	// the app shuts down as from its menu), then the app again on the same
	// NIBBLE_HOME.
	mux.HandleFunc("POST /ctl/restart", func(w http.ResponseWriter, r *http.Request) {
		old := h.stop(syscall.SIGTERM, settleTimeout)
		next, err := h.start(ctx)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		exit := "0"
		if old.exitErr != nil {
			exit = old.exitErr.Error()
		}
		writeJSON(w, map[string]any{"url": next.url, "graceful": old.graceful, "exit": exit})
	})
	// The script's "is the window still on screen": what the X server
	// says of the app's window (a hidden one is unmapped).
	var display string
	mux.HandleFunc("GET /ctl/window", func(w http.ResponseWriter, r *http.Request) {
		st, err := appWindow(display, "Nibble")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, st)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	fx.writeCatalog(t, filepath.Join(work, "fixtures"), srv.URL)

	x := startXvfb(t, xvfbBin)
	display = x.display
	h.env = append(h.env, "DISPLAY="+x.display)
	// Registered after Xvfb's, so it runs first: the app goes before its
	// display does, whatever happened.
	t.Cleanup(func() { h.stop(syscall.SIGKILL, 5*time.Second) })
	first, err := h.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A second Nibble on loopback: the remote endpoint of the remote step.
	second := startSecondServer(t, appBin, filepath.Join(work, "remote"))

	cfg := filepath.Join(work, "e2e-config.json")
	cfgData, err := json.Marshal(map[string]any{
		"url": first.url, "ctl": srv.URL, "shots": shots, "chromium": chromium, "fixtures": fx,
		"timeoutMs": scriptTimeout.Milliseconds(), "remote": second,
	})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfg, cfgData)

	sctx, scancel := context.WithTimeout(ctx, scriptTimeout+15*time.Second)
	defer scancel()
	script := exec.CommandContext(sctx, node, "e2e.mjs", cfg)
	script.Dir = dir
	script.Env = append(os.Environ(), "NO_COLOR=1")
	script.WaitDelay = 5 * time.Second
	out, err := script.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	script.Stderr = script.Stdout
	if err := script.Start(); err != nil {
		t.Fatal(err)
	}
	var shotPaths []string
	shotLine := regexp.MustCompile(`^screenshot: (\S+\.png)`)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		t.Log(line)
		if m := shotLine.FindStringSubmatch(line); m != nil {
			shotPaths = append(shotPaths, m[1])
		}
	}
	scriptErr := script.Wait()

	// The last run quits cleanly: Shutdown runs and the history is closed.
	last := h.stop(syscall.SIGTERM, settleTimeout)
	if scriptErr != nil {
		t.Errorf("e2e.mjs: %v (the steps above say which failed)", scriptErr)
	}
	if last != nil && !last.graceful {
		t.Errorf("the app did not quit within %v of SIGTERM", settleTimeout)
	}

	checkOnDisk(t, fx, files.requests())
	second.checkServed(t)
	for _, p := range shotPaths {
		if why, err := Blank(p); err != nil || why != "" {
			t.Errorf("screenshot %s: blank (%s) or unreadable (%v)", p, why, err)
		}
	}
	if t.Failed() {
		t.Logf("the app's output:\n%s", tail(h.output(), 200))
	}
	t.Logf("%d screenshots in %s:\n  %s", len(shotPaths), shots, strings.Join(shotPaths, "\n  "))
}

// checkOnDisk checks what the steps must have left behind: the good
// download whole and verified, nothing of the corrupt one, the history
// readable with the conversations the script made, and the download
// resumed with Range requests rather than started over.
func checkOnDisk(t *testing.T, fx *fixtures, reqs []served) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(fx.ModelsDir, fx.Tiny.FileName))
	if err != nil {
		t.Errorf("the downloaded model is not in the models folder: %v", err)
	} else if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != fx.Tiny.SHA256 {
		t.Errorf("the downloaded model's sha256 is %x, want %s", sum, fx.Tiny.SHA256)
	}
	entries, err := os.ReadDir(fx.ModelsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), strings.TrimSuffix(fx.Corrupt.FileName, ".gguf")) {
			t.Errorf("the corrupt download left %s in the models folder", e.Name())
		}
	}
	var resumed bool
	for _, r := range reqs {
		if r.Path == fx.Tiny.URLPath && r.Method == http.MethodGet && r.Status == http.StatusPartialContent && r.Start > 0 {
			resumed = true
		}
	}
	if !resumed {
		t.Errorf("the download never resumed with a Range request; requests:\n%s", dumpRequests(reqs))
	}

	st, err := history.Open(filepath.Join(fx.Home, "data", "history.db"))
	if err != nil {
		t.Errorf("the history after the run: %v", err)
		return
	}
	defer st.Close()
	list, err := st.List(100, 0)
	if err != nil {
		t.Errorf("listing the history after the run: %v", err)
		return
	}
	if len(list) < 2 {
		t.Errorf("the history holds %d conversations after the run, want at least 2", len(list))
	}
	thought := false
	for _, s := range list {
		c, err := st.Get(s.ID)
		if err != nil {
			t.Errorf("conversation %d (%q): %v", s.ID, s.Title, err)
			continue
		}
		for _, m := range c.Messages {
			if m.Reasoning == fx.ThinkerReasoning && m.Content == fx.ThinkerAnswer && m.Stats != nil && m.Stats.Thinking > 0 {
				thought = true
			}
		}
		if len(c.Messages) == 0 || c.Messages[0].Role != history.RoleUser {
			t.Errorf("conversation %d (%q) does not start with the user's message: %+v", s.ID, s.Title, c.Messages)
		}
	}
	if !thought {
		t.Errorf("no reply in the history keeps the reasoning model's thinking apart from its answer")
	}
}

func dumpRequests(reqs []served) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "  %s %s range=%q status=%d start=%d sent=%d dropped=%v\n", r.Method, r.Path, r.Range, r.Status, r.Start, r.Sent, r.Dropped)
	}
	return b.String()
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is needed for the end-to-end test (make e2e-deps installs it): %v", name, err)
	}
	return p
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
