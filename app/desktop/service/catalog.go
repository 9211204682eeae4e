package service

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"nibble/app/download"
	"nibble/catalog"
	"nibble/engine/estimate"
	"nibble/engine/model"
)

// headerTimeout bounds reading a remote file's header by range requests.
const headerTimeout = time.Minute

// catalogBrowser is the download catalog as the app shows it: each file's
// estimate here (with headers read over HTTP), and the downloads of this
// run.
type catalogBrowser struct {
	env
	machine *machine
	files   modelFiles

	client *http.Client
	dl     *download.Manager
	ctx    context.Context // ends at Close, and with it every download
	cancel context.CancelFunc
	wg     sync.WaitGroup // download followers

	mu        sync.Mutex               // guards headers and downloads
	headers   map[string]estimate.Desc // by URL
	downloads map[string]*dlRecord     // by Download.Key
}

func newCatalog(e env, m *machine, files modelFiles) *catalogBrowser {
	c := &catalogBrowser{env: e, machine: m, files: files}
	// No overall timeout: a model download takes as long as it takes; the
	// download package ends stalled transfers itself.
	c.client = &http.Client{}
	c.dl = download.NewManager(download.Options{Client: c.client, ProgressInterval: progressInterval})
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.headers = map[string]estimate.Desc{}
	c.downloads = map[string]*dlRecord{}
	return c
}

// catalogFile finds a catalog entry's file.
func catalogFile(id, quant string) (*catalog.Model, catalog.File, error) {
	cat, err := catalog.Active()
	if err != nil {
		return nil, catalog.File{}, err
	}
	m, ok := cat.ByID(id)
	if !ok {
		return nil, catalog.File{}, fmt.Errorf("the catalog has no model %q", id)
	}
	f, ok := m.Quant(quant)
	if !ok {
		return nil, catalog.File{}, fmt.Errorf("%s has no %s file in the catalog", m.Name, quant)
	}
	return m, f, nil
}

// list lists the catalog's models (catalog.Active: the built-in one, or
// $NIBBLE_CATALOG_FILE), each file with its estimate here at the settings'
// context (at most the model's trained one) and KV type. The estimate is
// exact once the header was read (CatalogEstimate) or the file is
// downloaded, and from the listed size (Approx) before.
func (c *catalogBrowser) list() ([]CatalogEntry, error) {
	cat, err := catalog.Active()
	if err != nil {
		return nil, err
	}
	cfg := c.store.Get()
	t, err := parseKV(cfg.KVType)
	if err != nil {
		return nil, fmt.Errorf("catalog: settings kvType: %w", err)
	}
	b, src := c.machine.budget()
	partial := map[string]int64{}
	if parts, err := download.Partial(c.dirs.Models); err == nil {
		for _, p := range parts {
			partial[p.Name] = p.Done
		}
	}
	out := make([]CatalogEntry, 0, len(cat.Models))
	for i := range cat.Models {
		m := &cat.Models[i]
		e := CatalogEntry{ID: m.ID, Name: m.Name, Family: m.Family, ParamsB: m.ParamsB, CtxTrain: m.CtxTrain,
			Note: m.Note, Runnable: model.Supported(m.Arch), Files: make([]CatalogFile, 0, len(m.Files))}
		ctx := min(cfg.ContextTokens, m.CtxTrain)
		for _, f := range m.Files {
			cf := CatalogFile{Quant: f.Quant, FileName: f.FileName(), URL: f.URL(), Size: f.SizeBytes,
				SizeApprox: f.SizeApprox, SHA256: f.SHA256}
			if cf.FileName != "" {
				if p := filepath.Join(c.dirs.Models, cf.FileName); fileExists(p) {
					cf.LocalPath = p
				}
				cf.Partial = partial[cf.FileName]
			}
			d, err := c.catalogDesc(m, f, cf.LocalPath)
			if err == nil {
				cf.Estimate, err = evaluate(d, estimate.Options{Ctx: ctx, KV: t, Backend: c.machine.backendChoice().Backend, Threads: cfg.Threads}, b, src)
				cf.Estimate.TokPerSec, cf.Estimate.SpeedNote = c.machine.expectDecode(d)
			}
			if err != nil {
				cf.Estimate = Estimate{Verdict: estimate.Unknown.String(), Limits: []KVLimit{},
					Advice: []string{"no estimate: " + err.Error()}, BudgetSource: src, Approx: true}
			}
			c.mu.Lock()
			if r := c.downloads[downloadKey(m.ID, f.Quant)]; r != nil {
				d := r.d
				cf.Download = &d
			}
			c.mu.Unlock()
			e.Files = append(e.Files, cf)
		}
		out = append(out, e)
	}
	return out, nil
}

// catalogDesc is the best description of a catalog file at hand: the
// downloaded file's header, the header read over HTTP, else the catalog's
// listed numbers. The catalog's other files stay the advice's smaller
// quantizations.
func (c *catalogBrowser) catalogDesc(m *catalog.Model, f catalog.File, local string) (estimate.Desc, error) {
	listed, err := estimate.FromCatalog(m, f.Quant)
	if err != nil {
		return estimate.Desc{}, err
	}
	var exact *estimate.Desc
	if local != "" {
		if _, d := c.files.inspect(local); d != nil {
			exact = d
		}
	}
	if exact == nil && f.URL() != "" {
		c.mu.Lock()
		if d, ok := c.headers[f.URL()]; ok {
			exact = &d
		}
		c.mu.Unlock()
	}
	if exact == nil {
		return listed, nil
	}
	d := *exact
	d.Name, d.Alternatives = m.Name, listed.Alternatives
	return d, nil
}

// estimate reads the header of a catalog file by HTTP range
// requests (a few hundred KB, not the file) and returns the exact
// estimate at the settings' context and KV type. Headers are kept for the
// rest of the run, so Catalog shows them too.
func (c *catalogBrowser) estimate(id, quant string) (Estimate, error) {
	m, f, err := catalogFile(id, quant)
	if err != nil {
		return Estimate{}, err
	}
	url := f.URL()
	if url == "" {
		return Estimate{}, fmt.Errorf("%s %s has no download address, so its header cannot be read", m.Name, f.Quant)
	}
	c.mu.Lock()
	_, have := c.headers[url]
	c.mu.Unlock()
	if !have {
		ctx, cancel := context.WithTimeout(c.ctx, headerTimeout)
		d, err := estimate.FromURL(ctx, c.client, url)
		cancel()
		if err != nil {
			return Estimate{}, fmt.Errorf("reading the header of %s: %s", f.FileName(), strings.TrimPrefix(err.Error(), "read "))
		}
		c.mu.Lock()
		c.headers[url] = d
		c.mu.Unlock()
	}
	d, err := c.catalogDesc(m, f, "")
	if err != nil {
		return Estimate{}, err
	}
	cfg := c.store.Get()
	t, err := parseKV(cfg.KVType)
	if err != nil {
		return Estimate{}, fmt.Errorf("settings kvType: %w", err)
	}
	ctx := cfg.ContextTokens
	if ct := d.HParams.CtxTrain; ct > 0 && ctx > ct {
		ctx = ct
	}
	b, src := c.machine.budget()
	e, err := evaluate(d, estimate.Options{Ctx: ctx, KV: t, Backend: c.machine.backendChoice().Backend, Threads: cfg.Threads}, b, src)
	if err != nil {
		return Estimate{}, err
	}
	e.TokPerSec, e.SpeedNote = c.machine.expectDecode(d)
	return e, nil
}
