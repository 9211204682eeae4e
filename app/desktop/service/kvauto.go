package service

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"nibble/app/desktop/demo"
	"nibble/engine"
	"nibble/engine/kv"
)

// KVProbeFile, in the data folder, keeps each model file's KV probe result
// so that a model is measured once, not at every load.
const KVProbeFile = "kv-probe.json"

// kvProbeRecord is one model file's probe result; Key names the file's
// version (path, size, modification time).
type kvProbeRecord struct {
	Key    string           `json:"key"`
	Choice *engine.KVChoice `json:"choice"`
}

// kvProbeKey identifies path's current contents well enough that a
// replaced file is measured again.
func kvProbeKey(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s|%d|%d", path, fi.Size(), fi.ModTime().UnixNano()), nil
}

func (s *Service) kvProbePath() string { return filepath.Join(s.dirs.Data, KVProbeFile) }

// readKVProbes reads the cache; a missing or unreadable file is an empty
// cache (the probe runs again and rewrites it).
func (s *Service) readKVProbes() map[string]kvProbeRecord {
	out := map[string]kvProbeRecord{}
	data, err := os.ReadFile(s.kvProbePath())
	if err != nil {
		return out
	}
	var recs []kvProbeRecord
	if json.Unmarshal(data, &recs) != nil {
		return out
	}
	for _, r := range recs {
		if r.Choice != nil {
			out[r.Key] = r
		}
	}
	return out
}

// cachedKVChoice is the stored probe result for path's current contents.
func (s *Service) cachedKVChoice(path string) (*engine.KVChoice, bool) {
	key, err := kvProbeKey(path)
	if err != nil {
		return nil, false
	}
	s.kvProbeMu.Lock()
	defer s.kvProbeMu.Unlock()
	r, ok := s.readKVProbes()[key]
	return r.Choice, ok
}

// storeKVChoice adds c for path to the cache (atomically: a temporary file
// renamed into place), dropping older records of the same path.
func (s *Service) storeKVChoice(path string, c *engine.KVChoice) error {
	key, err := kvProbeKey(path)
	if err != nil {
		return err
	}
	s.kvProbeMu.Lock()
	defer s.kvProbeMu.Unlock()
	recs := []kvProbeRecord{{Key: key, Choice: c}}
	prefix := path + "|"
	for k, r := range s.readKVProbes() {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			continue
		}
		recs = append(recs, r)
	}
	data, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.kvProbePath() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.kvProbePath())
}

// kvAutoText is what the model's info shows for an automatic KV choice.
func kvAutoText(c *engine.KVChoice) string { return "KV auto → " + c.Summary() }

// applyKVProbe measures the model just loaded from path (once per file
// version) and reconfigures it with the choice; the caller holds loadMu.
// It returns the line for the model's info. The demo model is not
// measured: its random weights fail q4 on any text (docs/ARCHITECTURE.md,
// "Choosing the mode per model"), which says nothing about real models.
func (s *Service) applyKVProbe(path string) string {
	if demo.Is(s.dirs.Cache, path) {
		return "KV auto → q4: the demo model's random weights are not measured"
	}
	c, ok := s.cachedKVChoice(path)
	if !ok {
		var (
			probed string
			err    error
		)
		c, probed, err = s.engine().ChooseKV(engine.KVChoiceOptions{Residual: -1})
		if err == nil && probed != path {
			err = fmt.Errorf("measured %s instead", filepath.Base(probed))
		}
		if err != nil {
			return "KV auto: the quality probe failed (" + err.Error() + "); q4 kept"
		}
		if err := s.storeKVChoice(path, c); err != nil {
			return kvAutoText(c) + " (not cached: " + err.Error() + ")"
		}
	}
	info, loaded := s.engine().Info()
	if !loaded || info.Path != path {
		return kvAutoText(c)
	}
	if info.Options.KV != c.Type || info.Options.KVRotate != c.Rotate {
		o := info.Options
		b, _ := s.budget()
		o.KV, o.KVRotate, o.Batch, o.Budget = c.Type, c.Rotate, 0, &b
		if _, err := s.engine().Reconfigure(o); err != nil {
			return kvAutoText(c) + "; not applied: " + err.Error()
		}
	}
	return kvAutoText(c)
}

// autoKV is the KV type and rotation to load path with under "auto": the
// cached probe result, else q4 until the probe has run.
func (s *Service) autoKV(path string) (kv.Type, bool, bool) {
	if demo.Is(s.dirs.Cache, path) {
		return kv.Q4, false, false
	}
	if c, ok := s.cachedKVChoice(path); ok {
		return c.Type, c.Rotate, true
	}
	return kv.Q4, false, false
}
