package estimate

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"nibble/catalog"
	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/kv"
)

// tinyMoE is a mixture-of-experts file laid out as llama.cpp writes
// qwen3moe: per layer a router (ffn_gate_inp) and 3-D expert tensors
// ffn_{gate,up,down}_exps of n experts, expert counts in the arch keys.
type tinyMoE struct {
	arch         string
	layers       int
	embd, ff     int // ff: one expert's width
	experts      int
	used         int
	vocab        int
	tied         bool
	skip         map[string]bool   // keys left out
	override     map[string]uint64 // key → value instead of the default
	expertsDim   uint64            // the expert tensors' outermost dim (0: experts)
	extraTensors bool              // expert biases and a shared norm, as gpt-oss and Arctic have
}

func (m tinyMoE) write(t *testing.T) string {
	t.Helper()
	w := gguf.NewWriter()
	keys := map[string]any{
		"general.architecture": m.arch, "general.file_type": uint32(7),
		m.arch + ".block_count": uint32(m.layers), m.arch + ".embedding_length": uint32(m.embd),
		m.arch + ".attention.head_count": uint32(4), m.arch + ".attention.head_count_kv": uint32(2),
		m.arch + ".feed_forward_length": uint32(m.ff), m.arch + ".context_length": uint32(4096),
		m.arch + ".expert_count": uint32(m.experts), m.arch + ".expert_used_count": uint32(m.used),
		m.arch + ".vocab_size": uint32(m.vocab),
	}
	for k, v := range m.override {
		keys[m.arch+"."+k] = uint32(v)
	}
	for k, v := range keys {
		if m.skip[strings.TrimPrefix(k, m.arch+".")] {
			continue
		}
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	add := func(name string, typ ggml.Type, dims ...uint64) {
		if err := w.AddTensor(name, typ, dims, nil); err != nil {
			t.Fatal(err)
		}
	}
	e, f, n := uint64(m.embd), uint64(m.ff), m.expertsDim
	if n == 0 {
		n = uint64(m.experts)
	}
	add("token_embd.weight", ggml.Q8_0, e, uint64(m.vocab))
	if !m.tied {
		add("output.weight", ggml.Q8_0, e, uint64(m.vocab))
	}
	add("output_norm.weight", ggml.F32, e)
	for il := range m.layers {
		b := fmt.Sprintf("blk.%d.", il)
		add(b+"attn_norm.weight", ggml.F32, e)
		add(b+"attn_q.weight", ggml.Q8_0, e, e)
		add(b+"attn_k.weight", ggml.Q8_0, e, e/2)
		add(b+"attn_v.weight", ggml.Q8_0, e, e/2)
		add(b+"attn_output.weight", ggml.Q8_0, e, e)
		add(b+"ffn_norm.weight", ggml.F32, e)
		add(b+"ffn_gate_inp.weight", ggml.F32, e, uint64(m.experts))
		add(b+"ffn_gate_exps.weight", ggml.Q8_0, e, f, n)
		add(b+"ffn_up_exps.weight", ggml.Q8_0, e, f, n)
		add(b+"ffn_down_exps.weight", ggml.Q8_0, f, e, n)
		if m.extraTensors {
			add(b+"ffn_gate_exps.bias", ggml.F32, f, n)
			add(b+"ffn_norm_exps.weight", ggml.F32, e)
		}
	}
	path := filepath.Join(t.TempDir(), m.arch+".gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// q8 is llama.cpp's Q8_0 size of n elements: 34 bytes per 32.
func q8(n int) int64 { return int64(n) / 32 * 34 }

// The resident weights are every tensor; a token reads the non-expert
// tensors, Used/Count of the expert tensors and one row of an untied
// embedding table. Counted here by hand from llama.cpp's type sizes.
func TestExpertsResidentAndRead(t *testing.T) {
	for _, tied := range []bool{false, true} {
		m := tinyMoE{arch: "qwen3moe", layers: 2, embd: 128, ff: 32, experts: 8, used: 2, vocab: 100, tied: tied}
		d, err := FromFile(m.write(t))
		if err != nil {
			t.Fatal(err)
		}
		table := q8(m.embd * m.vocab)
		layer := 2*4*int64(m.embd) + q8(m.embd*m.embd)*2 + q8(m.embd*m.embd/2)*2 + 4*int64(m.embd*m.experts)
		experts := int64(m.layers) * 3 * int64(m.experts) * q8(m.embd*m.ff)
		resident := table + 4*int64(m.embd) + int64(m.layers)*layer + experts
		read := 4*int64(m.embd) + int64(m.layers)*layer + experts*2/8
		if tied {
			read += table // the output reads the whole table
		} else {
			resident += table
			read += table + table/int64(m.vocab) // output whole, embeddings one row
		}
		if d.WeightsBytes != resident || d.Experts != (Experts{Count: 8, Used: 2, Bytes: experts}) || d.ActiveBytes != read {
			t.Fatalf("tied %v: weights %d experts %+v active %d; want %d, {8 2 %d}, %d", tied, d.WeightsBytes, d.Experts, d.ActiveBytes, resident, experts, read)
		}
		if !d.SparseRead() {
			t.Errorf("tied %v: %d of %d bytes read is not shown as sparse", tied, read, resident)
		}
		// The memory verdict counts every expert; the read share is beside it.
		e, err := Compute(d, Options{Ctx: 256, KV: kv.Q8})
		if err != nil {
			t.Fatal(err)
		}
		if e.Weights != resident || e.Active != read || e.Total != e.Weights+e.KV+e.Scratch+e.Overhead {
			t.Fatalf("estimate %+v", e)
		}
		if got, want := e.ReadPerToken(), Human(read)+" read per token (2 of 8 experts)"; got != want {
			t.Errorf("ReadPerToken %q, want %q", got, want)
		}
		budget := Simulated(e.Total - 1)
		_, err = Check(d, Options{Ctx: 256, KV: kv.Q8}, budget)
		if err == nil || !strings.Contains(err.Error(), "all resident; "+e.ReadPerToken()) {
			t.Errorf("a mixture that does not fit by one byte: %v", err)
		}
		r, err := NewReport(d, Options{Ctx: 256, KV: kv.Q8}, Simulated(1<<30))
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := json.Marshal(r.JSON())
		if want := fmt.Sprintf(`"active_bytes":%d,"experts":8,"experts_used":2`, read); !strings.Contains(string(doc), want) {
			t.Errorf("JSON %s lacks %s", doc, want)
		}
	}
}

// gpt-oss keeps a bias per expert (2-D, experts outermost) and Arctic a
// norm shared by all experts (1-D): the first is an expert tensor, the
// second is read whole.
func TestExpertBiasesAndSharedNorms(t *testing.T) {
	m := tinyMoE{arch: "gpt-oss", layers: 1, embd: 128, ff: 32, experts: 4, used: 4, vocab: 64, tied: true, extraTensors: true}
	d, err := FromFile(m.write(t))
	if err != nil {
		t.Fatal(err)
	}
	want := 3*4*q8(128*32) + 4*32*4
	if d.Experts.Bytes != want {
		t.Fatalf("expert bytes %d, want %d (weights and biases)", d.Experts.Bytes, want)
	}
	// Every expert used: a token reads everything, and nothing is shown.
	if d.ActiveBytes != d.WeightsBytes || d.SparseRead() {
		t.Fatalf("all experts used: active %d of %d", d.ActiveBytes, d.WeightsBytes)
	}
}

// A file whose keys and expert tensors disagree is refused with the key or
// tensor named, never sized wrong (the header's hyper-parameters may refuse
// a bad count first, in their own words).
func TestExpertKeysMustMatchTensors(t *testing.T) {
	base := tinyMoE{arch: "qwen3moe", layers: 1, embd: 128, ff: 32, experts: 8, used: 2, vocab: 64}
	for name, c := range map[string]struct {
		m    func(tinyMoE) tinyMoE
		want []string
	}{
		"no count":     {func(m tinyMoE) tinyMoE { m.skip = map[string]bool{"expert_count": true}; return m }, []string{"blk.0.ffn_gate_exps.weight", "qwen3moe.expert_count is missing"}},
		"no used":      {func(m tinyMoE) tinyMoE { m.skip = map[string]bool{"expert_used_count": true}; return m }, []string{"qwen3moe.expert_used_count"}},
		"used > count": {func(m tinyMoE) tinyMoE { m.override = map[string]uint64{"expert_used_count": 9}; return m }, []string{"8 experts", "9"}},
		"dims":         {func(m tinyMoE) tinyMoE { m.expertsDim = 4; return m }, []string{"blk.0.ffn_gate_exps.weight has 4 experts"}},
	} {
		_, err := FromFile(c.m(base).write(t))
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want an error with %q", name, err, w)
			}
		}
	}
	// The counts alone, as a file's keys would have them without the
	// hyper-parameters' check in front.
	f := &gguf.File{KV: map[string]gguf.Value{
		"x.expert_count": {Type: gguf.Uint32, Data: uint32(8)}, "x.expert_used_count": {Type: gguf.Uint32, Data: uint32(9)},
	}}
	if _, _, err := readExperts(f, "x", true); err == nil || !strings.Contains(err.Error(), "x.expert_used_count is 9 (want 1..8)") {
		t.Errorf("9 of 8 experts: %v", err)
	}
}

// A dense file reads what it holds (its table is tied), so no read figure
// is shown.
func TestDenseReadsEverything(t *testing.T) {
	d, err := FromFile(filepath.Join(testdataDir(t), "models", "tiny-llama-spm-q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Experts != (Experts{}) || d.ActiveBytes != d.WeightsBytes || d.SparseRead() {
		t.Fatalf("dense: experts %+v, active %d of %d", d.Experts, d.ActiveBytes, d.WeightsBytes)
	}
	e, err := Compute(d, Options{Ctx: 512, KV: kv.Q4})
	if err != nil {
		t.Fatal(err)
	}
	if e.ReadPerToken() != "" {
		t.Errorf("dense model shows %q", e.ReadPerToken())
	}
}

// The catalog's mixtures: every expert resident in the verdict, the model
// card's active share read per token, and a machine too small says so.
func TestCatalogMixtures(t *testing.T) {
	for _, c := range []struct {
		id                  string
		experts, used       int
		fitsIn, notIn       int64 // budgets in GiB
		activeOver, activeU float64
	}{
		{"qwen3-30b-a3b", 128, 8, 24, 16, 0.09, 0.13},
		{"gpt-oss-20b", 32, 4, 16, 11, 0.15, 0.19},
		{"gemma-4-26b-a4b-it", 128, 8, 24, 16, 0.13, 0.17},
		{"mixtral-8x7b-instruct-v0.1", 8, 2, 32, 24, 0.26, 0.30},
	} {
		m, err := catalog.ByID(c.id)
		if err != nil {
			t.Fatal(err)
		}
		d, err := FromCatalog(m, "")
		if err != nil {
			t.Fatal(err)
		}
		share := float64(d.ActiveBytes) / float64(d.WeightsBytes)
		if d.Experts.Count != c.experts || d.Experts.Used != c.used || share < c.activeOver || share > c.activeU || !d.SparseRead() {
			t.Errorf("%s: experts %+v, reads %.3f of the weights", c.id, d.Experts, share)
		}
		// Resident = shared + experts, read = shared + used/count of experts.
		shared := d.WeightsBytes - d.Experts.Bytes
		if got := shared + d.Experts.Bytes*int64(c.used)/int64(c.experts); got < d.ActiveBytes-int64(c.experts) || got > d.ActiveBytes+int64(c.experts) {
			t.Errorf("%s: expert bytes %d do not add up: %d read, want %d", c.id, d.Experts.Bytes, got, d.ActiveBytes)
		}
		o := Options{Ctx: 4096, KV: kv.Q4}
		fits, err := Evaluate(d, o, c.fitsIn<<30)
		if err != nil {
			t.Fatal(err)
		}
		tooSmall, err := Evaluate(d, o, c.notIn<<30)
		if err != nil {
			t.Fatal(err)
		}
		if fits.Verdict == WillNotFit || tooSmall.Verdict != WillNotFit || fits.Weights != d.WeightsBytes {
			t.Errorf("%s at 4096 q4: %s in %d GiB, %s in %d GiB (total %s)", c.id, fits.Verdict, c.fitsIn, tooSmall.Verdict, c.notIn, Human(fits.Total))
		}
	}
}

// The reference models of the families with experts (engine/testdata/hf,
// written by transformers and llama.cpp's converter): the counts their
// README gives, and the read share below the resident weights.
func TestReferenceMixtures(t *testing.T) {
	for _, c := range []struct {
		file          string
		experts, used int
	}{{"tiny-qwen3moe.gguf", 16, 4}, {"tiny-mixtral.gguf", 8, 2}, {"tiny-gptoss.gguf", 16, 4}} {
		d, err := FromFile(filepath.Join("..", "testdata", "hf", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if d.Experts.Count != c.experts || d.Experts.Used != c.used || d.Experts.Bytes <= 0 || d.Experts.Bytes >= d.WeightsBytes {
			t.Errorf("%s: experts %+v of %d bytes", c.file, d.Experts, d.WeightsBytes)
		}
		if want := d.WeightsBytes - d.Experts.Bytes + d.Experts.Bytes*int64(c.used)/int64(c.experts); d.ActiveBytes > want {
			t.Errorf("%s: reads %d a token, more than the %d of the shared tensors and routed experts", c.file, d.ActiveBytes, want)
		}
	}
}
