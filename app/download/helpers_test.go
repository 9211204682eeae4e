package download

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"nibble/catalog/vocab"
	"nibble/engine/ggml"
	"nibble/engine/synth"
)

var (
	modelMu    sync.Mutex
	modelCache = map[uint64][]byte{}
)

// testModel is a tiny synthetic llama GGUF (about 4 MiB, mostly the token
// embedding); seeds give files of equal size and different bytes.
func testModel(t *testing.T, seed uint64) []byte {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	if b, ok := modelCache[seed]; ok {
		return b
	}
	o := synth.DefaultOptions("llama")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 1, 64, 2, 1, 128
	o.VocabData, o.Type, o.Seed = vocab.LlamaSPM, ggml.F16, seed
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.Generate(p, o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	modelCache[seed] = b
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// step misbehaves in one response.
type step struct {
	cutAfter      int64 // drop the connection after this many body bytes
	hangAfter     int64 // stop sending after this many body bytes until the client leaves
	ignoreRange   bool
	ignoreIfRange bool
}

type seenReq struct {
	rng, ifRange string
	status       int
	sent         int64 // body bytes written
}

// testServer serves one file with http.ServeContent (Range, If-Range, 416),
// misbehaving as its steps say, one step per request, and records what it
// was asked and what it sent.
type testServer struct {
	*httptest.Server
	mu      sync.Mutex
	data    []byte
	etag    string
	modTime time.Time
	steps   []step
	delay   time.Duration // pause per 64 KiB sent, to stretch a download
	reqs    []seenReq
}

func newServer(t *testing.T, data []byte, steps ...step) *testServer {
	s := &testServer{data: data, etag: `"v1"`, steps: steps}
	s.Server = httptest.NewServer(s)
	t.Cleanup(s.Close)
	return s
}

func (s *testServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var st step
	if len(s.steps) > 0 {
		st, s.steps = s.steps[0], s.steps[1:]
	}
	data, etag, mod, delay := s.data, s.etag, s.modTime, s.delay
	i := len(s.reqs)
	s.reqs = append(s.reqs, seenReq{rng: r.Header.Get("Range"), ifRange: r.Header.Get("If-Range")})
	s.mu.Unlock()
	if st.ignoreRange {
		r.Header.Del("Range")
	}
	if st.ignoreIfRange {
		r.Header.Del("If-Range")
	}
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	cw := &cutWriter{ResponseWriter: w, step: st, ctx: r.Context(), delay: delay}
	defer func() { // also on the abort panic
		s.mu.Lock()
		s.reqs[i].status, s.reqs[i].sent = cw.status, cw.sent
		s.mu.Unlock()
	}()
	http.ServeContent(cw, r, "", mod, bytes.NewReader(data))
}

func (s *testServer) seen() []seenReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenReq(nil), s.reqs...)
}

func (s *testServer) set(f func(s *testServer)) {
	s.mu.Lock()
	f(s)
	s.mu.Unlock()
}

type cutWriter struct {
	http.ResponseWriter
	step
	ctx    context.Context
	delay  time.Duration
	status int
	sent   int64
}

func (c *cutWriter) WriteHeader(code int) {
	c.status = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *cutWriter) flush() { c.ResponseWriter.(http.Flusher).Flush() }

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n := 0
	for len(p) > 0 {
		k := int64(min(len(p), 64<<10))
		cut := c.cutAfter > 0 && c.sent+k >= c.cutAfter
		hang := c.hangAfter > 0 && c.sent+k >= c.hangAfter
		if cut {
			k = c.cutAfter - c.sent
		} else if hang {
			k = c.hangAfter - c.sent
		}
		m, err := c.ResponseWriter.Write(p[:k])
		c.sent += int64(m)
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
		switch {
		case cut:
			c.flush()
			panic(http.ErrAbortHandler) // the server closes the connection
		case hang:
			c.flush()
			<-c.ctx.Done()
			return n, c.ctx.Err()
		case c.delay > 0:
			c.flush()
			time.Sleep(c.delay)
		}
	}
	return n, nil
}

// testManager never reconnects on its own unless the test asks, so each
// failure is seen.
func testManager(srv *testServer, opt Options) *Manager {
	if opt.Client == nil && srv != nil {
		opt.Client = srv.Client()
	}
	if opt.Retries == 0 {
		opt.Retries = -1
	}
	if opt.RetryDelay == 0 {
		opt.RetryDelay = 10 * time.Millisecond
	}
	return NewManager(opt)
}

func wait(t *testing.T, j *Job) (Result, error) {
	t.Helper()
	select {
	case <-j.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not finish; progress %+v", j.Name(), j.Progress())
	}
	return j.Wait()
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// dirNames lists destDir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func checkFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes differ from the %d served", path, len(got), len(want))
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
