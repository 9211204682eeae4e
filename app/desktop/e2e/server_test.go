package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fileServer serves the catalog's files the way a CDN does (Range,
// If-Range, ETag), slowly enough that a download's progress shows, and
// can drop the connection in the middle of a body, once, so the app's
// download must resume.
type fileServer struct {
	files map[string]string // URL path → file
	// bytesPerSec paces bodies (0: as fast as possible).
	bytesPerSec int64

	mu       sync.Mutex
	dropNext map[string]float64 // URL path → fraction of the file after which to drop
	log      []served
}

// served is one request, as the e2e script reads it from /ctl/requests.
type served struct {
	Path    string `json:"path"`
	Method  string `json:"method"`
	Range   string `json:"range,omitempty"`
	IfRange string `json:"ifRange,omitempty"`
	Status  int    `json:"status"`
	Start   int64  `json:"start"`   // first byte of the body
	Sent    int64  `json:"sent"`    // body bytes written
	Dropped bool   `json:"dropped"` // the connection was cut mid-body
}

func (s *fileServer) armDrop(path string, fraction float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropNext == nil {
		s.dropNext = map[string]float64{}
	}
	s.dropNext[path] = fraction
}

func (s *fileServer) requests() []served {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]served(nil), s.log...)
}

func (s *fileServer) record(r served) {
	s.mu.Lock()
	s.log = append(s.log, r)
	s.mu.Unlock()
}

func (s *fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := s.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	data, err := os.ReadFile(name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	size := int64(len(data))
	etag := fmt.Sprintf(`"%x-%d"`, size, len(r.URL.Path))
	rec := served{Path: r.URL.Path, Method: r.Method, Range: r.Header.Get("Range"), IfRange: r.Header.Get("If-Range")}
	defer func() { s.record(rec) }()

	h := w.Header()
	h.Set("Accept-Ranges", "bytes")
	h.Set("ETag", etag)
	h.Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
	h.Set("Content-Type", "application/octet-stream")
	start, end := int64(0), size-1
	status := http.StatusOK
	if rg := rec.Range; rg != "" && (rec.IfRange == "" || rec.IfRange == etag) {
		a, b, ok := parseRange(rg, size)
		if !ok {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			rec.Status = http.StatusRequestedRangeNotSatisfiable
			w.WriteHeader(rec.Status)
			return
		}
		start, end, status = a, b, http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, size))
	}
	body := data[start : end+1]
	h.Set("Content-Length", strconv.Itoa(len(body)))
	rec.Status, rec.Start = status, start
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}

	// A drop is armed for whole-file bodies only, so the header reads of
	// an estimate (small ranges) do not use it up.
	dropAt := int64(-1)
	s.mu.Lock()
	if frac, ok := s.dropNext[r.URL.Path]; ok && end == size-1 && start == 0 {
		dropAt = int64(frac * float64(size))
		delete(s.dropNext, r.URL.Path)
	}
	s.mu.Unlock()

	const chunk = 64 << 10
	flusher, _ := w.(http.Flusher)
	began := time.Now()
	for off := int64(0); off < int64(len(body)); {
		n := min(int64(chunk), int64(len(body))-off)
		if dropAt >= 0 && start+off+n > dropAt {
			n = max(dropAt-start-off, 0)
		}
		if n > 0 {
			if _, err := w.Write(body[off : off+n]); err != nil {
				return // the client went away (a cancelled download)
			}
			off += n
			rec.Sent = off
		}
		if flusher != nil {
			flusher.Flush()
		}
		if dropAt >= 0 && start+off >= dropAt {
			rec.Dropped = true
			// Panicking with ErrAbortHandler makes net/http cut the
			// connection without finishing the body: a network failure
			// as the client sees it.
			panic(http.ErrAbortHandler)
		}
		if s.bytesPerSec > 0 {
			due := began.Add(time.Duration(float64(off) / float64(s.bytesPerSec) * float64(time.Second)))
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Until(due)):
			}
		}
	}
}

// parseRange reads one "bytes=a-b", "bytes=a-" or "bytes=-n" range.
func parseRange(v string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(v, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(spec, "-")
	if !found {
		return 0, 0, false
	}
	if a == "" { // the last b bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size - 1, true
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 || start >= size {
		return 0, 0, false
	}
	end = size - 1
	if b != "" {
		e, err := strconv.ParseInt(b, 10, 64)
		if err != nil || e < start {
			return 0, 0, false
		}
		end = min(e, size-1)
	}
	return start, end, true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
