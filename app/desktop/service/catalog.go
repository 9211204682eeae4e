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

// catalogState is the catalog's part of the service: headers read over
// HTTP, and the downloads of this run.
type catalogState struct {
	client *http.Client
	dl     *download.Manager
	ctx    context.Context // ends at Close, and with it every download
	cancel context.CancelFunc
	wg     sync.WaitGroup // download followers

	mu        sync.Mutex
	headers   map[string]estimate.Desc // by URL
	downloads map[string]*dlRecord     // by Download.Key
}

func (s *Service) initCatalog() {
	c := &s.cat
	// No overall timeout: a model download takes as long as it takes; the
	// download package ends stalled transfers itself.
	c.client = &http.Client{}
	c.dl = download.NewManager(download.Options{Client: c.client, ProgressInterval: progressInterval})
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.headers = map[string]estimate.Desc{}
	c.downloads = map[string]*dlRecord{}
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

// Catalog lists the catalog's models (catalog.Active: the built-in one, or
// $NIBBLE_CATALOG_FILE), each file with its estimate here at the settings'
// context (at most the model's trained one) and KV type. The estimate is
// exact once the header was read (CatalogEstimate) or the file is
// downloaded, and from the listed size (Approx) before.
func (s *Service) Catalog() ([]CatalogEntry, error) {
	cat, err := catalog.Active()
	if err != nil {
		return nil, err
	}
	c := s.store.Get()
	t, err := parseKV(c.KVType)
	if err != nil {
		return nil, fmt.Errorf("catalog: settings kvType: %w", err)
	}
	b, src := s.budget()
	partial := map[string]int64{}
	if parts, err := download.Partial(s.dirs.Models); err == nil {
		for _, p := range parts {
			partial[p.Name] = p.Done
		}
	}
	out := make([]CatalogEntry, 0, len(cat.Models))
	for i := range cat.Models {
		m := &cat.Models[i]
		e := CatalogEntry{ID: m.ID, Name: m.Name, Family: m.Family, ParamsB: m.ParamsB, CtxTrain: m.CtxTrain,
			Note: m.Note, Runnable: model.Supported(m.Arch), Files: make([]CatalogFile, 0, len(m.Files))}
		ctx := min(c.ContextTokens, m.CtxTrain)
		for _, f := range m.Files {
			cf := CatalogFile{Quant: f.Quant, FileName: f.FileName(), URL: f.URL(), Size: f.SizeBytes,
				SizeApprox: f.SizeApprox, SHA256: f.SHA256}
			if cf.FileName != "" {
				if p := filepath.Join(s.dirs.Models, cf.FileName); fileExists(p) {
					cf.LocalPath = p
				}
				cf.Partial = partial[cf.FileName]
			}
			d, err := s.catalogDesc(m, f, cf.LocalPath)
			if err == nil {
				cf.Estimate, err = evaluate(d, estimate.Options{Ctx: ctx, KV: t, Backend: s.backendChoice().Backend, Threads: c.Threads}, b, src)
			}
			if err != nil {
				cf.Estimate = Estimate{Verdict: estimate.Unknown.String(), Limits: []KVLimit{},
					Advice: []string{"no estimate: " + err.Error()}, BudgetSource: src, Approx: true}
			}
			s.cat.mu.Lock()
			if r := s.cat.downloads[downloadKey(m.ID, f.Quant)]; r != nil {
				d := r.d
				cf.Download = &d
			}
			s.cat.mu.Unlock()
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
func (s *Service) catalogDesc(m *catalog.Model, f catalog.File, local string) (estimate.Desc, error) {
	listed, err := estimate.FromCatalog(m, f.Quant)
	if err != nil {
		return estimate.Desc{}, err
	}
	var exact *estimate.Desc
	if local != "" {
		if _, d := s.inspect(local); d != nil {
			exact = d
		}
	}
	if exact == nil && f.URL() != "" {
		s.cat.mu.Lock()
		if d, ok := s.cat.headers[f.URL()]; ok {
			exact = &d
		}
		s.cat.mu.Unlock()
	}
	if exact == nil {
		return listed, nil
	}
	d := *exact
	d.Name, d.Alternatives = m.Name, listed.Alternatives
	return d, nil
}

// CatalogEstimate reads the header of a catalog file by HTTP range
// requests (a few hundred KB, not the file) and returns the exact
// estimate at the settings' context and KV type. Headers are kept for the
// rest of the run, so Catalog shows them too.
func (s *Service) CatalogEstimate(id, quant string) (Estimate, error) {
	m, f, err := catalogFile(id, quant)
	if err != nil {
		return Estimate{}, err
	}
	url := f.URL()
	if url == "" {
		return Estimate{}, fmt.Errorf("%s %s has no download address, so its header cannot be read", m.Name, f.Quant)
	}
	s.cat.mu.Lock()
	_, have := s.cat.headers[url]
	s.cat.mu.Unlock()
	if !have {
		ctx, cancel := context.WithTimeout(s.cat.ctx, headerTimeout)
		d, err := estimate.FromURL(ctx, s.cat.client, url)
		cancel()
		if err != nil {
			return Estimate{}, fmt.Errorf("reading the header of %s: %s", f.FileName(), strings.TrimPrefix(err.Error(), "read "))
		}
		s.cat.mu.Lock()
		s.cat.headers[url] = d
		s.cat.mu.Unlock()
	}
	d, err := s.catalogDesc(m, f, "")
	if err != nil {
		return Estimate{}, err
	}
	c := s.store.Get()
	t, err := parseKV(c.KVType)
	if err != nil {
		return Estimate{}, fmt.Errorf("settings kvType: %w", err)
	}
	ctx := c.ContextTokens
	if ct := d.HParams.CtxTrain; ct > 0 && ctx > ct {
		ctx = ct
	}
	b, src := s.budget()
	return evaluate(d, estimate.Options{Ctx: ctx, KV: t, Backend: s.backendChoice().Backend, Threads: c.Threads}, b, src)
}
