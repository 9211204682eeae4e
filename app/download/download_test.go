package download

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const name = "tiny-F16.gguf"

func TestDownloadChecksSizeAndSHA(t *testing.T) {
	data := testModel(t, 1)
	srv := newServer(t, data)
	dir := t.TempDir()
	m := testManager(srv, Options{})
	j, err := m.Start(context.Background(), srv.URL+"/m.gguf", dir, name, Expect{Size: int64(len(data)), SHA256: strings.ToUpper(sha(data))})
	if err != nil {
		t.Fatal(err)
	}
	res, err := wait(t, j)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(dir, name), data)
	want := Result{Path: filepath.Join(dir, name), Size: int64(len(data)), SHA256: sha(data), Fetched: int64(len(data))}
	if res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{name}) {
		t.Errorf("folder holds %v, want only %s", names, name)
	}
	if r := srv.seen(); len(r) != 1 || r[0].rng != "" || r[0].status != http.StatusOK {
		t.Errorf("requests %+v, want one plain GET", r)
	}
	if p := j.Progress(); p.State != Done || p.Done != int64(len(data)) || p.Fraction() != 1 {
		t.Errorf("final progress %+v", p)
	}
	if len(m.Jobs()) != 0 {
		t.Errorf("finished job still listed")
	}
	// The file is there now: a second download is refused, not overwritten.
	if _, err := m.Start(context.Background(), srv.URL, dir, name, Expect{}); !errors.Is(err, ErrExists) {
		t.Errorf("Start over an existing file: %v, want ErrExists", err)
	}
}

// A connection dropped midway fails the job (reconnects off) and keeps the
// part; Resume continues with a Range request guarded by the validator
// (ETag, or Last-Modified when the server has no ETag), and the server sends
// only the rest.
func TestResumeAfterDroppedConnection(t *testing.T) {
	data := testModel(t, 1)
	cut := int64(len(data) / 3)
	for _, tc := range []struct {
		name, etag string
		mod        time.Time
	}{
		{"etag", `"abc"`, time.Time{}},
		{"last-modified", "", time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, data, step{cutAfter: cut})
			srv.set(func(s *testServer) { s.etag, s.modTime = tc.etag, tc.mod })
			dir := t.TempDir()
			m := testManager(srv, Options{})
			j, err := m.Start(context.Background(), srv.URL, dir, name, Expect{SHA256: sha(data)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = wait(t, j)
			if err == nil || errors.Is(err, ErrCanceled) || !strings.Contains(err.Error(), "kept") {
				t.Fatalf("dropped connection: %v", err)
			}
			if p := j.Progress(); p.State != Failed || p.Err == nil {
				t.Errorf("progress after the drop: %+v", p)
			}
			if got := fileSize(t, filepath.Join(dir, name+partSuffix)); got != cut {
				t.Fatalf("part holds %d bytes, want %d", got, cut)
			}
			parts, err := Partial(dir)
			want := []PartialFile{{Name: name, URL: srv.URL, Done: cut, Size: int64(len(data)), SHA256: sha(data)}}
			if err != nil || len(parts) != 1 {
				t.Fatalf("Partial: %+v, %v", parts, err)
			}
			parts[0].Modified = time.Time{}
			if parts[0] != want[0] {
				t.Errorf("Partial: %+v, want %+v", parts[0], want[0])
			}

			j, err = m.Resume(context.Background(), dir, name)
			if err != nil {
				t.Fatal(err)
			}
			res, err := wait(t, j)
			if err != nil {
				t.Fatal(err)
			}
			checkFile(t, filepath.Join(dir, name), data)
			r := srv.seen()
			wantIfRange := tc.etag
			if wantIfRange == "" {
				wantIfRange = tc.mod.Format(http.TimeFormat)
			}
			if len(r) != 2 || r[1].rng != "bytes="+itoa(cut)+"-" || r[1].ifRange != wantIfRange || r[1].status != http.StatusPartialContent {
				t.Fatalf("requests %+v", r)
			}
			if r[1].sent != int64(len(data))-cut || res.Fetched != r[1].sent || res.Reused != cut {
				t.Errorf("resume sent %d bytes (fetched %d, reused %d) of %d", r[1].sent, res.Fetched, res.Reused, len(data))
			}
			if parts, _ := Partial(dir); len(parts) != 0 {
				t.Errorf("Partial after completion: %+v", parts)
			}
		})
	}
}

// With reconnects on, a stall (no bytes for StallTimeout) and then a drop
// are each cured by a ranged request within the same job.
func TestReconnectsAfterStallAndDrop(t *testing.T) {
	data := testModel(t, 1)
	n := int64(len(data))
	// Steps count the bytes of their own response: the drop is at n/2.
	srv := newServer(t, data, step{hangAfter: n / 4}, step{cutAfter: n / 4})
	dir := t.TempDir()
	m := testManager(srv, Options{Retries: 2, StallTimeout: 300 * time.Millisecond})
	j, err := m.Start(context.Background(), srv.URL, dir, name, Expect{Size: n})
	if err != nil {
		t.Fatal(err)
	}
	res, err := wait(t, j)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(dir, name), data)
	r := srv.seen()
	if len(r) != 3 || r[1].rng != "bytes="+itoa(n/4)+"-" || r[2].rng != "bytes="+itoa(n/2)+"-" {
		t.Fatalf("requests %+v", r)
	}
	if p := j.Progress(); p.Reconnects != 2 || res.Fetched != n {
		t.Errorf("reconnects %d, fetched %d of %d", p.Reconnects, res.Fetched, n)
	}
}

// Reconnects that make no progress run out: the last error is reported.
func TestReconnectsGiveUp(t *testing.T) {
	var calls, code atomic.Int32
	code.Store(http.StatusServiceUnavailable)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no", int(code.Load()))
	}))
	defer srv.Close()
	dir := t.TempDir()
	m := testManager(nil, Options{Retries: 2, Client: srv.Client()})
	j, err := m.Start(context.Background(), srv.URL, dir, name, Expect{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wait(t, j)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "gave up after 2 reconnects") {
		t.Fatalf("error %v", err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	// A 404 is final at once.
	code.Store(http.StatusNotFound)
	j, _ = m.Start(context.Background(), srv.URL, dir, name, Expect{})
	if _, err := wait(t, j); !errors.As(err, &se) || se.Code != http.StatusNotFound || strings.Contains(err.Error(), "gave up") {
		t.Fatalf("404: %v", err)
	}
}

func TestCancelKeepsPartForResume(t *testing.T) {
	data := testModel(t, 1)
	half := int64(len(data) / 2)
	srv := newServer(t, data, step{hangAfter: half}, step{hangAfter: 1000})
	dir := t.TempDir()
	m := testManager(srv, Options{})

	j, err := m.Start(context.Background(), srv.URL, dir, name, Expect{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "half the file", func() bool { return j.Progress().Done == half })
	j.Cancel()
	if _, err := wait(t, j); !errors.Is(err, ErrCanceled) || !strings.Contains(err.Error(), "kept for resume") {
		t.Fatalf("after Cancel: %v", err)
	}
	if p := j.Progress(); p.State != Canceled {
		t.Errorf("state %v", p.State)
	}
	if got := fileSize(t, filepath.Join(dir, name+partSuffix)); got != half {
		t.Fatalf("part holds %d bytes, want %d", got, half)
	}

	// Cancelling the context passed to Start does the same, and the error
	// says which.
	ctx, cancel := context.WithCancel(context.Background())
	j, err = m.Start(ctx, srv.URL, dir, name, Expect{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "1000 more bytes", func() bool { return j.Progress().Done == half+1000 })
	cancel()
	if _, err := wait(t, j); !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("after the context ended: %v", err)
	}

	// Start again with the same name continues.
	j, err = m.Start(context.Background(), srv.URL, dir, name, Expect{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, j); err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(dir, name), data)
	r := srv.seen()
	if len(r) != 3 || r[2].rng != "bytes="+itoa(half+1000)+"-" || r[2].sent != int64(len(data))-half-1000 {
		t.Errorf("requests %+v", r)
	}
}

func TestServerIgnoringRangeRestarts(t *testing.T) {
	data := testModel(t, 1)
	srv := newServer(t, data, step{cutAfter: int64(len(data) / 2)}, step{ignoreRange: true})
	dir := t.TempDir()
	m := testManager(srv, Options{Retries: 1})
	j, err := m.Start(context.Background(), srv.URL, dir, name, Expect{SHA256: sha(data)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := wait(t, j)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(dir, name), data)
	r := srv.seen()
	if len(r) != 2 || r[1].rng == "" || r[1].status != http.StatusOK || r[1].sent != int64(len(data)) {
		t.Errorf("requests %+v", r)
	}
	if res.Reused != 0 {
		t.Errorf("reused %d bytes of a part the server would not continue", res.Reused)
	}
}

// The file changes on the server between attempts: the new one is fetched
// from byte 0, whether the server honours If-Range (200 with the new file)
// or ignores it (206 with a new ETag, which the client notices).
func TestFileChangedOnServerRestarts(t *testing.T) {
	v1, v2 := testModel(t, 1), testModel(t, 2)
	if len(v1) != len(v2) {
		t.Fatalf("fixtures differ in size: %d, %d", len(v1), len(v2))
	}
	for _, tc := range []struct {
		name     string
		second   step
		requests int
	}{
		{"if-range honoured", step{}, 2},
		{"if-range ignored", step{ignoreIfRange: true}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, v1, step{cutAfter: int64(len(v1) / 2)}, tc.second)
			dir := t.TempDir()
			m := testManager(srv, Options{})
			j, err := m.Start(context.Background(), srv.URL, dir, name, Expect{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wait(t, j); err == nil {
				t.Fatal("dropped connection not reported")
			}
			srv.set(func(s *testServer) { s.data, s.etag = v2, `"v2"` })
			j, err = m.Resume(context.Background(), dir, name)
			if err != nil {
				t.Fatal(err)
			}
			res, err := wait(t, j)
			if err != nil {
				t.Fatal(err)
			}
			checkFile(t, filepath.Join(dir, name), v2)
			r := srv.seen()
			if len(r) != tc.requests || r[1].ifRange != `"v1"` || r[len(r)-1].status != http.StatusOK {
				t.Errorf("requests %+v", r)
			}
			if res.Reused != 0 || res.SHA256 != sha(v2) {
				t.Errorf("result %+v", res)
			}
		})
	}
}

func TestSHA256MismatchRejected(t *testing.T) {
	data := testModel(t, 1)
	srv := newServer(t, data)
	dir := t.TempDir()
	m := testManager(srv, Options{})
	j, err := m.Start(context.Background(), srv.URL, dir, name, Expect{SHA256: sha([]byte("another file"))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wait(t, j)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "SHA-256 is "+sha(data)) {
		t.Fatalf("error %v", err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("left behind %v", names)
	}
}

func TestBadContentRejected(t *testing.T) {
	model := testModel(t, 1)
	junk := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range junk {
		junk[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct {
		name string
		data []byte
		want Expect
		msg  string
	}{
		{"truncated", model[:len(model)-1000], Expect{}, "run past the end of the file"},
		{"not gguf", junk, Expect{}, "not a GGUF file"},
		{"html error page", []byte("<html>Repository not found</html>"), Expect{}, "not a valid GGUF"},
		{"size differs", model, Expect{Size: int64(len(model)) + 1}, "expected " + itoa(int64(len(model))+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.data)
			dir := t.TempDir()
			m := testManager(srv, Options{})
			j, err := m.Start(context.Background(), srv.URL, dir, name, tc.want)
			if err != nil {
				t.Fatal(err)
			}
			_, err = wait(t, j)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want ErrCorrupt with %q", err, tc.msg)
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Errorf("left behind %v", names)
			}
		})
	}
}

func TestDiskFullAtStart(t *testing.T) {
	data := testModel(t, 1)
	n := int64(len(data))
	t.Run("size known", func(t *testing.T) {
		srv := newServer(t, data)
		dir := t.TempDir()
		m := testManager(srv, Options{FreeSpace: func(string) (int64, error) { return n - 1, nil }})
		_, err := m.Start(context.Background(), srv.URL, dir, name, Expect{Size: n})
		var df *DiskFullError
		if !errors.As(err, &df) || !errors.Is(err, ErrDiskFull) || df.Need != n || df.Free != n-1 || !strings.Contains(err.Error(), "not enough disk space") {
			t.Fatalf("error %v", err)
		}
		if len(srv.seen()) != 0 || len(dirNames(t, dir)) != 0 {
			t.Errorf("refused download still reached the server or the disk")
		}
	})
	t.Run("size from the server", func(t *testing.T) {
		srv := newServer(t, data)
		dir := t.TempDir()
		m := testManager(srv, Options{FreeSpace: func(string) (int64, error) { return 1 << 20, nil }})
		j, err := m.Start(context.Background(), srv.URL, dir, name, Expect{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wait(t, j); !errors.Is(err, ErrDiskFull) {
			t.Fatalf("error %v", err)
		}
		if names := dirNames(t, dir); len(names) != 0 {
			t.Errorf("left behind %v", names)
		}
	})
	t.Run("resume needs only the rest", func(t *testing.T) {
		srv := newServer(t, data, step{cutAfter: n / 2})
		dir := t.TempDir()
		m := testManager(srv, Options{})
		j, _ := m.Start(context.Background(), srv.URL, dir, name, Expect{Size: n})
		if _, err := wait(t, j); err == nil {
			t.Fatal("dropped connection not reported")
		}
		m = testManager(srv, Options{FreeSpace: func(string) (int64, error) { return n - n/2, nil }})
		j, err := m.Resume(context.Background(), dir, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wait(t, j); err != nil {
			t.Fatal(err)
		}
		checkFile(t, filepath.Join(dir, name), data)
	})
}

// failWriter fails like a full disk after limit bytes.
type failWriter struct {
	w     io.Writer
	limit int64
	err   error
}

func (f *failWriter) Write(p []byte) (int, error) {
	if int64(len(p)) <= f.limit {
		f.limit -= int64(len(p))
		return f.w.Write(p)
	}
	n, _ := f.w.Write(p[:f.limit])
	f.limit -= int64(n)
	return n, f.err
}

func TestWriteFailsMidDownload(t *testing.T) {
	data := testModel(t, 1)
	const limit = 1 << 20
	for _, tc := range []struct {
		name   string
		err    error
		isFull bool
		msg    string
	}{
		{"disk full", &os.PathError{Op: "write", Path: "x.part", Err: syscall.ENOSPC}, true, "disk full"},
		{"io error", &os.PathError{Op: "write", Path: "x.part", Err: syscall.EIO}, false, "input/output error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, data)
			dir := t.TempDir()
			m := testManager(srv, Options{Retries: 3, WrapWriter: func(w io.Writer) io.Writer {
				return &failWriter{w: w, limit: limit, err: tc.err}
			}})
			j, err := m.Start(context.Background(), srv.URL, dir, name, Expect{Size: int64(len(data))})
			if err != nil {
				t.Fatal(err)
			}
			_, err = wait(t, j)
			if err == nil || errors.Is(err, ErrDiskFull) != tc.isFull || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v", err)
			}
			if len(srv.seen()) != 1 {
				t.Errorf("a write error was retried: %+v", srv.seen())
			}
			if parts, _ := Partial(dir); len(parts) != 1 || parts[0].Done != limit {
				t.Fatalf("Partial: %+v", parts)
			}
			// With room again, the download resumes where the disk filled.
			j, err = testManager(srv, Options{}).Resume(context.Background(), dir, name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wait(t, j); err != nil {
				t.Fatal(err)
			}
			checkFile(t, filepath.Join(dir, name), data)
			if r := srv.seen(); len(r) != 2 || r[1].rng != "bytes="+itoa(limit)+"-" {
				t.Errorf("requests %+v", r)
			}
		})
	}
}

func TestProgressEvents(t *testing.T) {
	data := testModel(t, 1)
	n := int64(len(data))
	srv := newServer(t, data)
	srv.set(func(s *testServer) { s.delay = 10 * time.Millisecond }) // about 0.7 s in all
	dir := t.TempDir()
	m := testManager(srv, Options{})
	start := time.Now()
	j, err := m.Start(context.Background(), srv.URL, dir, name, Expect{Size: n})
	if err != nil {
		t.Fatal(err)
	}
	var evs []Progress
	for p := range j.Events() {
		evs = append(evs, p)
	}
	elapsed := time.Since(start)
	if _, err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	// Besides the ticks, one event per state change (downloading,
	// verifying, done).
	if limit := int(elapsed/DefaultProgressInterval) + 4; len(evs) > limit || len(evs) < 3 {
		t.Errorf("%d events in %v, want 3..%d", len(evs), elapsed, limit)
	}
	sawSpeed := false
	for i, p := range evs {
		if i > 0 && (p.Done < evs[i-1].Done || p.State < evs[i-1].State) {
			t.Fatalf("event %d went back: %+v after %+v", i, p, evs[i-1])
		}
		if p.Total != n {
			t.Errorf("event %d: total %d, want %d", i, p.Total, n)
		}
		if p.State == Downloading && p.Speed > 0 && p.ETA >= 0 {
			sawSpeed = true
		}
	}
	if !sawSpeed {
		t.Errorf("no event had a speed and an ETA: %+v", evs)
	}
	if last := evs[len(evs)-1]; last.State != Done || last.Done != n || last.Fraction() != 1 || last.Err != nil || last.ETA != 0 {
		t.Errorf("final event %+v", last)
	}
}

// A part that is already whole gets a 416 for its Range request and is
// verified and renamed without fetching anything.
func TestCompletePartIsFinishedOn416(t *testing.T) {
	data := testModel(t, 1)
	srv := newServer(t, data)
	dir := t.TempDir()
	final := filepath.Join(dir, name)
	if err := os.WriteFile(final+partSuffix, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSidecar(final+metaSuffix, &sidecar{URL: srv.URL, ETag: `"v1"`, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	j, err := testManager(srv, Options{}).Start(context.Background(), srv.URL, dir, name, Expect{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := wait(t, j)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, final, data)
	if r := srv.seen(); len(r) != 1 || r[0].status != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("requests %+v", r)
	}
	if res.Fetched != 0 || res.Reused != int64(len(data)) || res.SHA256 != sha(data) {
		t.Errorf("result %+v", res)
	}
}

// A part is continued only for the same URL and expectations; otherwise it
// is replaced.
func TestPartOfAnotherFileIsReplaced(t *testing.T) {
	data := testModel(t, 1)
	srv := newServer(t, data)
	dir := t.TempDir()
	final := filepath.Join(dir, name)
	for _, tc := range []struct {
		name string
		meta sidecar
		want Expect
	}{
		{"other url", sidecar{URL: srv.URL + "/other", ETag: `"v1"`}, Expect{}},
		{"other size", sidecar{URL: srv.URL, ETag: `"v1"`, Size: 5}, Expect{Size: int64(len(data))}},
		{"no validator", sidecar{URL: srv.URL}, Expect{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(final+partSuffix, []byte("stale bytes"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := writeSidecar(final+metaSuffix, &tc.meta); err != nil {
				t.Fatal(err)
			}
			j, err := testManager(srv, Options{}).Start(context.Background(), srv.URL, dir, name, tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wait(t, j); err != nil {
				t.Fatal(err)
			}
			checkFile(t, final, data)
			if r := srv.seen(); r[len(r)-1].rng != "" {
				t.Errorf("stale part continued: %+v", r)
			}
			os.Remove(final)
		})
	}
}

func TestStartRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	m := testManager(nil, Options{})
	good := "http://127.0.0.1:1/m.gguf"
	for _, tc := range []struct {
		url, dir, name string
		want           Expect
		msg            string
	}{
		{"", dir, name, Expect{}, "bad URL"},
		{"ftp://host/m.gguf", dir, name, Expect{}, "want http"},
		{"http://", dir, name, Expect{}, "want http"},
		{"http://a b/", dir, name, Expect{}, "bad URL"},
		{good, "", name, Expect{}, "no destination folder"},
		{good, dir, "", Expect{}, "no file name"},
		{good, dir, "../m.gguf", Expect{}, "folder"},
		{good, dir, "sub/m.gguf", Expect{}, "folder"},
		{good, dir, ".m.gguf", Expect{}, "dot"},
		{good, dir, "model.bin", Expect{}, ".gguf"},
		{good, dir, strings.Repeat("x", 250) + ".gguf", Expect{}, "longer"},
		{good, dir, name, Expect{Size: -1}, "negative"},
		{good, dir, name, Expect{SHA256: "abc"}, "64 hex"},
		{good, dir, name, Expect{SHA256: strings.Repeat("g", 64)}, "64 hex"},
	} {
		_, err := m.Start(context.Background(), tc.url, tc.dir, tc.name, tc.want)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Start(%q, %q, %q, %+v): %v, want %q", tc.url, tc.dir, tc.name, tc.want, err, tc.msg)
		}
	}
	if _, err := m.Resume(context.Background(), dir, name); err == nil || !strings.Contains(err.Error(), "nothing to resume") {
		t.Errorf("Resume without a part: %v", err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("refused calls wrote %v", names)
	}
}

func TestBusyAndDiscard(t *testing.T) {
	data := testModel(t, 1)
	srv := newServer(t, data, step{hangAfter: 1000})
	dir := t.TempDir()
	m := testManager(srv, Options{})
	j, err := m.Start(context.Background(), srv.URL, dir, name, Expect{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(context.Background(), srv.URL, dir, name, Expect{}); !errors.Is(err, ErrBusy) {
		t.Errorf("second Start: %v, want ErrBusy", err)
	}
	if js := m.Jobs(); len(js) != 1 || js[0] != j || j.Name() != name || j.URL() != srv.URL || j.Path() != filepath.Join(dir, name) {
		t.Errorf("Jobs: %v", js)
	}
	eventually(t, "1000 bytes", func() bool { return j.Progress().Done == 1000 })
	if err := m.Discard(dir, name); !errors.Is(err, ErrBusy) {
		t.Errorf("Discard while downloading: %v", err)
	}
	j.Cancel()
	wait(t, j)
	if err := m.Discard(dir, name); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("Discard left %v", names)
	}
}

func TestPartialSkipsWhatCannotBeResumed(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ok.gguf.part", "12345")
	if err := writeSidecar(filepath.Join(dir, "ok.gguf"+metaSuffix), &sidecar{URL: "http://h/ok.gguf", Size: 10}); err != nil {
		t.Fatal(err)
	}
	write("orphan.gguf.part", "1")  // no sidecar
	write("garbled.gguf.part", "1") // unreadable sidecar
	write("garbled.gguf.part.json", "{")
	write("lonely.gguf.part.json", `{"version":1,"url":"http://h/x"}`) // no part
	write("other.bin.part", "1")                                       // not a model download
	parts, err := Partial(dir)
	if err != nil || len(parts) != 1 || parts[0].Name != "ok.gguf" || parts[0].Done != 5 || parts[0].Size != 10 {
		t.Fatalf("Partial: %+v, %v", parts, err)
	}
	if parts, err := Partial(filepath.Join(dir, "missing")); err != nil || parts != nil {
		t.Errorf("missing folder: %v, %v", parts, err)
	}
}

func TestRateSmoothsOverWindow(t *testing.T) {
	r := rate{window: 5 * time.Second}
	t0 := time.Unix(1000, 0)
	if r.speed() != 0 {
		t.Fatal("speed without samples")
	}
	// 1 MB/s for 10 s, sampled every 100 ms, with one burst in the middle.
	var done int64
	for i := 0; i <= 100; i++ {
		done += 100_000
		if i == 50 {
			done += 2_000_000
		}
		r.add(t0.Add(time.Duration(i)*100*time.Millisecond), done)
	}
	if s := r.speed(); s < 0.99e6 || s > 1.01e6 {
		t.Errorf("speed %.0f B/s, want 1e6 (the burst has left the window)", s)
	}
	if len(r.samples) > 52 {
		t.Errorf("%d samples kept for a 5 s window at 10/s", len(r.samples))
	}
	// A stall: the speed falls to zero once the window holds no progress.
	for i := 1; i <= 60; i++ {
		r.add(t0.Add(10*time.Second+time.Duration(i)*100*time.Millisecond), done)
	}
	if s := r.speed(); s != 0 {
		t.Errorf("speed %.0f after a 6 s stall", s)
	}
}

func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		in           string
		start, total int64
	}{
		{"bytes 100-199/200", 100, 200},
		{"bytes 0-0/*", 0, -1},
	} {
		if s, n, err := parseContentRange(tc.in); err != nil || s != tc.start || n != tc.total {
			t.Errorf("%q: %d %d %v", tc.in, s, n, err)
		}
	}
	for _, bad := range []string{"", "bytes */200", "bytes 5-4/10", "bytes 0-9/9", "items 0-1/2", "bytes -1-2/5", "bytes a-b/c"} {
		if _, _, err := parseContentRange(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if n, ok := parseUnsatisfied("bytes */4096"); !ok || n != 4096 {
		t.Errorf("416 range: %d %v", n, ok)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
