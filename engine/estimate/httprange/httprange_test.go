package httprange

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestReadAtMatchesFile(t *testing.T) {
	data := make([]byte, 3<<20+12345)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "f.bin", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	r, err := Open(context.Background(), srv.Client(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if r.Size() != int64(len(data)) {
		t.Fatalf("size %d", r.Size())
	}
	// Sequential small reads, then random reads across block boundaries.
	buf := make([]byte, 1000)
	for off := 0; off < 300_000; off += 1000 {
		if n, err := r.ReadAt(buf, int64(off)); n != 1000 || err != nil || !bytes.Equal(buf, data[off:off+1000]) {
			t.Fatalf("sequential read at %d: %d %v", off, n, err)
		}
	}
	reqs, _ := r.Stats()
	if reqs > 4 {
		t.Errorf("%d requests for 300 KB read sequentially", reqs)
	}
	for range 200 {
		off := rng.IntN(len(data))
		n := rng.IntN(200_000)
		p := make([]byte, n)
		got, err := r.ReadAt(p, int64(off))
		want := min(n, len(data)-off)
		if got != want || !bytes.Equal(p[:got], data[off:off+want]) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", n, off, got, err)
		}
		if want < n && err != io.EOF {
			t.Fatalf("short read at the end without io.EOF: %v", err)
		}
	}
	if n, err := r.ReadAt(buf, int64(len(data))); n != 0 || err != io.EOF {
		t.Fatalf("read at EOF: %d %v", n, err)
	}
	if _, err := r.ReadAt(buf, -1); err == nil {
		t.Fatal("negative offset accepted")
	}
}

func TestParseContentRange(t *testing.T) {
	if a, b, n, err := parseContentRange("bytes 0-65535/4000000000"); err != nil || a != 0 || b != 65535 || n != 4000000000 {
		t.Fatalf("%d %d %d %v", a, b, n, err)
	}
	for _, bad := range []string{"", "bytes */100", "bytes 5-4/100", "bytes 0-100/100", "items 0-1/2", "bytes 0-1"} {
		if _, _, _, err := parseContentRange(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
