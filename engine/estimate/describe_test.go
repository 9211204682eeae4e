package estimate

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/internal/testmodel"
)

func TestFromFileTestModels(t *testing.T) {
	dir := filepath.Join(testdataDir(t), "models")
	for _, c := range []struct {
		name, ft string
		vocab    int
	}{
		{"tiny-llama-spm-f16", "F16", 32000}, {"tiny-llama-spm-q4_0", "Q4_0", 32000},
		{"tiny-llama-spm-q4_k_m", "Q4_K_M", 32000}, {"tiny-llama3-q8_0", "Q8_0", 128256},
		{"tiny-qwen2-q4_0", "Q4_0", 50257},
	} {
		path := filepath.Join(dir, c.name+".gguf")
		d, err := FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// The same numbers the loader gets from the fully opened file.
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		hp, err := model.HParamsFromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		var weights int64
		for _, ti := range f.Tensors {
			weights += int64(ti.Size)
		}
		f.Close()
		if d.HParams != hp || d.WeightsBytes != weights || !d.Exact || !d.Runnable || d.FileType != c.ft || hp.Vocab != c.vocab {
			t.Errorf("%s: got %+v weights %d type %s, want %+v weights %d type %s", c.name, d.HParams, d.WeightsBytes, d.FileType, hp, weights, c.ft)
		}
		if st, _ := os.Stat(path); d.WeightsBytes >= st.Size() || d.WeightsBytes < st.Size()*8/10 {
			t.Errorf("%s: weights %d implausible for a %d-byte file", c.name, d.WeightsBytes, st.Size())
		}
	}
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r     io.ReaderAt
	mu    sync.Mutex
	bytes int64
	calls int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.mu.Lock()
	c.bytes += int64(n)
	c.calls++
	c.mu.Unlock()
	return n, err
}

// A Llama-3.2-1B-shaped F16 model of 2.47 GB, data all hole: describing it
// reads only its header.
func TestHeaderOnlyIsFastAndSmall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sparse-1b.gguf")
	dataOff := testmodel.WriteSparse(t, path, 16, 2048, 32, 8, 8192, 128256, ggml.F16, false, nil)
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	if st.Size() < 2<<30 {
		t.Fatalf("file is %d bytes, want multi-GB", st.Size())
	}
	best := time.Hour
	var cr *countingReaderAt
	var d Desc
	for range 3 {
		cr = &countingReaderAt{r: fh}
		start := time.Now()
		d, err = fromReader(cr, st.Size(), path, "sparse-1b.gguf")
		best = min(best, time.Since(start))
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%.2f GB file, header %d bytes: described in %v reading %d bytes in %d calls", float64(st.Size())/1e9, dataOff, best, cr.bytes, cr.calls)
	if best > 50*time.Millisecond {
		t.Errorf("took %v, want < 50 ms", best)
	}
	if cr.bytes >= 1<<20 {
		t.Errorf("read %d bytes, want < 1 MiB", cr.bytes)
	}
	// F16 1B: 1.236e9 parameters, 2 bytes each (norms F32).
	if d.Params < 1_230_000_000 || d.Params > 1_240_000_000 || d.WeightsBytes != int64(st.Size())-int64(dataOff) || d.HParams.Vocab != 128256 {
		t.Errorf("desc %+v params %d weights %d", d.HParams, d.Params, d.WeightsBytes)
	}
}

// rangeLog serves a file with http.ServeContent and records every Range.
type rangeLog struct {
	mu     sync.Mutex
	ranges []string
	bytes  int64
}

type countingResponse struct {
	http.ResponseWriter
	n *int64
}

func (c countingResponse) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	*c.n += int64(n)
	return n, err
}

func serveFile(t *testing.T, path string, log *rangeLog) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fh, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer fh.Close()
		log.mu.Lock()
		log.ranges = append(log.ranges, r.Header.Get("Range"))
		log.mu.Unlock()
		var n int64
		http.ServeContent(countingResponse{w, &n}, r, filepath.Base(path), time.Time{}, fh)
		log.mu.Lock()
		log.bytes += n
		log.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func rangeStart(t *testing.T, h string) int64 {
	s, _, ok := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	v, err := strconv.ParseInt(s, 10, 64)
	if !ok || err != nil {
		t.Fatalf("request without a byte range: %q", h)
	}
	return v
}

func TestFromURLReadsOnlyTheHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sparse-8b.gguf")
	// Llama-3.1-8B shape at Q4_0: 4.6 GB of hole.
	dataOff := testmodel.WriteSparse(t, path, 32, 4096, 32, 8, 14336, 128256, ggml.Q4_0, false, nil)
	var log rangeLog
	srv := serveFile(t, path, &log)
	d, err := FromURL(context.Background(), srv.Client(), srv.URL+"/sparse-8b.gguf")
	if err != nil {
		t.Fatal(err)
	}
	srv.Close() // waits for the handlers: the log is complete
	local, err := FromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d.HParams != local.HParams || d.WeightsBytes != local.WeightsBytes || d.WeightsBytes < 4e9 {
		t.Fatalf("remote %+v %d, local %+v %d", d.HParams, d.WeightsBytes, local.HParams, local.WeightsBytes)
	}
	t.Logf("header %d bytes: %d requests %v, %d bytes served", dataOff, len(log.ranges), log.ranges, log.bytes)
	for _, h := range log.ranges {
		if rangeStart(t, h) >= int64(dataOff) {
			t.Errorf("request %q starts inside the tensor data (offset %d)", h, dataOff)
		}
	}
	if log.bytes > int64(dataOff)+64<<10 || log.bytes >= 1<<20 {
		t.Errorf("served %d bytes for a %d-byte header", log.bytes, dataOff)
	}
}

// A header of several MB (a 200k-token vocabulary) is fetched with growing
// read-ahead: a handful of requests, not one per 64 KiB.
func TestFromURLLargeHeader(t *testing.T) {
	tokens := make([]string, 200000)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("token-%d", i)
	}
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	dataOff := testmodel.WriteSparse(t, path, 8, 2048, 32, 8, 512, 200000, ggml.F16, false, map[string]any{"tokenizer.ggml.tokens": tokens})
	var log rangeLog
	srv := serveFile(t, path, &log)
	d, err := FromURL(context.Background(), srv.Client(), srv.URL+"/vocab.gguf")
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if d.HParams.Vocab != 200000 {
		t.Errorf("vocab %d (from the skipped tokens array's length)", d.HParams.Vocab)
	}
	t.Logf("header %d bytes: %d requests %v, %d bytes served", dataOff, len(log.ranges), log.ranges, log.bytes)
	for _, h := range log.ranges {
		if rangeStart(t, h) >= int64(dataOff) {
			t.Errorf("request %q starts inside the tensor data (offset %d)", h, dataOff)
		}
	}
	if len(log.ranges) > 7 {
		t.Errorf("%d requests for a %d-byte header: read-ahead not growing", len(log.ranges), dataOff)
	}
	if log.bytes > int64(dataOff)+4<<20 {
		t.Errorf("served %d bytes for a %d-byte header", log.bytes, dataOff)
	}
}

func TestFromURLRefusesWholeDownload(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, 1000)) // ignores Range: 200 with the whole body
	}))
	defer srv.Close()
	_, err := FromURL(context.Background(), srv.Client(), srv.URL+"/m.gguf")
	if err == nil || !strings.Contains(err.Error(), "ignored the Range header") {
		t.Fatalf("got %v", err)
	}
	srv404 := httptest.NewServer(http.NotFoundHandler())
	defer srv404.Close()
	if _, err := FromURL(context.Background(), srv404.Client(), srv404.URL+"/m.gguf"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("404: %v", err)
	}
}

func TestFromCatalog(t *testing.T) {
	d := catalogDesc(t, "llama-3.1-70b-instruct")
	if d.Exact || d.FileType != "Q4_K_M" || len(d.Alternatives) != 1 || d.Alternatives[0].FileType != "Q3_K_M" || !d.Runnable {
		t.Fatalf("%+v", d)
	}
	if math.Abs(float64(d.WeightsBytes)-42.52e9) > 1e7 {
		t.Fatalf("weights %d", d.WeightsBytes)
	}
	gemma := catalogDesc(t, "gemma-3-12b-it")
	if gemma.Runnable || gemma.HParams.Window != 1024 || gemma.HParams.HeadDim != 256 {
		t.Fatalf("gemma %+v", gemma)
	}
}

// Architectures without a forward pass here are still estimated from the
// standard metadata keys.
func TestFromFileOtherArch(t *testing.T) {
	w := gguf.NewWriter()
	for k, v := range map[string]any{
		"general.architecture": "gemma2", "general.file_type": uint32(15),
		"gemma2.block_count": uint32(2), "gemma2.embedding_length": uint32(256),
		"gemma2.attention.head_count": uint32(4), "gemma2.attention.head_count_kv": uint32(2),
		"gemma2.attention.key_length": uint32(128), "gemma2.feed_forward_length": uint32(512),
		"gemma2.context_length": uint32(8192), "gemma2.attention.sliding_window": uint32(4096),
		"tokenizer.ggml.tokens": []string{"a", "b", "c"},
	} {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddTensor("token_embd.weight", ggml.F32, []uint64{256, 3}, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "g.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	d, err := FromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hp := d.HParams
	if d.Runnable || d.FileType != "Q4_K_M" || hp.HeadDim != 128 || hp.KVHeads != 2 || hp.Window != 4096 || hp.Vocab != 3 || !hp.TiedOutput || d.WeightsBytes != 256*3*4 {
		t.Fatalf("%+v %+v", d, hp)
	}
	if _, err := Compute(d, Options{Ctx: 1024, KV: kv.Q4}); err != nil {
		t.Fatal(err)
	}
	// A file that is not a GGUF names itself in the error.
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	os.WriteFile(bad, []byte("not a gguf file at all"), 0o644)
	if _, err := FromFile(bad); err == nil || !strings.Contains(err.Error(), "bad.gguf") {
		t.Fatalf("bad file: %v", err)
	}
}
