package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine/ggml"
	"nibble/engine/synth"
	"nibble/internal/testmodel"
)

// fixtures are the files a run makes: models in the models folder (one
// with a long trained context for the context slider, one too big for the
// budget, a non-GGUF and a cut-short file), bad files outside it for
// AddModel, and the catalog's downloads with their catalog file.
type fixtures struct {
	Long      string `json:"long"`      // models folder: chat model, long trained context
	LongCtx   int    `json:"longCtx"`   // its trained context
	Big       string `json:"big"`       // models folder: weights alone exceed the budget
	BigBytes  int64  `json:"bigBytes"`  // its file size
	BadFolder string `json:"badFolder"` // models folder: text in a .gguf file
	CutFolder string `json:"cutFolder"` // models folder: a GGUF cut short
	BadAdd    string `json:"badAdd"`    // outside: not a GGUF file
	CutAdd    string `json:"cutAdd"`    // outside: a GGUF cut short
	ModelsDir string `json:"modelsDir"`
	Home      string `json:"home"`
	SaveDir   string `json:"saveDir"` // where scripted save dialogs put files

	// Thinker: models folder, a reasoning model with Qwen3's chat template
	// that always replies ThinkerReasoning in a think block, then
	// ThinkerAnswer (testmodel.Thinker).
	Thinker          string `json:"thinker"`
	ThinkerReasoning string `json:"thinkerReasoning"`
	ThinkerAnswer    string `json:"thinkerAnswer"`

	// The document Q&A demo make run opens, and its sample document.
	DocQA         string `json:"docqa"`
	DocQADocument string `json:"docqaDocument"`

	// The catalog: Tiny downloads whole (after an interrupted first try);
	// Corrupt's served bytes do not match its listed sha256.
	CatalogFile string  `json:"catalogFile"`
	Tiny        dlEntry `json:"tiny"`
	Corrupt     dlEntry `json:"corrupt"`

	// Served by the test's HTTP server: URL path → file.
	served map[string]string
}

type dlEntry struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Quant    string `json:"quant"`
	FileName string `json:"fileName"`
	URLPath  string `json:"urlPath"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

// shape is a synthesized llama's architecture numbers, written both to its
// GGUF and to its catalog entry.
type shape struct {
	layers, embd, heads, kvHeads, ff, ctx int
	typ                                   ggml.Type
	seed                                  uint64
}

func (s shape) synth(t *testing.T, path string) {
	t.Helper()
	o := synth.DefaultOptions("llama")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.Ctx = s.layers, s.embd, s.heads, s.kvHeads, s.ff, s.ctx
	o.Type, o.Seed, o.VocabData = s.typ, s.seed, vocab.LlamaSPM
	if err := synth.Generate(path, o); err != nil {
		t.Fatalf("synthesizing %s: %v", path, err)
	}
}

var (
	// Small and fast, and its trained context is long enough that the
	// slider's end needs far more memory than its start.
	longShape = shape{layers: 4, embd: 256, heads: 4, kvHeads: 2, ff: 768, ctx: 131072, typ: ggml.Q8_0, seed: 11}
	// About 130 MB of weights: more than the budget the test sets, at
	// any context.
	bigShape = shape{layers: 8, embd: 1024, heads: 16, kvHeads: 4, ff: 2816, ctx: 4096, typ: ggml.Q8_0, seed: 12}
	// The catalog download: about 10 MB, so progress, an interruption and
	// a resume are all visible.
	tinyShape = shape{layers: 2, embd: 256, heads: 4, kvHeads: 2, ff: 768, ctx: 8192, typ: ggml.Q8_0, seed: 13}
)

func makeFixtures(t *testing.T, home, dir string) *fixtures {
	t.Helper()
	models := filepath.Join(home, "models")
	served := filepath.Join(dir, "served")
	outside := filepath.Join(dir, "outside")
	save := filepath.Join(dir, "saved")
	for _, d := range []string{models, served, outside, save} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixtures{
		Long:      filepath.Join(models, "e2e-long-q8_0.gguf"),
		LongCtx:   longShape.ctx,
		Big:       filepath.Join(models, "e2e-big-q8_0.gguf"),
		BadFolder: filepath.Join(models, "notes-not-a-model.gguf"),
		CutFolder: filepath.Join(models, "e2e-cut-short.gguf"),
		BadAdd:    filepath.Join(outside, "holiday-photo.gguf"),
		CutAdd:    filepath.Join(outside, "half-downloaded.gguf"),
		ModelsDir: models,
		Home:      home,
		SaveDir:   save,
		served:    map[string]string{},

		DocQA:         filepath.Join(repoRoot(t), "app", "desktop", "demo", "nibble-docqa-demo.gguf"),
		DocQADocument: filepath.Join(repoRoot(t), "app", "desktop", "demo", "sample-document.txt"),
	}
	longShape.synth(t, f.Long)
	bigShape.synth(t, f.Big)
	f.Thinker = testmodel.Thinker(t, models, "e2e-thinker-qwen3-template.gguf")
	f.ThinkerReasoning, f.ThinkerAnswer = testmodel.ThinkerReasoning, testmodel.ThinkerAnswer
	st, err := os.Stat(f.Big)
	if err != nil {
		t.Fatal(err)
	}
	f.BigBytes = st.Size()
	notGGUF := []byte("These are my notes, saved with the wrong extension.\n")
	writeFile(t, f.BadFolder, notGGUF)
	writeFile(t, f.BadAdd, append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 4096)...))
	long, err := os.ReadFile(f.Long)
	if err != nil {
		t.Fatal(err)
	}
	// Cut inside the tensor data: the header reads, the weights are missing.
	writeFile(t, f.CutFolder, long[:len(long)*6/10])
	// Cut inside the header's metadata (the vocabulary).
	writeFile(t, f.CutAdd, long[:200_000])

	tiny := filepath.Join(served, "e2e-tiny-q8_0.gguf")
	tinyShape.synth(t, tiny)
	data, err := os.ReadFile(tiny)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	f.Tiny = dlEntry{ID: "e2e-tiny", Name: "E2E Tiny", Quant: "Q8_0", FileName: "e2e-tiny-q8_0.gguf",
		URLPath: "/files/e2e-tiny-q8_0.gguf", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	f.served[f.Tiny.URLPath] = tiny

	// The corrupt entry lists the digest of the good bytes but serves a
	// copy with one flipped byte deep in the weights.
	bad := append([]byte(nil), data...)
	bad[len(bad)*3/4] ^= 0x55
	corrupt := filepath.Join(served, "e2e-damaged-q8_0.gguf")
	writeFile(t, corrupt, bad)
	f.Corrupt = dlEntry{ID: "e2e-damaged", Name: "E2E Damaged", Quant: "Q8_0", FileName: "e2e-damaged-q8_0.gguf",
		URLPath: "/files/e2e-damaged-q8_0.gguf", Size: int64(len(bad)), SHA256: f.Tiny.SHA256}
	f.served[f.Corrupt.URLPath] = corrupt
	return f
}

// writeCatalog writes the catalog (models/ format, each file with its url
// and sha256) that NIBBLE_CATALOG_FILE points the app at.
func (f *fixtures) writeCatalog(t *testing.T, dir, base string) {
	t.Helper()
	entry := func(e dlEntry, s shape) map[string]any {
		return map[string]any{
			"id": e.ID, "name": e.Name, "family": "llama", "arch": "llama",
			"params_b": 0.01, "layers": s.layers, "embd": s.embd, "heads": s.heads, "kv_heads": s.kvHeads,
			"head_dim": s.embd / s.heads, "ff": s.ff, "vocab": 32000, "ctx_train": s.ctx,
			"attn_scale": 0.125, "sliding_window": 0, "rope_base": 500000, "rms_eps": 1e-5,
			"tied_output": true, "qkv_bias": false,
			"note": "Synthesized by the end-to-end test (random weights).",
			"files": []map[string]any{{
				"quant": e.Quant, "repo": "nibble-e2e/" + e.ID, "file": e.FileName,
				"url": base + e.URLPath, "sha256": e.SHA256,
				"size_bytes": e.Size, "size_approx": false,
			}},
		}
	}
	doc := map[string]any{
		"version": 1,
		"note":    "The end-to-end test's catalog, served from a local HTTP server.",
		"models":  []any{entry(f.Tiny, tinyShape), entry(f.Corrupt, tinyShape)},
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	f.CatalogFile = filepath.Join(dir, "catalog.json")
	writeFile(t, f.CatalogFile, data)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
