package service

import (
	"testing"

	"nibble/app/settings"
	"nibble/catalog"
)

// The picker grades a mixture of experts by all its weights, which stay
// resident, and shows what a token reads beside them: Qwen3-30B-A3B fits
// 24 GiB and not 16, and says it reads about a ninth of its weights a
// token; Mixtral does not fit 24 GiB either. A dense entry shows no read
// figure.
func TestCatalogMixtureOfExperts(t *testing.T) {
	t.Setenv(catalog.CatalogFileEnv, "")
	s, _ := newService(t)
	if err := s.store.Update(func(c *settings.Settings) error { c.ContextTokens, c.KVType = 4096, "q4"; return nil }); err != nil {
		t.Fatal(err)
	}
	entry := func(id string) CatalogFile {
		t.Helper()
		return catalogEntryFile(t, s, id)
	}
	for _, c := range []struct {
		limit   int64
		qwen    string
		mixtral string
	}{
		{24 << 30, "fits", "will-not-fit"},
		{16 << 30, "will-not-fit", "will-not-fit"},
	} {
		setLimit(t, s, c.limit)
		q, mx := entry("qwen3-30b-a3b").Estimate, entry("mixtral-8x7b-instruct-v0.1").Estimate
		if q.Verdict != c.qwen || mx.Verdict != c.mixtral {
			t.Errorf("in %d GiB: qwen3-30b-a3b %s (%d bytes), mixtral %s (%d bytes); want %s, %s",
				c.limit>>30, q.Verdict, q.Total, mx.Verdict, mx.Total, c.qwen, c.mixtral)
		}
		if q.Weights != 18556685824 || q.Experts != 128 || q.ExpertsUsed != 8 || q.Active <= 0 || q.Active*8 > q.Weights || q.Approx || !q.ActiveApprox {
			t.Errorf("qwen3-30b-a3b: weights %d, %d of %d experts, %d read per token", q.Weights, q.ExpertsUsed, q.Experts, q.Active)
		}
		if mx.Experts != 8 || mx.ExpertsUsed != 2 || mx.Active <= 0 {
			t.Errorf("mixtral: %d of %d experts, %d read per token", mx.ExpertsUsed, mx.Experts, mx.Active)
		}
	}
	if d := entry("llama-3.1-8b-instruct").Estimate; d.Active != 0 || d.Experts != 0 {
		t.Errorf("dense entry shows %d read per token, %d experts", d.Active, d.Experts)
	}
}
