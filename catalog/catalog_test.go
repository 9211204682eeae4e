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
