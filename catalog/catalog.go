// Package catalog is Nibble's catalog of popular instruct models in GGUF:
// their architecture numbers (from each model's config.json) and where to
// download one or two quantizations, so memory can be estimated before a
// file is fetched.
package catalog

import (
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
)

// CatalogFileEnv names the environment variable with the path of a catalog
// file (this package's JSON format) that replaces the built-in catalog in
// Active, so tests can point the app at models served locally.
const CatalogFileEnv = "NIBBLE_CATALOG_FILE"

// maxCatalogBytes bounds a catalog file read from disk.
const maxCatalogBytes = 16 << 20

//go:embed catalog.json
var catalogJSON []byte

// Model is one catalog entry.
type Model struct {
	ID      string  `json:"id"`
	Name    string  `json:"name"`
	Family  string  `json:"family"` // llama, qwen2.5, qwen3, qwen3moe, mistral, mixtral, gemma2, gemma3, gemma4, gpt-oss, phi3
	Arch    string  `json:"arch"`   // general.architecture of its GGUF files
	ParamsB float64 `json:"params_b"`

	Layers   int `json:"layers"`
	Embd     int `json:"embd"`
	Heads    int `json:"heads"`
	KVHeads  int `json:"kv_heads"`
	HeadDim  int `json:"head_dim"`
	FF       int `json:"ff"`
	Vocab    int `json:"vocab"`
	CtxTrain int `json:"ctx_train"`
	// AttnScale multiplies QK^T: 1/sqrt(head_dim), or Gemma's
	// 1/sqrt(query_pre_attn_scalar).
	AttnScale float64 `json:"attn_scale"`
	// SlidingWindow is the local attention span in tokens (0 = none); with
	// SlidingWindowPattern n, every n-th layer is global and the rest local.
	SlidingWindow        int `json:"sliding_window"`
	SlidingWindowPattern int `json:"sliding_window_pattern,omitempty"`
	// HeadDimGlobal and KVHeadsGlobal are the global layers' head shape
	// where it differs from the sliding layers' (head_dim, kv_heads):
	// Gemma 4's global_head_dim and num_global_key_value_heads; 0 = the
	// same. They need a sliding window and its pattern.
	HeadDimGlobal int `json:"head_dim_global,omitempty"`
	KVHeadsGlobal int `json:"kv_heads_global,omitempty"`
	// SharedKVLayers are the last layers that store no K/V and read the
	// cache of the last earlier layer of their kind (Gemma 4's
	// num_kv_shared_layers); PerLayerEmbd is the width of each layer's
	// per-layer input (hidden_size_per_layer_input; 0 = none).
	SharedKVLayers int     `json:"shared_kv_layers,omitempty"`
	PerLayerEmbd   int     `json:"per_layer_embd,omitempty"`
	RopeBase       float64 `json:"rope_base"`
	RMSEps         float64 `json:"rms_eps"`
	TiedOutput     bool    `json:"tied_output"`
	QKVBias        bool    `json:"qkv_bias"`

	// Experts and ExpertsUsed are a mixture of experts' experts per layer
	// and per token (0 for a dense model); ExpertFF is one expert's
	// feed-forward width. Every expert is resident; a token reads its own.
	Experts     int `json:"experts,omitempty"`
	ExpertsUsed int `json:"experts_used,omitempty"`
	ExpertFF    int `json:"expert_ff,omitempty"`
	// ActiveParamsB are the parameters one token uses, in billions, as the
	// model card gives them: a mixture's active parameters, or Gemma's
	// "effective" ones (without the per-layer embedding tables, which are
	// only looked up). 0: all of ParamsB.
	ActiveParamsB float64 `json:"active_params_b,omitempty"`

	Files []File `json:"files"`
	Note  string `json:"note,omitempty"`
}

// File is one downloadable quantization of a model.
type File struct {
	Quant string `json:"quant"` // llama.cpp file type, e.g. Q4_K_M
	Repo  string `json:"repo,omitempty"`
	File  string `json:"file,omitempty"`
	// DirectURL is a download address that overrides the Hugging Face one
	// made of Repo and File (a mirror, or a test's local server).
	DirectURL  string `json:"url,omitempty"`
	SHA256     string `json:"sha256,omitempty"` // hex digest of the file, checked after download
	SizeBytes  int64  `json:"size_bytes"`
	SizeApprox bool   `json:"size_approx"` // listed size, not yet read from the header
}

// URL is the download address (DirectURL, else Hugging Face's), or "" for a
// sizing-only entry.
func (f File) URL() string {
	if f.DirectURL != "" {
		return f.DirectURL
	}
	if f.Repo == "" || f.File == "" {
		return ""
	}
	return "https://huggingface.co/" + f.Repo + "/resolve/main/" + f.File
}

// FileName is the name the download is saved under: File, else the last
// element of DirectURL's path; "" for a sizing-only entry.
func (f File) FileName() string {
	if f.File != "" {
		return path.Base(f.File)
	}
	if u, err := url.Parse(f.DirectURL); err == nil && f.DirectURL != "" {
		if b := path.Base(u.Path); b != "/" && b != "." {
			return b
		}
	}
	return ""
}

func (f File) validate() error {
	if f.Quant == "" || f.SizeBytes <= 0 {
		return errors.New("quant and a positive size_bytes are required")
	}
	if f.DirectURL == "" {
		if (f.Repo == "") != (f.File == "") {
			return errors.New("both repo and file (or neither) are required")
		}
	} else {
		u, err := url.Parse(f.DirectURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url %q: want an http:// or https:// address", f.DirectURL)
		}
	}
	if f.URL() != "" {
		name := f.FileName()
		if !strings.EqualFold(path.Ext(name), ".gguf") || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
			return fmt.Errorf("file name %q: want a plain name ending in .gguf", name)
		}
	}
	if f.SHA256 != "" {
		if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != 32 {
			return fmt.Errorf("sha256 %q: want 64 hex digits", f.SHA256)
		}
	}
	return nil
}

// Quant finds a file by quantization name (case-insensitive).
func (m *Model) Quant(name string) (File, bool) {
	for _, f := range m.Files {
		if strings.EqualFold(f.Quant, name) {
			return f, true
		}
	}
	return File{}, false
}

// Catalog is a parsed catalog.
type Catalog struct {
	Version int     `json:"version"`
	Note    string  `json:"note,omitempty"`
	Models  []Model `json:"models"`
	byID    map[string]int
}

// Parse reads and validates a catalog document.
func Parse(data []byte) (*Catalog, error) {
	var c Catalog
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if c.Version != 1 {
		return nil, fmt.Errorf("catalog version %d not supported (want 1)", c.Version)
	}
	c.byID = make(map[string]int, len(c.Models))
	for i := range c.Models {
		m := &c.Models[i]
		if err := m.validate(); err != nil {
			return nil, fmt.Errorf("catalog entry %d: %w", i, err)
		}
		// ByID is case-insensitive, so ids differing only in case clash.
		key := strings.ToLower(m.ID)
		if _, dup := c.byID[key]; dup {
			return nil, fmt.Errorf("catalog: duplicate id %q", m.ID)
		}
		c.byID[key] = i
	}
	return &c, nil
}

func (m *Model) validate() error {
	if m.ID == "" || m.Name == "" || m.Arch == "" {
		return fmt.Errorf("id %q: id, name and arch are required", m.ID)
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"layers", m.Layers}, {"embd", m.Embd}, {"heads", m.Heads}, {"kv_heads", m.KVHeads},
		{"head_dim", m.HeadDim}, {"ff", m.FF}, {"vocab", m.Vocab}, {"ctx_train", m.CtxTrain}} {
		if v.n <= 0 || v.n > 1<<24 {
			return fmt.Errorf("%s: %s = %d out of range", m.ID, v.name, v.n)
		}
	}
	if m.Heads%m.KVHeads != 0 {
		return fmt.Errorf("%s: %d heads is not a multiple of %d kv heads", m.ID, m.Heads, m.KVHeads)
	}
	if m.HeadDim%8 != 0 || m.SlidingWindow < 0 {
		return fmt.Errorf("%s: head_dim %d or sliding_window %d invalid", m.ID, m.HeadDim, m.SlidingWindow)
	}
	if !(m.AttnScale > 0 && m.AttnScale <= 1) || !(m.RopeBase > 0) || !(m.RMSEps > 0) || math.IsInf(m.RopeBase, 0) {
		return fmt.Errorf("%s: attn_scale %g, rope_base %g, rms_eps %g invalid", m.ID, m.AttnScale, m.RopeBase, m.RMSEps)
	}
	if err := m.validateExperts(); err != nil {
		return err
	}
	if err := m.validateLayerShapes(); err != nil {
		return err
	}
	if len(m.Files) == 0 {
		return fmt.Errorf("%s: no files", m.ID)
	}
	for i, f := range m.Files {
		if err := f.validate(); err != nil {
			return fmt.Errorf("%s: file %d (%s): %w", m.ID, i, f.Quant, err)
		}
	}
	return nil
}

func (m *Model) validateExperts() error {
	switch {
	case m.Experts == 0 && (m.ExpertsUsed != 0 || m.ExpertFF != 0):
		return fmt.Errorf("%s: experts_used %d and expert_ff %d need experts", m.ID, m.ExpertsUsed, m.ExpertFF)
	case m.Experts < 0 || m.Experts > 1<<16:
		return fmt.Errorf("%s: experts = %d out of range", m.ID, m.Experts)
	case m.Experts > 0 && (m.ExpertsUsed < 1 || m.ExpertsUsed > m.Experts || m.ExpertFF <= 0 || m.ExpertFF > 1<<24):
		return fmt.Errorf("%s: %d of %d experts per token, expert_ff %d: want 1..experts and a positive width", m.ID, m.ExpertsUsed, m.Experts, m.ExpertFF)
	case !(m.ActiveParamsB >= 0) || m.ActiveParamsB > m.ParamsB:
		return fmt.Errorf("%s: active_params_b %g must be between 0 and params_b %g", m.ID, m.ActiveParamsB, m.ParamsB)
	}
	return nil
}

// validateLayerShapes checks the per-layer shapes: global layers exist
// (a window and a pattern of at least 2) where they have their own head
// shape, and the layers that store K/V include a sliding and a global one
// for the sharing layers to read.
func (m *Model) validateLayerShapes() error {
	p := m.SlidingWindowPattern
	switch {
	case m.SlidingWindowPattern < 0:
		return fmt.Errorf("%s: sliding_window_pattern %d invalid", m.ID, p)
	case m.HeadDimGlobal < 0 || m.HeadDimGlobal > 1<<16 || m.HeadDimGlobal%8 != 0:
		return fmt.Errorf("%s: head_dim_global %d: want a multiple of 8", m.ID, m.HeadDimGlobal)
	case m.KVHeadsGlobal < 0 || m.KVHeadsGlobal > 0 && m.Heads%m.KVHeadsGlobal != 0:
		return fmt.Errorf("%s: %d heads is not a multiple of %d global kv heads", m.ID, m.Heads, m.KVHeadsGlobal)
	case (m.HeadDimGlobal > 0 || m.KVHeadsGlobal > 0) && (m.SlidingWindow == 0 || p < 2):
		return fmt.Errorf("%s: head_dim_global and kv_heads_global need a sliding_window and a sliding_window_pattern of at least 2", m.ID)
	case m.SharedKVLayers < 0 || m.SharedKVLayers > 0 && m.Layers-m.SharedKVLayers < max(p, 1):
		return fmt.Errorf("%s: %d of %d layers share K/V: the layers before them must hold one of each kind (pattern %d)", m.ID, m.SharedKVLayers, m.Layers, p)
	case m.PerLayerEmbd < 0 || m.PerLayerEmbd > 1<<16:
		return fmt.Errorf("%s: per_layer_embd %d out of range", m.ID, m.PerLayerEmbd)
	}
	return nil
}

// ByID looks a model up.
func (c *Catalog) ByID(id string) (*Model, bool) {
	i, ok := c.byID[strings.ToLower(id)]
	if !ok {
		return nil, false
	}
	return &c.Models[i], true
}

var builtin = sync.OnceValues(func() (*Catalog, error) { return Parse(catalogJSON) })

// Load returns the catalog built into the binary.
func Load() (*Catalog, error) { return builtin() }

// LoadFile reads and validates a catalog file.
func LoadFile(name string) (*Catalog, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCatalogBytes+1))
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", name, err)
	}
	if len(data) > maxCatalogBytes {
		return nil, fmt.Errorf("catalog %s is larger than %d MiB", name, maxCatalogBytes>>20)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, name)
	}
	return c, nil
}

// Active is the catalog the app offers: the file $NIBBLE_CATALOG_FILE
// names when set (read again on each call, so an edit shows at once),
// else the built-in one.
func Active() (*Catalog, error) {
	if name := os.Getenv(CatalogFileEnv); name != "" {
		return LoadFile(name)
	}
	return Load()
}

// All lists the built-in models in catalog order (nil if the embedded file
// is broken, which the package tests rule out).
func All() []Model {
	c, err := Load()
	if err != nil {
		return nil
	}
	return c.Models
}

// ByID looks a model up in the built-in catalog; the error lists the ids.
func ByID(id string) (*Model, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	if m, ok := c.ByID(id); ok {
		return m, nil
	}
	ids := make([]string, len(c.Models))
	for i := range c.Models {
		ids[i] = c.Models[i].ID
	}
	return nil, fmt.Errorf("no catalog entry %q (known: %s)", id, strings.Join(ids, ", "))
}
