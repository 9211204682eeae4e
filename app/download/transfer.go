package download

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"nibble/engine/gguf"
	"nibble/internal/atomicfile"
)

const (
	bufSize     = 256 << 10
	maxBackoff  = 30 * time.Second
	maxRestarts = 3 // a file that changes this often mid-download is given up on
)

// transfer is the state of one job's goroutine.
type transfer struct {
	j       *Job
	part    *os.File
	w       io.Writer // part, through Options.WrapWriter
	h       hash.Hash // of the part's bytes [0, done)
	done    int64     // bytes in the part
	total   int64     // file size, -1 unknown
	reused  int64     // bytes kept from an earlier part
	fetched int64
}

func (j *Job) download() (Result, error) {
	t := &transfer{j: j, h: sha256.New(), total: -1}
	if j.meta.Size > 0 {
		t.total = j.meta.Size
	}
	defer t.closePart()
	fail := func(err error) (Result, error) {
		if j.ctx.Err() != nil {
			return Result{}, j.canceledErr(t.done, t.total)
		}
		return Result{}, err
	}
	if j.offset > 0 {
		if err := t.hashPart(j.offset); err != nil {
			return fail(err)
		}
	}
	fails, restarts := 0, 0
	for {
		before := t.done
		err := t.attempt()
		if err == nil {
			break
		}
		if j.ctx.Err() != nil {
			return fail(err)
		}
		if errors.Is(err, errRestart) {
			if restarts++; restarts > maxRestarts {
				return fail(fmt.Errorf("GET %s: the file changed on the server %d times during the download", j.url, restarts))
			}
			t.restart()
			continue
		}
		if !isRetryable(err) {
			return fail(err)
		}
		if t.done > before {
			fails = 0
		}
		if fails >= j.m.opt.Retries {
			if fails > 0 {
				err = fmt.Errorf("%w (gave up after %d reconnects)", err, fails)
			}
			if t.done > 0 {
				err = fmt.Errorf("%w; the partial download is kept, resume to continue", err)
			}
			return fail(err)
		}
		delay := min(j.m.opt.RetryDelay<<fails, maxBackoff)
		fails++
		j.noteReconnect()
		select {
		case <-j.ctx.Done():
			return fail(err)
		case <-time.After(delay):
		}
	}
	return t.verify()
}

// hashPart feeds the first n bytes of the existing part to the hash, so the
// digest of the finished file covers them without keeping hash state on
// disk.
func (t *transfer) hashPart(n int64) error {
	f, err := os.Open(t.j.part)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	defer f.Close()
	got, err := io.CopyBuffer(t.h, io.LimitReader(ctxReader{t.j.ctx, f}, n), make([]byte, bufSize))
	if err != nil {
		return fmt.Errorf("resume: read %s: %w", t.j.part, err)
	}
	if got < n { // shrank since Start looked: start over
		t.restart()
		return nil
	}
	t.done, t.reused = n, n
	t.j.setDone(t.done, t.total)
	return nil
}

// restart forgets the part's bytes; the next attempt truncates the file.
func (t *transfer) restart() {
	t.done, t.reused, t.total = 0, 0, -1
	t.h.Reset()
	w := t.j.want
	t.j.meta = sidecar{URL: t.j.url, Size: w.Size, ExpectSize: w.Size, SHA256: w.SHA256}
	if w.Size > 0 {
		t.total = w.Size
	}
	t.j.setDone(0, t.total)
}

// attempt makes one request and writes its body to the part. It returns
// nil when the part holds the whole file.
func (t *transfer) attempt() error {
	j, opt := t.j, &t.j.m.opt
	ctx, cancel := context.WithCancelCause(j.ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(opt.StallTimeout, func() { cancel(errStalled) })
	defer watchdog.Stop()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return fmt.Errorf("request %s: %w", j.url, err)
	}
	// Offsets are the file's own, not those of a compressed encoding.
	req.Header.Set("Accept-Encoding", "identity")
	if t.done > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", t.done))
		if v := j.meta.ifRange(); v != "" {
			req.Header.Set("If-Range", v)
		}
	}
	resp, err := opt.Client.Do(req)
	if err != nil {
		return t.netErr(ctx, err)
	}
	defer resp.Body.Close()

	total := int64(-1) // the server's size of the file
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, size, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil {
			return fmt.Errorf("GET %s: %w", j.url, err)
		}
		if start != t.done {
			return fmt.Errorf("GET %s: asked for bytes from %d, got %q", j.url, t.done, resp.Header.Get("Content-Range"))
		}
		if t.changed(resp, size) {
			return errRestart
		}
		total = size
		if t.done == 0 {
			t.setValidators(resp)
		}
	case http.StatusOK:
		// Range was ignored, or If-Range found a new file: either way this
		// body is the whole file.
		if t.done > 0 {
			t.restart()
		}
		total = resp.ContentLength
		t.setValidators(resp)
	case http.StatusRequestedRangeNotSatisfiable:
		// Asked from the part's end: if that is the server's size, the part
		// is complete; otherwise it is not this file.
		size, ok := parseUnsatisfied(resp.Header.Get("Content-Range"))
		if ok && t.done > 0 && size == t.done && (t.total < 0 || t.total == size) {
			t.total = size
			return nil
		}
		return errRestart
	default:
		e := &StatusError{URL: j.url, Status: resp.Status, Code: resp.StatusCode}
		if statusRetryable(e.Code) {
			return retryable{e}
		}
		return e
	}
	if want := j.want.Size; want > 0 && total >= 0 && total != want {
		return &CorruptError{Reason: fmt.Sprintf("the server's file is %d bytes, expected %d", total, want)}
	}
	if total >= 0 {
		t.total = total
		if err := j.checkSpace(t.total - t.done); err != nil {
			return err
		}
	}
	if err := t.openPart(); err != nil {
		return err
	}
	j.meta.Size = max(t.total, 0)
	if err := writeSidecar(j.final+metaSuffix, &j.meta); err != nil {
		if isDiskFull(err) {
			return t.writeErr(err)
		}
		return err
	}
	j.setDone(t.done, t.total)
	j.setState(Downloading)

	buf := make([]byte, bufSize)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			watchdog.Reset(opt.StallTimeout)
			t.fetched += int64(n)
			if t.total >= 0 && t.done+int64(n) > t.total {
				return fmt.Errorf("GET %s: the server sent more than the %d bytes it announced", j.url, t.total)
			}
			w, werr := t.w.Write(buf[:n])
			w = min(max(w, 0), n) // a misbehaving hook must not break the count
			t.h.Write(buf[:w])
			t.done += int64(w)
			j.setDone(t.done, t.total)
			if werr == nil && w < n {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return t.writeErr(werr)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return t.netErr(ctx, fmt.Errorf("GET %s: body: %w", j.url, rerr))
		}
	}
	switch {
	case t.total < 0: // no size announced: the body's end is the file's end
		t.total = t.done
	case t.done < t.total:
		return retryable{fmt.Errorf("GET %s: the body ended at byte %d of %d", j.url, t.done, t.total)}
	}
	return nil
}

// changed reports a 206 for a file other than the part's: a server that
// ignores If-Range still shows its current validators and size.
func (t *transfer) changed(resp *http.Response, total int64) bool {
	m := &t.j.meta
	if et := resp.Header.Get("ETag"); m.ETag != "" && et != "" && et != m.ETag {
		return true
	}
	if lm := resp.Header.Get("Last-Modified"); m.ETag == "" && m.LastModified != "" && lm != "" && lm != m.LastModified {
		return true
	}
	return total >= 0 && t.total >= 0 && total != t.total
}

func (t *transfer) setValidators(resp *http.Response) {
	t.j.meta.ETag = resp.Header.Get("ETag")
	t.j.meta.LastModified = resp.Header.Get("Last-Modified")
}

// openPart opens the part once per job and cuts it to the bytes kept, so a
// restart or a tail left by a crash is not mixed into the file.
func (t *transfer) openPart() error {
	if t.part == nil {
		f, err := os.OpenFile(t.j.part, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		t.part, t.w = f, f
		if wrap := t.j.m.opt.WrapWriter; wrap != nil {
			t.w = wrap(f)
		}
	}
	if err := t.part.Truncate(t.done); err != nil {
		return err
	}
	if _, err := t.part.Seek(t.done, io.SeekStart); err != nil {
		return fmt.Errorf("seek %s: %w", t.j.part, err)
	}
	return nil
}

// closePart syncs and closes the part; on the failure paths this keeps what
// was received for a resume, and errors there (a full disk) change nothing.
func (t *transfer) closePart() {
	if t.part != nil {
		t.part.Sync()
		t.part.Close()
		t.part = nil
	}
}

func (t *transfer) netErr(ctx context.Context, err error) error {
	if t.j.ctx.Err() != nil {
		return err // cancelled: the caller reports that
	}
	if errors.Is(context.Cause(ctx), errStalled) {
		return retryable{fmt.Errorf("GET %s: no data for %s: %w", t.j.url, t.j.m.opt.StallTimeout, errStalled)}
	}
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) {
		return err // the same certificate comes back on a retry
	}
	return retryable{err}
}

func (t *transfer) writeErr(err error) error {
	if isDiskFull(err) {
		need := int64(-1)
		if t.total >= 0 {
			need = t.total - t.done
		}
		return &DiskFullError{Dir: t.j.dir, Need: need, Free: -1, Err: err}
	}
	return fmt.Errorf("write %s: %w", t.j.part, err)
}

// verify makes the part durable, checks it and renames it into place.
func (t *transfer) verify() (Result, error) {
	j := t.j
	j.setState(Verifying)
	if t.part == nil { // complete before this job wrote anything (a 416)
		f, err := os.OpenFile(j.part, os.O_RDWR, 0)
		if err != nil {
			return Result{}, err
		}
		t.part = f
	}
	if err := t.part.Sync(); err != nil {
		return Result{}, fmt.Errorf("sync %s: %w", j.part, err)
	}
	st, err := t.part.Stat()
	if err != nil {
		return Result{}, err
	}
	t.closePart()
	if st.Size() != t.done {
		return Result{}, &CorruptError{Reason: fmt.Sprintf("%s is %d bytes, %d were written (changed by another program?)", j.part, st.Size(), t.done)}
	}
	if want := j.want.Size; want > 0 && t.done != want {
		return Result{}, &CorruptError{Reason: fmt.Sprintf("the file is %d bytes, expected %d", t.done, want)}
	}
	sum := hex.EncodeToString(t.h.Sum(nil))
	if want := j.want.SHA256; want != "" && sum != want {
		return Result{}, &CorruptError{Reason: fmt.Sprintf("its SHA-256 is %s, expected %s", sum, want)}
	}
	if err := checkGGUF(j.part, t.done); err != nil {
		return Result{}, &CorruptError{Reason: "not a valid GGUF file: " + err.Error(), Err: err}
	}
	if err := os.Rename(j.part, j.final); err != nil {
		return Result{}, err
	}
	atomicfile.SyncDir(j.dir)
	// The sidecar alone is harmless (Partial and Start ignore it), so a
	// failure to delete it does not fail the download.
	os.Remove(j.final + metaSuffix)
	return Result{Path: j.final, Size: t.done, SHA256: sum, Reused: t.reused, Fetched: t.fetched}, nil
}

// checkGGUF parses the header and checks that every tensor's data lies
// within the file, which a truncated download fails.
func checkGGUF(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// Long arrays (the vocabulary) are passed over: their lengths are still
	// checked against the file, their contents matter only to the loader.
	_, err = gguf.ReadHeader(f, size, gguf.HeaderOptions{SkipArraysLongerThan: 64})
	return err
}

// parseContentRange reads "bytes a-b/total" (total "*" gives -1).
func parseContentRange(s string) (start, total int64, err error) {
	bad := fmt.Errorf("bad Content-Range %q", s)
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, bad
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, bad
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, bad
	}
	start, e1 := strconv.ParseInt(a, 10, 64)
	last, e2 := strconv.ParseInt(b, 10, 64)
	if e1 != nil || e2 != nil || start < 0 || last < start {
		return 0, 0, bad
	}
	if tot == "*" {
		return start, -1, nil
	}
	total, err = strconv.ParseInt(tot, 10, 64)
	if err != nil || total <= last {
		return 0, 0, bad
	}
	return start, total, nil
}

// parseUnsatisfied reads the "bytes */total" of a 416.
func parseUnsatisfied(s string) (int64, bool) {
	tot, ok := strings.CutPrefix(s, "bytes */")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(tot, 10, 64)
	return n, err == nil && n >= 0
}

// ctxReader stops a long read loop (hashing a large part) on cancellation.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
