// Package httprange is an io.ReaderAt over HTTP range requests, so a GGUF
// header can be read from a server (Hugging Face) without downloading the
// file. Sequential reads grow the request size (read-ahead), so a header of
// several MB costs a handful of requests, and nothing past the last read
// block is fetched.
package httprange

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

const (
	firstBlock = 64 << 10 // the first request: small headers end here
	maxBlock   = 4 << 20  // read-ahead cap
)

// Reader reads a remote file by byte ranges. It is safe for concurrent use.
type Reader struct {
	ctx    context.Context
	client *http.Client
	url    string
	size   int64

	mu       sync.Mutex
	buf      []byte // bytes [bufOff, bufOff+len(buf)) of the file
	bufOff   int64
	block    int
	requests int
	fetched  int64
}

// Open issues the first range request (bytes 0..64 KiB) and learns the
// file size from its Content-Range. A server that ignores Range is refused
// rather than downloaded whole. client nil means http.DefaultClient.
func Open(ctx context.Context, client *http.Client, url string) (*Reader, error) {
	if client == nil {
		client = http.DefaultClient
	}
	r := &Reader{ctx: ctx, client: client, url: url, size: -1, block: firstBlock}
	body, off, total, err := r.get(0, firstBlock)
	if err != nil {
		return nil, err
	}
	r.size, r.buf, r.bufOff = total, body, off
	return r, nil
}

// Size is the file's length.
func (r *Reader) Size() int64 { return r.size }

// Stats reports the requests made and the body bytes received.
func (r *Reader) Stats() (requests int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, r.fetched
}

// ReadAt implements io.ReaderAt.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("httprange: negative offset %d", off)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for n < len(p) {
		cur := off + int64(n)
		if cur >= r.size {
			return n, io.EOF
		}
		if cur >= r.bufOff && cur < r.bufOff+int64(len(r.buf)) {
			n += copy(p[n:], r.buf[cur-r.bufOff:])
			continue
		}
		// A read at or shortly after the buffer's end is sequential (the
		// GGUF reader skips over strings it does not keep): double the
		// read-ahead. A jump starts over small.
		if end := r.bufOff + int64(len(r.buf)); cur >= end && cur-end < int64(r.block) {
			r.block = min(2*r.block, maxBlock)
		} else {
			r.block = firstBlock
		}
		want := max(len(p)-n, r.block)
		body, bodyOff, _, err := r.get(cur, want)
		if err != nil {
			return n, err
		}
		r.buf, r.bufOff = body, bodyOff
	}
	return n, nil
}

// get fetches [off, off+n) clipped to the file, returning the body, its
// offset and the file size from Content-Range.
func (r *Reader) get(off int64, n int) ([]byte, int64, int64, error) {
	end := off + int64(n) - 1
	if r.size >= 0 {
		end = min(end, r.size-1)
	}
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("httprange: %w", err)
	}
	rng := fmt.Sprintf("bytes=%d-%d", off, end)
	req.Header.Set("Range", rng)
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("httprange: GET %s (%s): %w", r.url, rng, err)
	}
	defer resp.Body.Close()
	r.requests++
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		return nil, 0, 0, fmt.Errorf("httprange: %s ignored the Range header (status 200); refusing to download the whole file", r.url)
	default:
		return nil, 0, 0, fmt.Errorf("httprange: GET %s (%s): %s", r.url, rng, resp.Status)
	}
	start, last, total, err := parseContentRange(resp.Header.Get("Content-Range"))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("httprange: %s: %w", r.url, err)
	}
	if start != off || last > end || (r.size >= 0 && total != r.size) {
		return nil, 0, 0, fmt.Errorf("httprange: %s answered %q to %s (file size was %d)", r.url, resp.Header.Get("Content-Range"), rng, r.size)
	}
	body := make([]byte, last-start+1)
	got, err := io.ReadFull(resp.Body, body)
	r.fetched += int64(got)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("httprange: GET %s (%s): body: %w", r.url, rng, err)
	}
	return body, start, total, nil
}

// parseContentRange reads "bytes a-b/total".
func parseContentRange(s string) (start, last, total int64, err error) {
	bad := func() (int64, int64, int64, error) {
		return 0, 0, 0, errors.New("bad Content-Range " + strconv.Quote(s))
	}
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return bad()
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return bad()
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return bad()
	}
	var e1, e2, e3 error
	start, e1 = strconv.ParseInt(a, 10, 64)
	last, e2 = strconv.ParseInt(b, 10, 64)
	total, e3 = strconv.ParseInt(tot, 10, 64)
	if e1 != nil || e2 != nil || e3 != nil || start < 0 || last < start || total <= last {
		return bad()
	}
	return start, last, total, nil
}
