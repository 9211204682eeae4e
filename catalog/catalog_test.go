package catalog

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestBuiltinCatalog(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Models) < 15 {
		t.Fatalf("%d models, want at least 15", len(c.Models))
	}
	for _, id := range []string{
		"llama-3.2-1b-instruct", "llama-3.2-3b-instruct", "llama-3.1-8b-instruct", "llama-3.1-70b-instruct",
		"llama-3.3-70b-instruct", "qwen2.5-0.5b-instruct", "qwen2.5-1.5b-instruct", "qwen2.5-3b-instruct",
		"qwen2.5-7b-instruct", "qwen2.5-14b-instruct", "qwen2.5-32b-instruct", "qwen3-4b", "qwen3-8b",
		"mistral-7b-instruct-v0.3", "mistral-nemo-12b-instruct", "gemma-2-2b-it", "gemma-2-9b-it",
		"gemma-3-4b-it", "gemma-3-12b-it", "phi-3.5-mini-instruct", "phi-4",
	} {
		m, ok := c.ByID(id)
		if !ok {
			t.Errorf("missing %s", id)
			continue
		}
		if f := m.Files[0]; f.URL() == "" || !strings.HasSuffix(f.File, ".gguf") || !f.SizeApprox {
			t.Errorf("%s: first file %+v should be a downloadable GGUF with an approximate size", id, f)
		}
		// The listed files are quantized: between 2 and 9 bits per weight.
		for _, f := range m.Files {
			bpw := float64(f.SizeBytes) * 8 / (m.ParamsB * 1e9)
			if bpw < 2 || bpw > 9 {
				t.Errorf("%s %s: %.2f bits per weight is implausible", id, f.Quant, bpw)
			}
		}
		if math.Abs(m.AttnScale-1/math.Sqrt(float64(m.HeadDim))) > 1e-9 && m.Family != "gemma2" && m.Family != "gemma3" {
			t.Errorf("%s: attn_scale %g is not 1/sqrt(head_dim)", id, m.AttnScale)
		}
	}
}

// Open-TQ-Metal's reference entry: Llama-3.1-70B at 4 bits, 39.1 GiB.
func TestSeedReferenceEntry(t *testing.T) {
	m, err := ByID("llama-3.1-70b-instruct-4bit")
	if err != nil {
		t.Fatal(err)
	}
	if m.Layers != 80 || m.KVHeads != 8 || m.HeadDim != 128 {
		t.Fatalf("shape %d layers %d kv heads D %d", m.Layers, m.KVHeads, m.HeadDim)
	}
	f := m.Files[0]
	if f.SizeApprox || f.SizeBytes != int64(math.Round(39.1*(1<<30))) || f.URL() != "" {
		t.Fatalf("file %+v: want exactly 39.1 GiB, not approximate, no download", f)
	}
}

func TestParseRejects(t *testing.T) {
	good := `{"version":1,"models":[{"id":"a","name":"A","arch":"llama","layers":2,"embd":64,"heads":4,"kv_heads":2,"head_dim":16,"ff":128,"vocab":100,"ctx_train":512,"attn_scale":0.25,"rope_base":10000,"rms_eps":1e-5,"files":[{"quant":"Q8_0","size_bytes":1000}]}]}`
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"version":   strings.Replace(good, `"version":1`, `"version":2`, 1),
		"gqa":       strings.Replace(good, `"kv_heads":2`, `"kv_heads":3`, 1),
		"no files":  strings.Replace(good, `[{"quant":"Q8_0","size_bytes":1000}]`, `[]`, 1),
		"size":      strings.Replace(good, `"size_bytes":1000`, `"size_bytes":0`, 1),
		"repo only": strings.Replace(good, `"quant":"Q8_0"`, `"quant":"Q8_0","repo":"x/y"`, 1),
		"layers":    strings.Replace(good, `"layers":2`, `"layers":0`, 1),
		"json":      good[:40],
		"duplicate": strings.Replace(good, `]}]}`, `]},`+good[strings.Index(good, `{"id"`):], 1),
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ByID("no-such-model"); err == nil || !strings.Contains(err.Error(), "llama-3.2-1b-instruct") {
		t.Errorf("unknown id error should list the ids: %v", err)
	}
}

func TestDirectURLAndSHA256(t *testing.T) {
	good := `{"version":1,"models":[{"id":"Tiny-Test","name":"T","arch":"llama","layers":2,"embd":64,"heads":4,"kv_heads":2,"head_dim":16,"ff":128,"vocab":100,"ctx_train":512,"attn_scale":0.25,"rope_base":10000,"rms_eps":1e-5,"files":[{"quant":"Q8_0","url":"http://127.0.0.1:1/files/tiny-q8_0.gguf?x=1","sha256":"` + strings.Repeat("ab", 32) + `","size_bytes":1000}]}]}`
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := c.ByID("tiny-test") // ids are case-insensitive
	if !ok {
		t.Fatal("ByID(tiny-test) did not find Tiny-Test")
	}
	f := m.Files[0]
	if f.URL() != "http://127.0.0.1:1/files/tiny-q8_0.gguf?x=1" || f.FileName() != "tiny-q8_0.gguf" || f.SHA256 != strings.Repeat("ab", 32) {
		t.Fatalf("file %+v: URL %q, name %q", f, f.URL(), f.FileName())
	}
	// A direct URL wins over the Hugging Face address; File names the download.
	hf := File{Quant: "Q4_0", Repo: "a/b", File: "Model-Q4_0.gguf", DirectURL: "https://mirror.example/x", SizeBytes: 1}
	if hf.URL() != "https://mirror.example/x" || hf.FileName() != "Model-Q4_0.gguf" {
		t.Fatalf("URL %q name %q", hf.URL(), hf.FileName())
	}
	for name, bad := range map[string]string{
		"scheme":    strings.Replace(good, "http://127.0.0.1:1", "ftp://127.0.0.1:1", 1),
		"no host":   strings.Replace(good, "http://127.0.0.1:1", "http://", 1),
		"not gguf":  strings.Replace(good, "tiny-q8_0.gguf", "tiny-q8_0.bin", 1),
		"sha short": strings.Replace(good, strings.Repeat("ab", 32), "abcd", 1),
		"sha hex":   strings.Replace(good, strings.Repeat("ab", 32), strings.Repeat("zz", 32), 1),
		"dup case":  strings.Replace(good, `]}]}`, `]},`+strings.Replace(good[strings.Index(good, `{"id"`):], "Tiny-Test", "tiny-TEST", 1), 1),
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestActiveCatalogFile(t *testing.T) {
	t.Setenv(CatalogFileEnv, "")
	c, err := Active()
	if err != nil || len(c.Models) < 15 {
		t.Fatalf("built-in catalog: %v", err)
	}
	path := t.TempDir() + "/catalog.json"
	doc := `{"version":1,"models":[{"id":"local","name":"Local","arch":"llama","layers":2,"embd":64,"heads":4,"kv_heads":2,"head_dim":16,"ff":128,"vocab":100,"ctx_train":512,"attn_scale":0.25,"rope_base":10000,"rms_eps":1e-5,"files":[{"quant":"Q8_0","url":"http://127.0.0.1:9/local.gguf","size_bytes":1000}]}]}`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(CatalogFileEnv, path)
	c, err = Active()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 1 || c.Models[0].ID != "local" {
		t.Fatalf("catalog file not used: %d models", len(c.Models))
	}
	if err := os.WriteFile(path, []byte(`{"version":1,`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Active(); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("broken catalog file: %v, want an error naming it", err)
	}
	t.Setenv(CatalogFileEnv, path+".missing")
	if _, err := Active(); err == nil {
		t.Fatal("a missing catalog file was accepted")
	}
}

// The mixture-of-experts and Gemma 4 entries name the files people
// download, pinned to a repository revision where one was found so that
// the exact size and SHA-256 stay true (a file re-uploaded under main would
// fail the download's check). Where the figures come from:
//   - Qwen3-30B-A3B-Q4_K_M.gguf: size and SHA-256 as two independent
//     download scripts pin them (Qwen's own GGUF repository, revisions
//     dae61f0 and e4d4baf carry the same file); shape from Qwen's config.
//   - gpt-oss-20b-MXFP4.gguf (lmstudio-community): the size three
//     independent listings give; no revision or digest found, so the size
//     is marked approximate and the download is not pinned.
//   - gemma-4-E4B-it-Q4_K_M.gguf (lmstudio-community, revision 99210a7):
//     size and digest as several benchmark records give them.
//   - gemma-4-26B-A4B-it-UD-Q4_K_M.gguf (unsloth, revision c099eb4) and
//     gemma-4-31B-it-Q4_K_M.gguf (unsloth, revision c1ac76e): size and
//     digest from download manifests that check them against the Hub's LFS
//     metadata; shapes from Gemma 4's config.json text_config; contexts
//     from the model card (128K for E4B, 256K for 26B A4B and 31B).
//   - mixtral-8x7b-instruct-v0.1.Q4_K_M.gguf (TheBloke, revision fa1d383):
//     size and digest from one model table; shape from Mixtral's config.
func TestMixtureAndGemma4Entries(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		id, arch             string
		experts, used, ff    int
		ctx                  int
		size                 int64
		pinned               bool
		activeB, paramsB     float64
		window, windowLayers int
	}{
		{"qwen3-30b-a3b", "qwen3moe", 128, 8, 768, 40960, 18556685824, true, 3.3, 30.5, 0, 0},
		{"gpt-oss-20b", "gpt-oss", 32, 4, 2880, 131072, 12109565632, false, 3.6, 20.9, 128, 2},
		{"gemma-4-e4b-it", "gemma4", 0, 0, 0, 131072, 5335291936, true, 4.5, 8, 512, 6},
		{"gemma-4-26b-a4b-it", "gemma4", 128, 8, 704, 262144, 16947541728, true, 3.8, 25.2, 1024, 6},
		{"gemma-4-31b-it", "gemma4", 0, 0, 0, 262144, 18323733440, true, 0, 30.7, 1024, 6},
		{"mixtral-8x7b-instruct-v0.1", "llama", 8, 2, 14336, 32768, 26441533376, true, 12.9, 46.7, 0, 0},
	} {
		m, ok := c.ByID(w.id)
		if !ok {
			t.Errorf("missing %s", w.id)
			continue
		}
		f := m.Files[0]
		if m.Arch != w.arch || m.Experts != w.experts || m.ExpertsUsed != w.used || m.ExpertFF != w.ff || m.CtxTrain != w.ctx ||
			m.ActiveParamsB != w.activeB || m.ParamsB != w.paramsB || m.SlidingWindow != w.window || m.SlidingWindowPattern != w.windowLayers {
			t.Errorf("%s: %+v", w.id, *m)
		}
		if f.SizeBytes != w.size || f.SizeApprox == w.pinned || !strings.HasSuffix(f.FileName(), ".gguf") {
			t.Errorf("%s: file %+v", w.id, f)
		}
		// A pinned file names its revision in the address and carries its
		// digest; the address still names the repository and file.
		if pinned := strings.Contains(f.URL(), "/resolve/main/"); pinned == w.pinned ||
			!strings.HasPrefix(f.URL(), "https://huggingface.co/"+f.Repo+"/resolve/") || !strings.HasSuffix(f.URL(), "/"+f.File) ||
			(f.SHA256 != "") != w.pinned {
			t.Errorf("%s: address %s, sha256 %q", w.id, f.URL(), f.SHA256)
		}
		if bpw := float64(f.SizeBytes) * 8 / (m.ParamsB * 1e9); bpw < 4 || bpw > 6 {
			t.Errorf("%s: %.2f bits per weight is implausible for a 4-bit file", w.id, bpw)
		}
	}
}

func TestExpertFieldsValidated(t *testing.T) {
	good := `{"version":1,"models":[{"id":"m","name":"M","arch":"qwen3moe","params_b":1,"layers":2,"embd":64,"heads":4,"kv_heads":2,"head_dim":16,"ff":128,"vocab":100,"ctx_train":512,"attn_scale":0.25,"rope_base":10000,"rms_eps":1e-5,"experts":8,"experts_used":2,"expert_ff":32,"active_params_b":0.3,"files":[{"quant":"Q8_0","size_bytes":1000}]}]}`
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"used > experts": strings.Replace(good, `"experts_used":2`, `"experts_used":9`, 1),
		"no used":        strings.Replace(good, `"experts_used":2`, `"experts_used":0`, 1),
		"no expert ff":   strings.Replace(good, `"expert_ff":32`, `"expert_ff":0`, 1),
		"used, dense":    strings.Replace(good, `"experts":8`, `"experts":0`, 1),
		"active > all":   strings.Replace(good, `"active_params_b":0.3`, `"active_params_b":2`, 1),
		"negative":       strings.Replace(good, `"experts":8`, `"experts":-8`, 1),
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Gemma 4's per-layer shapes (global_head_dim, num_global_key_value_heads,
// num_kv_shared_layers, hidden_size_per_layer_input in the text_config of
// the configs cited above): the entries carry them, and bad ones are
// refused.
func TestLayerShapeFields(t *testing.T) {
	for _, w := range []struct {
		id                                   string
		headDimGlobal, kvGlobal, shared, ple int
	}{
		{"gemma-4-e4b-it", 512, 0, 18, 256},
		{"gemma-4-26b-a4b-it", 512, 2, 0, 0},
		{"gemma-4-31b-it", 512, 4, 0, 0},
	} {
		m, err := ByID(w.id)
		if err != nil {
			t.Fatal(err)
		}
		if m.HeadDim != 256 || m.HeadDimGlobal != w.headDimGlobal || m.KVHeadsGlobal != w.kvGlobal || m.SharedKVLayers != w.shared || m.PerLayerEmbd != w.ple {
			t.Errorf("%s: head dims %d/%d, global kv heads %d, shared %d, per-layer %d", w.id, m.HeadDim, m.HeadDimGlobal, m.KVHeadsGlobal, m.SharedKVLayers, m.PerLayerEmbd)
		}
	}
	good := `{"version":1,"models":[{"id":"g","name":"G","arch":"gemma4","params_b":1,"layers":12,"embd":64,"heads":4,"kv_heads":2,"head_dim":16,"head_dim_global":32,"kv_heads_global":1,"shared_kv_layers":6,"per_layer_embd":8,"ff":128,"vocab":100,"ctx_train":512,"attn_scale":1,"sliding_window":32,"sliding_window_pattern":6,"rope_base":10000,"rms_eps":1e-6,"files":[{"quant":"Q8_0","size_bytes":1000}]}]}`
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"global dim":     strings.Replace(good, `"head_dim_global":32`, `"head_dim_global":30`, 1),
		"global kv":      strings.Replace(good, `"kv_heads_global":1`, `"kv_heads_global":3`, 1),
		"no pattern":     strings.Replace(good, `"sliding_window_pattern":6`, `"sliding_window_pattern":0`, 1),
		"no window":      strings.Replace(good, `"sliding_window":32`, `"sliding_window":0`, 1),
		"all shared":     strings.Replace(good, `"shared_kv_layers":6`, `"shared_kv_layers":7`, 1),
		"negative share": strings.Replace(good, `"shared_kv_layers":6`, `"shared_kv_layers":-1`, 1),
		"per-layer":      strings.Replace(good, `"per_layer_embd":8`, `"per_layer_embd":-8`, 1),
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
