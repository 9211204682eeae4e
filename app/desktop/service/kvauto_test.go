package service

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/synth"
	"nibble/models/vocab"
)

// With kv_type "auto" a load measures the model once per file version:
// plain q4 fails on a model with attention scale 1.0 and outlier key
// channels, so it runs with q8 and its info says why; the stored result is
// what the next load uses, until the file changes. The demo model is not
// measured.
func TestAutoKVProbesOncePerModelFile(t *testing.T) {
	s, _, _ := loadedService(t)
	if st := s.Status(); st.Model == nil || st.Model.KV != "q4" || !strings.Contains(st.Model.KVAuto, "demo model") {
		t.Fatalf("demo model: %+v", st.Model)
	}
	o := synth.DefaultOptions("llama")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 256, 4, 2, 512
	o.Type, o.Seed, o.VocabData = ggml.F16, 7, vocab.LlamaSPM
	o.AttnScale, o.KeyOutliers, o.KeyOutlierGain = 1, 2, 20
	path := filepath.Join(s.dirs.Models, "outliers.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	load := func() *Model {
		t.Helper()
		st, err := s.LoadModel(LoadRequest{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		if st.Model == nil || st.Model.Path != path {
			t.Fatalf("status %+v", st.Model)
		}
		return st.Model
	}
	m := load()
	t.Log(m.KVAuto)
	if m.KV != "q8" || !strings.HasPrefix(m.KVAuto, "KV auto → q8 (top-1 ") || !strings.Contains(m.KVAuto, "attention scale") {
		t.Fatalf("kv %q, info %q: want q8 chosen for the attention scale", m.KV, m.KVAuto)
	}
	if s.Settings().KVType != "auto" {
		t.Fatalf("kv_type %q after the load, want auto kept", s.Settings().KVType)
	}

	// Plant another choice in the cache: the next load takes it unmeasured.
	var recs []kvProbeRecord
	data, err := os.ReadFile(filepath.Join(s.dirs.Data, KVProbeFile))
	if err == nil {
		err = json.Unmarshal(data, &recs)
	}
	if err != nil || len(recs) != 1 {
		t.Fatalf("cache: %d records, %v", len(recs), err)
	}
	recs[0].Choice.Type, recs[0].Choice.Rotate, recs[0].Choice.Reason = kv.Q4, true, "planted in the cache"
	if data, err = json.Marshal(recs); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(s.dirs.Data, KVProbeFile), data)
	if m := load(); m.KV != "q4" || !strings.Contains(m.KVAuto, "planted in the cache") {
		t.Fatalf("kv %q, info %q: want the cached q4+rot", m.KV, m.KVAuto)
	}

	// A changed file is measured again.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if m := load(); m.KV != "q8" || strings.Contains(m.KVAuto, "planted") {
		t.Fatalf("kv %q, info %q after the file changed: want q8 measured again", m.KV, m.KVAuto)
	}

	// An explicit type is not overridden, and the probe's line goes.
	st, err := s.ApplyContext(m.Ctx, "f16")
	if err != nil {
		t.Fatal(err)
	}
	if st.Model.KV != "f16" || st.Model.KVAuto != "" {
		t.Fatalf("after choosing f16: kv %q, info %q", st.Model.KV, st.Model.KVAuto)
	}
}
