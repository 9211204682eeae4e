package synth

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/half"
	"nibble/engine/parallel"
	"nibble/engine/quant"
	"nibble/internal/testdata"
)

func vocabPath(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(testdata.Dir(t), "tokenizer", name)
}

func tinyOptions(t *testing.T, arch string) Options {
	o := DefaultOptions(arch)
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 64, 4, 2, 128
	o.VocabFrom = vocabPath(t, "ggml-vocab-llama-spm.gguf")
	o.Seed = 42
	return o
}

func generate(t *testing.T, o Options) (string, *gguf.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := Generate(path, o); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path, f
}

// wantTensors is what llama.cpp's loader requires for the arch, written out
// independently of layout().
func wantTensors(arch string, o Options, vocab uint64, tied bool) map[string][]uint64 {
	e, hd := uint64(o.Embd), uint64(o.Embd/o.Heads)
	q, kv, ff := uint64(o.Heads)*hd, uint64(o.KVHeads)*hd, uint64(o.FF)
	m := map[string][]uint64{"token_embd.weight": {e, vocab}, "output_norm.weight": {e}}
	if !tied {
		m["output.weight"] = []uint64{e, vocab}
	}
	for l := 0; l < o.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		m[p+"attn_norm.weight"] = []uint64{e}
		m[p+"attn_q.weight"] = []uint64{e, q}
		m[p+"attn_k.weight"] = []uint64{e, kv}
		m[p+"attn_v.weight"] = []uint64{e, kv}
		m[p+"attn_output.weight"] = []uint64{q, e}
		m[p+"ffn_norm.weight"] = []uint64{e}
		m[p+"ffn_gate.weight"] = []uint64{e, ff}
		m[p+"ffn_up.weight"] = []uint64{e, ff}
		m[p+"ffn_down.weight"] = []uint64{ff, e}
		if arch == "qwen2" {
			m[p+"attn_q.bias"] = []uint64{q}
			m[p+"attn_k.bias"] = []uint64{kv}
			m[p+"attn_v.bias"] = []uint64{kv}
		}
	}
	return m
}

func checkModel(t *testing.T, f *gguf.File, o Options, tied bool) {
	t.Helper()
	src, err := gguf.Open(o.VocabFrom)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	vocab, _ := src.ArrayLen("tokenizer.ggml.tokens")

	want := wantTensors(o.Arch, o, uint64(vocab), tied)
	if len(f.Tensors) != len(want) {
		t.Errorf("%d tensors, want %d", len(f.Tensors), len(want))
	}
	for name, dims := range want {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		wantType := o.Type
		if len(dims) == 1 {
			wantType = ggml.F32 // norms and biases
		}
		if !reflect.DeepEqual(ti.Dims, dims) || ti.Type != wantType {
			t.Errorf("%s: %v %s, want %v %s", name, ti.Dims, ti.Type, dims, wantType)
		}
		if len(f.TensorData(ti)) != int(ti.Size) {
			t.Errorf("%s: no data", name)
		}
	}

	a := o.Arch + "."
	hd := uint64(o.Embd / o.Heads)
	u32 := map[string]uint64{
		"general.file_type": uint64(fileType(o.Type, o.ExpertType)), a + "context_length": uint64(o.Ctx),
		a + "embedding_length": uint64(o.Embd), a + "block_count": uint64(o.Layers),
		a + "feed_forward_length": uint64(o.FF), a + "attention.head_count": uint64(o.Heads),
		a + "attention.head_count_kv": uint64(o.KVHeads), a + "rope.dimension_count": hd,
		a + "attention.key_length": hd, a + "attention.value_length": hd, a + "vocab_size": uint64(vocab),
	}
	for k, v := range u32 {
		// llama.cpp checks exact types: these must be u32.
		if got := f.KV[k]; got.Type != gguf.Uint32 || got.Data != uint32(v) {
			t.Errorf("%s = %v %v, want u32 %d", k, got.Type, got.Data, v)
		}
	}
	for _, k := range []string{a + "rope.freq_base", a + "attention.layer_norm_rms_epsilon"} {
		if f.KV[k].Type != gguf.Float32 {
			t.Errorf("%s must be f32, got %v", k, f.KV[k].Type)
		}
	}
	if f.Arch() != o.Arch {
		t.Errorf("arch %q", f.Arch())
	}
	if _, ok := f.String("general.name"); !ok {
		t.Errorf("no general.name")
	}
	// Every tokenizer key is copied unchanged and in order.
	var srcKeys, gotKeys []string
	for _, k := range src.Keys {
		if strings.HasPrefix(k, "tokenizer.") {
			srcKeys = append(srcKeys, k)
			if !reflect.DeepEqual(f.KV[k], src.KV[k]) {
				t.Errorf("%s differs from the vocab file", k)
			}
		}
	}
	for _, k := range f.Keys {
		if strings.HasPrefix(k, "tokenizer.") {
			gotKeys = append(gotKeys, k)
		}
	}
	if len(srcKeys) < 5 || !reflect.DeepEqual(srcKeys, gotKeys) {
		t.Errorf("tokenizer keys %v, want %v", gotKeys, srcKeys)
	}
}

func TestTinyLlama(t *testing.T) {
	o := tinyOptions(t, "llama")
	var calls int
	var last, total int64
	o.Progress = func(done, tot int64) {
		if done < last || done > tot {
			t.Errorf("progress %d/%d after %d", done, tot, last)
		}
		calls, last, total = calls+1, done, tot
	}
	_, f := generate(t, o)
	checkModel(t, f, o, true)
	var sum int64
	for _, ti := range f.Tensors {
		sum += int64(ti.Size)
	}
	if calls != len(f.Tensors) || last != total || total != sum {
		t.Errorf("progress: %d calls, ended %d/%d, want %d calls ending at %d", calls, last, total, len(f.Tensors), sum)
	}
	if base, _ := f.Float("llama.rope.freq_base"); base != 500000 {
		t.Errorf("rope base %g", base)
	}
	if _, untied := f.Tensor("output.weight"); untied {
		t.Errorf("llama default should be tied")
	}
}

func TestTinyQwen2(t *testing.T) {
	o := tinyOptions(t, "qwen2")
	o.Type = ggml.Q4_0
	_, f := generate(t, o)
	checkModel(t, f, o, false)
	if base, _ := f.Float("qwen2.rope.freq_base"); base != 1e6 {
		t.Errorf("rope base %g", base)
	}
	if eps, _ := f.Float("qwen2.attention.layer_norm_rms_epsilon"); float32(eps) != 1e-6 {
		t.Errorf("rms eps %g", eps)
	}
	// Each Q4_0 row is the reference quantization of the generated floats.
	ti, _ := f.Tensor("blk.1.ffn_down.weight")
	cols := int(ti.Dims[0])
	rb := ti.Type.RowBytes(cols)
	src := make([]float32, cols)
	want := make([]byte, rb)
	for _, r := range []int{0, 17, int(ti.Dims[1]) - 1} {
		fillRow(src, nameSeed(o.Seed, ti.Name), r, dist{0, 0.08 * 2})
		if err := quant.Quantize(ggml.Q4_0, want, src); err != nil {
			t.Fatal(err)
		}
		if got := f.TensorData(ti)[r*rb : (r+1)*rb]; !bytes.Equal(got, want) {
			t.Errorf("row %d is not the Q4_0 quantization of its generated values", r)
		}
	}
}

// Distributions follow testdata README §2, projections scaled by sqrt(256/embd).
func TestDistributions(t *testing.T) {
	o := tinyOptions(t, "qwen2")
	o.Type = ggml.F16
	_, f := generate(t, o)
	if len(f.Tensors) < 20 {
		t.Fatalf("%d tensors", len(f.Tensors))
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		name := ti.Name
		var ms [2]float64 // mean, std
		switch {
		case name == "token_embd.weight" || name == "output.weight":
			ms = [2]float64{0, 0.4}
		case strings.HasSuffix(name, "norm.weight"):
			ms = [2]float64{1, 0.1}
		case strings.HasSuffix(name, ".bias"):
			ms = [2]float64{0, 0.1}
		default: // projections: 0.08 * sqrt(256/64)
			ms = [2]float64{0, 0.16}
		}
		vals := decode(ti, f.TensorData(ti))
		var sum, sq float64
		for _, v := range vals {
			sum += v
		}
		mean := sum / float64(len(vals))
		for _, v := range vals {
			sq += (v - mean) * (v - mean)
		}
		std := math.Sqrt(sq / float64(len(vals)))
		// Tolerances: 5 standard errors of the mean, 25% on the std (biases
		// have only 32 elements).
		se := ms[1] / math.Sqrt(float64(len(vals)))
		if math.Abs(mean-ms[0]) > 5*se || math.Abs(std-ms[1]) > 0.25*ms[1] {
			t.Errorf("%s: mean %.4f std %.4f over %d values, want %.2f, %.3f", name, mean, std, len(vals), ms[0], ms[1])
		}
	}
}

func decode(ti *gguf.TensorInfo, b []byte) []float64 {
	var out []float64
	switch ti.Type {
	case ggml.F32:
		for i := 0; i+4 <= len(b); i += 4 {
			out = append(out, float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))))
		}
	case ggml.F16:
		for i := 0; i+2 <= len(b); i += 2 {
			out = append(out, float64(half.ToFloat32(binary.LittleEndian.Uint16(b[i:]))))
		}
	}
	return out
}

func TestDeterministic(t *testing.T) {
	o := tinyOptions(t, "llama")
	o.Type = ggml.Q8_0
	p1, _ := generate(t, o)
	p2, _ := generate(t, o)
	o.Seed++
	p3, _ := generate(t, o)
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	b3, _ := os.ReadFile(p3)
	if !bytes.Equal(b1, b2) {
		t.Errorf("same seed, different files")
	}
	if bytes.Equal(b1, b3) || len(b1) != len(b3) {
		t.Errorf("another seed should change the weights only")
	}
}

// The bytes do not depend on how many threads generate them.
func TestThreadIndependent(t *testing.T) {
	s := &tensorSpec{name: "x.weight", typ: ggml.Q4_0, dims: []uint64{96, 50}, d: dist{0, 1}}
	var outs [][]byte
	for _, threads := range []int{1, 3} {
		p := parallel.NewPool(threads)
		dst := make([]byte, s.bytes())
		if err := fillTensor(p, dst, s, 7); err != nil {
			t.Fatal(err)
		}
		p.Close()
		outs = append(outs, dst)
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Errorf("1 and 3 threads differ")
	}
}

func TestOptionErrors(t *testing.T) {
	vocab := vocabPath(t, "ggml-vocab-llama-spm.gguf")
	base := func() Options {
		o := DefaultOptions("llama")
		o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.VocabFrom = 1, 64, 4, 2, 96, vocab
		return o
	}
	cases := []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.Arch = "gemma" }, `arch "gemma"`},
		{func(o *Options) { o.Layers = 0 }, "layers = 0"},
		{func(o *Options) { o.Embd = 1 << 20 }, "embd = 1048576"},
		{func(o *Options) { o.Heads = 5 }, "not divisible by heads 5"},
		{func(o *Options) { o.KVHeads = 3 }, "not divisible by kv-heads 3"},
		{func(o *Options) { o.Embd, o.Heads, o.KVHeads = 48, 8, 8 }, "head dim 6"},
		{func(o *Options) { o.Type, o.FF = ggml.Q4_0, 100 }, "multiples of 32"},
		{func(o *Options) { o.Type = ggml.Q4_K }, "weight type Q4_K"},
		{func(o *Options) { o.Type = ggml.F32 }, "weight type F32"},
		{func(o *Options) { o.Ctx = -1 }, "ctx = -1"},
		{func(o *Options) { o.RopeBase = -1 }, "rope base"},
		{func(o *Options) { o.AttnScale = -1 }, "attention scale -1"},
		{func(o *Options) { o.KeyOutliers = 17 }, "key outliers 17"},
		{func(o *Options) { o.KeyOutliers = 2 }, "key outlier gain 0"},
		{func(o *Options) { o.VocabFrom = "" }, "VocabFrom"},
		{func(o *Options) { o.VocabFrom = "/nonexistent.gguf" }, "no such file"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		o := base()
		c.mod(&o)
		path := filepath.Join(dir, "x.gguf")
		err := Generate(path, o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
		if _, statErr := os.Stat(path); statErr == nil {
			t.Errorf("%q: a file was written despite the error", c.want)
		}
	}
	if err := Generate(filepath.Join(dir, "ok.gguf"), base()); err != nil {
		t.Errorf("base options rejected: %v", err)
	}
}

// KeyOutliers scales the same channels of every KV head in attn_k (and no
// other tensor); AttnScale is written where the loader reads it.
func TestKeyOutliersAndAttnScale(t *testing.T) {
	o := tinyOptions(t, "llama")
	o.Type, o.AttnScale, o.KeyOutliers, o.KeyOutlierGain = ggml.F16, 1, 2, 20
	_, f := generate(t, o)
	if v, ok := f.Float("llama.attention.scale"); !ok || v != 1 {
		t.Errorf("llama.attention.scale = %v (%v), want 1", v, ok)
	}
	hd := o.Embd / o.Heads
	want := outlierChannels(2, hd)
	for _, name := range []string{"blk.0.attn_k.weight", "blk.1.attn_k.weight", "blk.0.attn_q.weight"} {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		vals := decode(ti, f.TensorData(ti))
		cols := int(ti.Dims[0])
		for r := 0; r < len(vals)/cols; r++ {
			var sq float64
			for _, v := range vals[r*cols : (r+1)*cols] {
				sq += v * v
			}
			rms := math.Sqrt(sq / float64(cols))
			outlier := strings.Contains(name, "attn_k") && want[r%hd]
			if lo, hi := 0.1, 0.25; outlier {
				lo, hi = 20*lo, 20*hi
				if rms < lo || rms > hi {
					t.Errorf("%s row %d (outlier): rms %.3f, want %.1f..%.1f", name, r, rms, lo, hi)
				}
			} else if rms < lo || rms > hi {
				t.Errorf("%s row %d: rms %.3f, want %.1f..%.2f", name, r, rms, lo, hi)
			}
		}
	}
	if len(want) != 2 {
		t.Fatalf("outlier channels %v, want 2", want)
	}
}
