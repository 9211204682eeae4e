package service

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nibble/app/download"
	"nibble/catalog"
)

// modelServer serves files with Range support, as Hugging Face does, and
// can drop the first connection mid-body or send slowly.
type modelServer struct {
	*httptest.Server
	mu        sync.Mutex
	files     map[string][]byte
	ranges    []string // the Range header of every GET ("" for none)
	sent      int64    // body bytes written
	dropAfter int64    // > 0: the next GET sends this much, then the connection drops
	slow      bool     // pace the body, so a download can be cancelled midway
}

func newModelServer(t *testing.T) *modelServer {
	m := &modelServer{files: map[string][]byte{}}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *modelServer) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	data, ok := m.files[r.URL.Path]
	if r.Method == http.MethodGet {
		m.ranges = append(m.ranges, r.Header.Get("Range"))
	}
	drop := m.dropAfter
	m.dropAfter = 0
	slow := m.slow
	m.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if drop > 0 && r.Header.Get("Range") == "" {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Header().Set("Last-Modified", time.Unix(1e9, 0).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:drop])
		m.count(drop)
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	http.ServeContent(&countingWriter{ResponseWriter: w, m: m, slow: slow}, r, "model.gguf", time.Unix(1e9, 0), bytes.NewReader(data))
}

func (m *modelServer) count(n int64) {
	m.mu.Lock()
	m.sent += n
	m.mu.Unlock()
}

func (m *modelServer) snapshot() (ranges []string, sent int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.ranges...), m.sent
}

type countingWriter struct {
	http.ResponseWriter
	m    *modelServer
	slow bool
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), 16<<10)
		if c.slow {
			time.Sleep(15 * time.Millisecond)
		}
		w, err := c.ResponseWriter.Write(p[:k])
		n += w
		c.m.count(int64(w))
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

type catalogFixture struct {
	srv        *modelServer
	data       []byte
	tiny, bad  string // catalog ids
	sizingOnly string
	fileName   string
}

// withCatalog serves a synthesized GGUF and points NIBBLE_CATALOG_FILE at
// a catalog offering it (exact size and SHA-256), a damaged copy whose
// listed digest is the good file's, and an entry with no download.
func withCatalog(t *testing.T, s *Service) *catalogFixture {
	t.Helper()
	srv := newModelServer(t)
	data := tinyModel(t, filepath.Join(t.TempDir(), "tiny.gguf"), 4096)
	bad := bytes.Clone(data)
	bad[len(bad)*3/4] ^= 0x55
	srv.files["/files/tiny-q8_0.gguf"] = data
	srv.files["/files/damaged-q8_0.gguf"] = bad
	sum := sha256.Sum256(data)
	entry := func(id, file, url string) map[string]any {
		f := map[string]any{"quant": "Q8_0", "size_bytes": len(data), "size_approx": false}
		if url != "" {
			f["url"], f["file"], f["sha256"] = url, file, hex.EncodeToString(sum[:])
		}
		return map[string]any{"id": id, "name": strings.ToUpper(id[:1]) + id[1:], "family": "llama", "arch": "llama",
			"params_b": 0.002, "layers": 2, "embd": 64, "heads": 2, "kv_heads": 1, "head_dim": 32, "ff": 128,
			"vocab": 32000, "ctx_train": 4096, "attn_scale": 0.17677669529, "rope_base": 500000, "rms_eps": 1e-5,
			"tied_output": true, "files": []any{f}}
	}
	doc, err := json.Marshal(map[string]any{"version": 1, "models": []any{
		entry("tiny", "tiny-q8_0.gguf", srv.URL+"/files/tiny-q8_0.gguf"),
		entry("damaged", "damaged-q8_0.gguf", srv.URL+"/files/damaged-q8_0.gguf"),
		entry("sizing", "", ""),
	}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	writeFile(t, path, doc)
	t.Setenv(catalog.CatalogFileEnv, path)
	// Reconnect at once after a dropped connection.
	s.catalog.dl = download.NewManager(download.Options{Client: s.catalog.client, ProgressInterval: progressInterval, RetryDelay: 10 * time.Millisecond})
	return &catalogFixture{srv: srv, data: data, tiny: "tiny", bad: "damaged", sizingOnly: "sizing", fileName: "tiny-q8_0.gguf"}
}

func catalogEntryFile(t *testing.T, s *Service, id string) CatalogFile {
	t.Helper()
	cat, err := s.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range cat {
		if e.ID == id {
			return e.Files[0]
		}
	}
	t.Fatalf("no catalog entry %s", id)
	return CatalogFile{}
}

// finalDownload waits for the download of key to end and returns its
// last state.
func finalDownload(t *testing.T, rec *recorder, key string) Download {
	t.Helper()
	var d Download
	waitFor(t, "the download of "+key+" to end", func() bool {
		for _, ev := range rec.all(EventDownload) {
			if x := ev.(Download); x.Key == key && (x.State == "done" || x.State == "failed" || x.State == "cancelled") {
				d = x
				return true
			}
		}
		return false
	})
	return d
}

func TestCatalogAndHeaderEstimate(t *testing.T) {
	s, _ := newService(t)
	fx := withCatalog(t, s)
	setLimit(t, s, 1<<30)
	cat, err := s.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	if len(cat) != 3 || cat[0].ID != "tiny" || !cat[0].Runnable || cat[0].CtxTrain != 4096 {
		t.Fatalf("catalog %+v", cat)
	}
	f := cat[0].Files[0]
	if f.URL != fx.srv.URL+"/files/tiny-q8_0.gguf" || f.FileName != fx.fileName || f.Size != int64(len(fx.data)) || f.SHA256 == "" ||
		f.LocalPath != "" || f.Partial != 0 || f.Download != nil {
		t.Fatalf("file %+v", f)
	}
	if e := f.Estimate; e.Verdict != "fits" || e.Ctx != 1024 || e.Budget != 1<<30 || e.Weights != int64(len(fx.data)) || e.BudgetSource != BudgetSettings {
		t.Fatalf("listed estimate %+v", e)
	}
	if _, sent := fx.srv.snapshot(); sent != 0 {
		t.Fatalf("Catalog fetched %d bytes", sent)
	}

	exact, err := s.CatalogEstimate("tiny", "q8_0")
	if err != nil {
		t.Fatal(err)
	}
	if exact.Approx || exact.Weights >= int64(len(fx.data)) || exact.Weights <= 0 || exact.CtxTrain != 4096 || exact.Verdict != "fits" {
		t.Fatalf("header estimate %+v", exact)
	}
	ranges, sent := fx.srv.snapshot()
	if len(ranges) == 0 || ranges[0] == "" || sent >= int64(len(fx.data)) {
		t.Fatalf("the header was read with ranges %q, %d of %d bytes", ranges, sent, len(fx.data))
	}
	if _, err := s.CatalogEstimate("tiny", "Q8_0"); err != nil {
		t.Fatal(err)
	}
	if r, _ := fx.srv.snapshot(); len(r) != len(ranges) {
		t.Fatalf("the header was read again (%d requests, then %d)", len(ranges), len(r))
	}
	if f := catalogEntryFile(t, s, "tiny"); f.Estimate.Approx || f.Estimate.Weights != exact.Weights {
		t.Fatalf("Catalog after the header was read: %+v", f.Estimate)
	}
	for _, c := range [][2]string{{"sizing", "Q8_0"}, {"tiny", "Q2_K"}, {"nope", "Q8_0"}} {
		if _, err := s.CatalogEstimate(c[0], c[1]); err == nil {
			t.Errorf("CatalogEstimate(%s, %s) succeeded", c[0], c[1])
		}
	}
}

// A dropped connection is resumed with a Range request; the finished file
// is checked, named, listed, and announced.
func TestDownloadResumesAfterADrop(t *testing.T) {
	s, rec := newService(t)
	fx := withCatalog(t, s)
	fx.srv.dropAfter = int64(len(fx.data) / 3)
	d, err := s.Download("tiny", "Q8_0")
	if err != nil {
		t.Fatal(err)
	}
	if d.Key != "tiny/Q8_0" || d.State != "starting" || d.FileName != fx.fileName {
		t.Fatalf("Download = %+v", d)
	}
	d = finalDownload(t, rec, "tiny/Q8_0")
	final := filepath.Join(s.dirs.Models, fx.fileName)
	if d.State != "done" || d.Path != final || d.Done != int64(len(fx.data)) || d.Total != d.Done || d.Error != "" {
		t.Fatalf("final %+v", d)
	}
	got, err := os.ReadFile(final)
	if err != nil || !bytes.Equal(got, fx.data) {
		t.Fatalf("the downloaded file differs (%v)", err)
	}
	ranges, _ := fx.srv.snapshot()
	if len(ranges) < 2 || ranges[0] != "" || ranges[1] != fmt.Sprintf("bytes=%d-", len(fx.data)/3) {
		t.Fatalf("requests' ranges %q: want a resume from byte %d", ranges, len(fx.data)/3)
	}
	var states []string
	for _, ev := range rec.all(EventDownload) {
		if st := ev.(Download).State; len(states) == 0 || states[len(states)-1] != st {
			states = append(states, st)
		}
	}
	if states[0] != "starting" || states[len(states)-1] != "done" || !strings.Contains(strings.Join(states, ","), "verifying") {
		t.Fatalf("states %v", states)
	}
	waitFor(t, "models:changed with the download", func() bool {
		ev, _ := rec.last(EventModels)
		list, _ := ev.([]LocalModel)
		_, ok := findModel(list, final)
		return ok
	})
	if f := catalogEntryFile(t, s, "tiny"); f.LocalPath != final || f.Download == nil || f.Download.State != "done" || f.Estimate.Approx {
		t.Fatalf("catalog file after the download %+v", f)
	}
	// Again: nothing is fetched, it is done.
	if d, err := s.Download("tiny", "Q8_0"); err != nil || d.State != "done" || d.Path != final {
		t.Fatalf("Download of a downloaded file = %+v, %v", d, err)
	}
	if dl := s.Downloads(); len(dl) != 1 || dl[0].State != "done" {
		t.Fatalf("Downloads %+v", dl)
	}
}

// Cancel keeps the part; Download again continues it from where it was.
func TestDownloadCancelAndResume(t *testing.T) {
	s, rec := newService(t)
	fx := withCatalog(t, s)
	fx.srv.slow = true
	if _, err := s.Download("tiny", "Q8_0"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a few bytes", func() bool {
		ev, ok := rec.last(EventDownload)
		return ok && ev.(Download).State == "downloading" && ev.(Download).Done > 64<<10
	})
	s.CancelDownload("tiny", "Q8_0")
	d := finalDownload(t, rec, "tiny/Q8_0")
	if d.State != "cancelled" || d.Error != "" {
		t.Fatalf("cancelled download %+v", d)
	}
	f := catalogEntryFile(t, s, "tiny")
	if f.Partial <= 0 || f.Partial >= int64(len(fx.data)) || f.LocalPath != "" {
		t.Fatalf("after cancel: partial %d local %q", f.Partial, f.LocalPath)
	}
	list, _ := s.Models()
	for _, m := range list {
		if strings.Contains(m.Path, "tiny") {
			t.Fatalf("a partial download is listed: %+v", m)
		}
	}
	fx.srv.mu.Lock()
	fx.srv.slow = false
	fx.srv.mu.Unlock()
	before := len(rec.all(EventDownload))
	if _, err := s.Download("tiny", "Q8_0"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resumed download", func() bool {
		evs := rec.all(EventDownload)[before:]
		return len(evs) > 0 && evs[len(evs)-1].(Download).State == "done"
	})
	got, _ := os.ReadFile(filepath.Join(s.dirs.Models, fx.fileName))
	if !bytes.Equal(got, fx.data) {
		t.Fatal("the resumed file differs")
	}
	ranges, _ := fx.srv.snapshot()
	if last := ranges[len(ranges)-1]; last != fmt.Sprintf("bytes=%d-", f.Partial) {
		t.Fatalf("the resume asked for %q, want bytes=%d-", last, f.Partial)
	}
}

// A download whose bytes do not match the catalog's digest is deleted and
// never listed.
func TestCorruptDownloadIsRejected(t *testing.T) {
	s, rec := newService(t)
	withCatalog(t, s)
	if _, err := s.Download("damaged", "Q8_0"); err != nil {
		t.Fatal(err)
	}
	d := finalDownload(t, rec, "damaged/Q8_0")
	if d.State != "failed" || d.Error != "corrupted download: sha256 mismatch, file removed" {
		t.Fatalf("final %+v", d)
	}
	ents, _ := os.ReadDir(s.dirs.Models)
	if len(ents) != 0 {
		t.Fatalf("the models folder holds %v", ents)
	}
	list, _ := s.Models()
	for _, m := range list {
		if strings.Contains(m.Path, "damaged") {
			t.Fatalf("listed %+v", m)
		}
	}
	if f := catalogEntryFile(t, s, "damaged"); f.LocalPath != "" || f.Partial != 0 || f.Download.State != "failed" {
		t.Fatalf("catalog file %+v", f)
	}
	if _, err := s.Download("sizing", "Q8_0"); err == nil || !strings.Contains(err.Error(), "no download address") {
		t.Fatalf("Download(sizing only) = %v", err)
	}
}

type failAfter struct {
	w    io.Writer
	left int
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.left {
		n, _ := f.w.Write(p[:f.left])
		f.left = 0
		return n, &os.PathError{Op: "write", Path: "part", Err: syscall.ENOSPC}
	}
	f.left -= len(p)
	return f.w.Write(p)
}

func TestDownloadOnAFullDisk(t *testing.T) {
	s, rec := newService(t)
	fx := withCatalog(t, s)
	// Refused before a byte is fetched: the free space is known.
	s.catalog.dl = download.NewManager(download.Options{FreeSpace: func(string) (int64, error) { return 1 << 20, nil }})
	_, err := s.Download("tiny", "Q8_0")
	want := fmt.Sprintf("the disk is full: 1.0 MiB free, %.1f MiB needed", float64(len(fx.data))/(1<<20))
	if err == nil || err.Error() != want {
		t.Fatalf("Download = %v, want %q", err, want)
	}
	if ev, _ := rec.last(EventDownload); ev.(Download).State != "failed" || ev.(Download).Error != want {
		t.Fatalf("event %+v", ev)
	}
	// Full midway: the part is kept for a resume.
	s.catalog.dl = download.NewManager(download.Options{Retries: -1,
		WrapWriter: func(w io.Writer) io.Writer { return &failAfter{w: w, left: 256 << 10} }})
	if _, err := s.Download("tiny", "Q8_0"); err != nil {
		t.Fatal(err)
	}
	var d Download
	waitFor(t, "the full disk", func() bool {
		ev, _ := rec.last(EventDownload)
		d = ev.(Download)
		return d.State == "failed"
	})
	if !strings.HasPrefix(d.Error, "the disk is full: ") || !strings.Contains(d.Error, "MiB more is needed") || !strings.Contains(d.Error, "resume") {
		t.Fatalf("error %q", d.Error)
	}
	if f := catalogEntryFile(t, s, "tiny"); f.Partial != 256<<10 {
		t.Fatalf("the part holds %d bytes, want %d", f.Partial, 256<<10)
	}
}
