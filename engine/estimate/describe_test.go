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
	"reflect"
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

// llamaCppTypes are llama.cpp's ggml type traits (elements per block, bytes per block) for the
// types the shared test models use, written out here rather than read from package ggml, so
// that a wrong entry there, or a wrong size computation in the GGUF reader, fails the test.
var llamaCppTypes = map[string][2]int64{
	"F32": {1, 4}, "F16": {1, 2}, "Q4_0": {32, 18}, "Q8_0": {32, 34}, "Q4_K": {256, 144}, "Q6_K": {256, 210},
}

// tinyModel is one shared test model as the test data README (§2) describes it: its shape and
// the type llama-quantize gave each matrix (norms, biases and rope_freqs are F32).
type tinyModel struct {
	name, ft                             string
	vocab, embd, heads, kvHeads, headDim int
	ff, ctx                              int
	tied, qkvBias, ropeFreqs             bool
	matrices                             string            // type of every matrix not in override
	override                             map[string]string // tensor name → type
	fileBytes                            int64             // the README's file size
}

var tinyModels = []tinyModel{
	{name: "tiny-llama-spm-f16", ft: "F16", vocab: 32000, embd: 256, heads: 4, kvHeads: 2, headDim: 64, ff: 768, ctx: 4096,
		tied: true, matrices: "F16", fileBytes: 20260160},
	{name: "tiny-llama-spm-q4_0", ft: "Q4_0", vocab: 32000, embd: 256, heads: 4, kvHeads: 2, headDim: 64, ff: 768, ctx: 4096,
		tied: true, matrices: "Q4_0", override: map[string]string{"token_embd.weight": "Q6_K"}, fileBytes: 8335200},
	{name: "tiny-llama-spm-q4_k_m", ft: "Q4_K_M", vocab: 32000, embd: 256, heads: 4, kvHeads: 2, headDim: 64, ff: 768, ctx: 4096,
		tied: true, matrices: "Q4_K", override: map[string]string{
			"token_embd.weight": "Q6_K", "blk.1.attn_v.weight": "Q6_K", "blk.1.ffn_down.weight": "Q6_K"},
		fileBytes: 8394336},
	{name: "tiny-llama3-q8_0", ft: "Q8_0", vocab: 128256, embd: 256, heads: 2, kvHeads: 1, headDim: 128, ff: 512, ctx: 8192,
		tied: true, ropeFreqs: true, matrices: "Q8_0", fileBytes: 43964032},
	{name: "tiny-qwen2-q4_0", ft: "Q4_0", vocab: 50257, embd: 256, heads: 4, kvHeads: 2, headDim: 64, ff: 512, ctx: 4096,
		qkvBias: true, matrices: "Q4_0", override: map[string]string{"output.weight": "Q6_K"}, fileBytes: 20232576},
}

// weights adds up the model's tensors from its shape, by hand.
func (m tinyModel) weights() int64 {
	bytes := func(typ string, elems int) int64 {
		tr := llamaCppTypes[typ]
		return int64(elems) / tr[0] * tr[1]
	}
	matrix := func(name string, rows, cols int) int64 {
		typ := m.matrices
		if o, ok := m.override[name]; ok {
			typ = o
		}
		return bytes(typ, rows*cols)
	}
	e, q, kv := m.embd, m.heads*m.headDim, m.kvHeads*m.headDim
	n := matrix("token_embd.weight", m.vocab, e) + bytes("F32", e) // + output_norm
	if !m.tied {
		n += matrix("output.weight", m.vocab, e)
	}
	if m.ropeFreqs {
		n += bytes("F32", m.headDim/2)
	}
	for i := range 2 {
		blk := fmt.Sprintf("blk.%d.", i)
		n += 2 * bytes("F32", e) // attn_norm, ffn_norm
		n += matrix(blk+"attn_q.weight", q, e) + matrix(blk+"attn_k.weight", kv, e) +
			matrix(blk+"attn_v.weight", kv, e) + matrix(blk+"attn_output.weight", e, q)
		n += matrix(blk+"ffn_gate.weight", m.ff, e) + matrix(blk+"ffn_up.weight", m.ff, e) +
			matrix(blk+"ffn_down.weight", e, m.ff)
		if m.qkvBias {
			n += bytes("F32", q+2*kv)
		}
	}
	return n
}

// FromFile reads the shared test models' header only; its weights and shape must match what
// the models were built with, and the hyper-parameters what the loader reads from the whole file.
func TestFromFileTestModels(t *testing.T) {
	dir := filepath.Join(testdataDir(t), "models")
	for _, m := range tinyModels {
		path := filepath.Join(dir, m.name+".gguf")
		d, err := FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		hp, err := model.HParamsFromGGUF(f)
		dataOffset, alignment, tensors := int64(f.DataOffset), int64(f.Alignment), int64(len(f.Tensors))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != m.fileBytes {
			t.Fatalf("%s is %d bytes, not the README's %d: the fixture changed", m.name, st.Size(), m.fileBytes)
		}
		want := m.weights()
		// The hand count must also fill the file's data section, up to each tensor's padding.
		if pad := st.Size() - dataOffset - want; pad < 0 || pad >= alignment*tensors {
			t.Errorf("%s: hand-counted weights %d leave %d bytes of the %d-byte data section", m.name, want, pad, st.Size()-dataOffset)
		}
		if d.WeightsBytes != want {
			t.Errorf("%s: weights %d, want %d (llama.cpp's type sizes)", m.name, d.WeightsBytes, want)
		}
		h := d.HParams
		if !reflect.DeepEqual(h, hp) || h.Vocab != m.vocab || h.Embd != m.embd || h.Layers != 2 || h.Heads != m.heads || h.KVHeads != m.kvHeads ||
			h.HeadDim != m.headDim || h.FF != m.ff || h.CtxTrain != m.ctx || h.TiedOutput != m.tied || h.QKVBias != m.qkvBias {
			t.Errorf("%s: header %+v, loader %+v", m.name, h, hp)
		}
		if !d.Exact || !d.Runnable || d.FileType != m.ft {
			t.Errorf("%s: exact %v runnable %v type %s, want exact, runnable, %s", m.name, d.Exact, d.Runnable, d.FileType, m.ft)
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
	if !reflect.DeepEqual(d.HParams, local.HParams) || d.WeightsBytes != local.WeightsBytes || d.WeightsBytes < 4e9 {
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
	if !gemma.Runnable || gemma.HParams.Window != 1024 || gemma.HParams.HeadDim != 256 || gemma.HParams.SWAPattern != 6 || gemma.HParams.RopeBaseLocal != 10000 {
		t.Fatalf("gemma %+v", gemma)
	}
}

// Architectures without a forward pass here are still estimated from the
// standard metadata keys.
func TestFromFileOtherArch(t *testing.T) {
	w := gguf.NewWriter()
	for k, v := range map[string]any{
		"general.architecture": "olmo2", "general.file_type": uint32(15),
		"olmo2.block_count": uint32(2), "olmo2.embedding_length": uint32(256),
		"olmo2.attention.head_count": uint32(4), "olmo2.attention.head_count_kv": uint32(2),
		"olmo2.attention.key_length": uint32(128), "olmo2.feed_forward_length": uint32(512),
		"olmo2.context_length": uint32(8192), "olmo2.attention.sliding_window": uint32(4096),
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
