package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"nibble/engine/cpu/attention"
	"nibble/engine/kv"
	"nibble/engine/parallel"
)

func init() {
	Register(&Command{
		Name:  "bench attention",
		Usage: "[--n 1024,8192,32768,131072] [--d 128] [--hq 32] [--hkv 8] [--threads N] [--kv-group 32] [--reps 7] [--overhead=false] [--json]",
		Run:   benchAttentionCmd,
	})
}

type benchAttentionRow struct {
	N           int     `json:"n"`
	FusedQ4Ms   float64 `json:"fused_q4_ms"`
	DequantQ4Ms float64 `json:"dequant_q4_ms"`
	F16Ms       float64 `json:"f16_ms"`
	Q8Ms        float64 `json:"q8_ms"`
	Q4Bytes     int64   `json:"q4_bytes"`
	F16Bytes    int64   `json:"f16_bytes"`
	// Overhead is the fused q4 step with K rotation, score export and both,
	// timed in the same run (absent with --overhead=false).
	Overhead *benchAttentionOverhead `json:"overhead,omitempty"`
}

// benchAttentionOverhead times q4 decode attention with the rotation of K
// (kv Config.Rotate: the query is rotated once per kv head) and the
// pre-softmax score export (attention.DecodeScores) against the plain fused
// q4 step of the same row; the ratios are time / plain.
type benchAttentionOverhead struct {
	PlainMs        float64 `json:"plain_ms"`
	RotMs          float64 `json:"rot_ms"`
	ExportMs       float64 `json:"export_ms"`
	RotExportMs    float64 `json:"rot_export_ms"`
	RotRatio       float64 `json:"rot_ratio"`
	ExportRatio    float64 `json:"export_ratio"`
	RotExportRatio float64 `json:"rot_export_ratio"`
}

type benchAttentionReport struct {
	D          int                 `json:"d"`
	Hq         int                 `json:"hq"`
	Hkv        int                 `json:"hkv"`
	Threads    int                 `json:"threads"`
	ColdCaches bool                `json:"cold_caches"`
	Results    []benchAttentionRow `json:"results"`
}

// benchAttentionCmd times one layer's decode attention step at each context
// length for the fused q4 kernel, the dequantize-then-attend baseline over
// the same q4 cache, and the f16 and q8 kernels (random K/V), and unless
// --overhead=false the fused q4 kernel over a rotated cache, with the score
// export, and both; lengths and
// variants are interleaved within each repetition and the median of the
// repetitions is reported, with the K/V bytes each step reads.
func benchAttentionCmd(env *Env, args []string) error {
	fs := NewFlags(env, "bench attention")
	nList := fs.String("n", "1024,8192,32768,131072", "comma-separated context lengths")
	d := fs.Int("d", 128, "head dim")
	hq := fs.Int("hq", 32, "query heads")
	hkv := fs.Int("hkv", 8, "kv heads")
	threads := fs.Int("threads", 0, "worker threads (0: all cores)")
	group := fs.Int("kv-group", kv.DefaultGroupSize, "q4/q8 group size: 32 or 64")
	reps := fs.Int("reps", 7, "timed repetitions per variant (median reported)")
	asJSON := fs.Bool("json", false, "print JSON")
	overhead := fs.Bool("overhead", true, "also time fused q4 with K rotation, with score export and with both, and report their overhead vs plain")
	warm := fs.Bool("warm", false, "keep CPU caches warm between steps (default: evict them, as the other layers of a real decode step do)")
	if _, err := ParseFlags(fs, args); err != nil {
		return err
	}
	ns, err := parseInts("--n", *nList)
	if err != nil {
		return err
	}
	if err := checkIntFlags(
		intBound{"--d", *d, 1},
		intBound{"--hq", *hq, 1},
		intBound{"--hkv", *hkv, 1},
		intBound{"--threads", *threads, 0},
		intBound{"--reps", *reps, 1},
	); err != nil {
		return err
	}
	p := attention.Params{Heads: *hq, KVHeads: *hkv, HeadDim: *d, Scale: float32(1 / math.Sqrt(float64(*d)))}
	if _, err := attention.NewDequantBuffers(p, 1); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err := (kv.Config{Type: kv.Q4, GroupSize: *group, Layers: 1, KVHeads: *hkv, HeadDim: *d, Ctx: 1}).Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *overhead {
		if err := (kv.Config{Type: kv.Q4, GroupSize: *group, Layers: 1, KVHeads: *hkv, HeadDim: *d, Ctx: 1, Rotate: true}).Validate(); err != nil {
			return fmt.Errorf("%w: the rotation variant of --overhead: %v (pass --overhead=false)", ErrUsage, err)
		}
	}
	for _, n := range ns {
		if n < 1 || n > 1<<22 {
			return fmt.Errorf("%w: --n lengths must be in [1, %d], got %d", ErrUsage, 1<<22, n)
		}
	}
	pool := parallel.NewPool(*threads)
	defer pool.Close()
	rows, err := benchAttention(env, pool, p, *group, ns, *reps, *overhead, !*warm, !*asJSON)
	if err != nil {
		return err
	}
	rep := benchAttentionReport{D: *d, Hq: *hq, Hkv: *hkv, Threads: pool.Threads(), ColdCaches: !*warm, Results: rows}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printAttentionTable(env, rep, *group)
	return nil
}

// benchAttention fills one-layer caches of every type for the longest
// context once; each length is timed on a prefix of them (the layout is
// per kv head, so a prefix reads exactly what a cache of that length
// would). Every repetition runs all lengths and variants in turn, so load
// from other processes spreads over all of them alike.
//
// With cold set, the CPU caches are evicted (untimed) before every step: in
// a real decode step each layer's K/V is read once and the other layers'
// K/V and weights pass through the caches before it is read again, so a
// short context must not be timed out of a warm last-level cache.
func benchAttention(env *Env, pool *parallel.Pool, p attention.Params, gs int, ns []int, reps int, overhead, cold, progress bool) ([]benchAttentionRow, error) {
	maxN := 0
	for _, n := range ns {
		maxN = max(maxN, n)
	}
	caches := map[kv.Type]*kv.Cache{}
	for _, t := range kv.Types {
		c, err := kv.New(kv.Config{Type: t, GroupSize: gs, Layers: 1, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Ctx: maxN}, nil)
		if err != nil {
			return nil, err
		}
		if err := fillRandom(pool, c, maxN, uint64(t)+1); err != nil {
			return nil, err
		}
		caches[t] = c
		if progress {
			fmt.Fprintf(env.Stderr, "filled %v cache with %d positions\n", t, maxN)
		}
	}
	var rotated *kv.Cache
	if overhead {
		// The same positions as the plain q4 cache, stored rotated.
		c, err := kv.New(kv.Config{Type: kv.Q4, GroupSize: gs, Layers: 1, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Ctx: maxN, Rotate: true}, nil)
		if err != nil {
			return nil, fmt.Errorf("rotated q4 cache: %w", err)
		}
		if err := fillRandom(pool, c, maxN, uint64(kv.Q4)+1); err != nil {
			return nil, err
		}
		rotated = c
		if progress {
			fmt.Fprintf(env.Stderr, "filled rotated q4 cache with %d positions\n", maxN)
		}
	}
	ws := attention.NewWorkspace(p, maxN, 0, pool.Threads(), nil)
	buf, err := attention.NewDequantBuffers(p, maxN)
	if err != nil {
		return nil, err
	}
	q := make([]float32, p.Heads*p.HeadDim)
	fillNormal(q, 99)
	out := make([]float32, len(q))
	type variant struct {
		n   int
		run func(n int) error
	}
	kinds := []func(n int) error{
		func(n int) error { return attention.Decode(pool, ws, out, q, caches[kv.Q4], 0, n, p) },
		func(n int) error { return attention.DecodeDequantThenAttend(pool, buf, out, q, caches[kv.Q4], 0, n, p) },
		func(n int) error { return attention.Decode(pool, ws, out, q, caches[kv.F16], 0, n, p) },
		func(n int) error { return attention.Decode(pool, ws, out, q, caches[kv.Q8], 0, n, p) },
	}
	const plainKinds = 4
	if overhead {
		scores := make([]float32, p.Heads*maxN)
		kinds = append(kinds,
			func(n int) error { return attention.Decode(pool, ws, out, q, rotated, 0, n, p) },
			func(n int) error {
				return attention.DecodeScores(pool, ws, out, q, caches[kv.Q4], 0, n, p, scores, maxN)
			},
			func(n int) error { return attention.DecodeScores(pool, ws, out, q, rotated, 0, n, p, scores, maxN) },
		)
	}
	var vs []variant
	for _, n := range ns {
		for _, k := range kinds {
			vs = append(vs, variant{n, k})
		}
	}
	// Warm up, and size each measurement to at least ~5 ms so short steps
	// are not lost in timer and scheduling noise.
	inner := make([]int, len(vs))
	for i, v := range vs {
		start := time.Now()
		if err := v.run(v.n); err != nil {
			return nil, err
		}
		inner[i] = max(1, int(5*time.Millisecond/max(time.Since(start), time.Microsecond)))
	}
	var evict []byte
	if cold {
		evict = make([]byte, evictBytes)
		for i := range inner {
			inner[i] = min(inner[i], 8) // each step pays an untimed eviction
		}
	}
	times := make([][]float64, len(vs))
	for r := 0; r < reps; r++ {
		for i, v := range vs {
			var elapsed time.Duration
			for k := 0; k < inner[i]; k++ {
				if cold {
					evictCaches(pool, evict)
				}
				start := time.Now()
				if err := v.run(v.n); err != nil {
					return nil, err
				}
				elapsed += time.Since(start)
			}
			times[i] = append(times[i], float64(elapsed)/float64(inner[i])/1e6)
		}
	}
	med := make([]float64, len(vs))
	for i := range times {
		med[i] = median(times[i])
	}
	var rows []benchAttentionRow
	for i, n := range ns {
		m := med[i*len(kinds) : (i+1)*len(kinds)]
		perPos := int64(n) * int64(p.KVHeads) * 2
		row := benchAttentionRow{
			N: n, FusedQ4Ms: m[0], DequantQ4Ms: m[1], F16Ms: m[2], Q8Ms: m[3],
			Q4Bytes:  perPos * int64(kv.BytesPerTokenHead(kv.Q4, p.HeadDim, gs)),
			F16Bytes: perPos * int64(kv.BytesPerTokenHead(kv.F16, p.HeadDim, gs)),
		}
		if overhead {
			o := m[plainKinds:]
			row.Overhead = &benchAttentionOverhead{PlainMs: m[0], RotMs: o[0], ExportMs: o[1], RotExportMs: o[2],
				RotRatio: o[0] / m[0], ExportRatio: o[1] / m[0], RotExportRatio: o[2] / m[0]}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// fillRandom appends n positions of pseudo-random normal K/V, in parallel
// over disjoint position ranges.
func fillRandom(pool *parallel.Pool, c *kv.Cache, n int, seed uint64) error {
	cfg := c.Config()
	const chunk = 1024
	row := cfg.KVHeads * cfg.HeadDim
	chunks := (n + chunk - 1) / chunk
	errs := make([]error, chunks)
	pool.For(chunks, 1, func(lo, hi int) {
		k, v := make([]float32, chunk*row), make([]float32, chunk*row)
		for i := lo; i < hi; i++ {
			rows := min(chunk, n-i*chunk)
			fillNormal(k[:rows*row], seed*1e6+uint64(2*i))
			fillNormal(v[:rows*row], seed*1e6+uint64(2*i+1))
			errs[i] = c.Append(0, i*chunk, k, v, rows)
		}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// fillNormal writes approximately standard normal values (sum of four
// uniforms from a splitmix64 stream): cheap, deterministic, no NaN.
func fillNormal(x []float32, seed uint64) {
	s := seed
	next := func() float32 {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		return float32(z>>40) / (1 << 24)
	}
	for i := range x {
		x[i] = (next() + next() + next() + next() - 2) * 1.7320508
	}
}

func printAttentionTable(env *Env, rep benchAttentionReport, gs int) {
	w := env.Stdout
	fmt.Fprintf(w, "decode attention, one layer: D=%d Hq=%d Hkv=%d (GQA %d), q4/q8 group %d, %d threads; ms per step (median)\n",
		rep.D, rep.Hq, rep.Hkv, rep.Hq/rep.Hkv, gs, rep.Threads)
	fmt.Fprintf(w, "%8s %10s %11s %9s %9s %11s %8s %9s %9s %8s %10s\n",
		"n", "fused q4", "dequant q4", "f16", "q8", "dequant/q4", "f16/q4", "q4 MiB", "f16 MiB", "q4 GB/s", "q4 ns/tok")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%8d %10.3f %11.3f %9.3f %9.3f %10.1fx %7.2fx %9.1f %9.1f %8.1f %10.2f\n",
			r.N, r.FusedQ4Ms, r.DequantQ4Ms, r.F16Ms, r.Q8Ms, r.DequantQ4Ms/r.FusedQ4Ms, r.F16Ms/r.FusedQ4Ms,
			float64(r.Q4Bytes)/(1<<20), float64(r.F16Bytes)/(1<<20), float64(r.Q4Bytes)/r.FusedQ4Ms/1e6, r.FusedQ4Ms*1e6/float64(r.N))
	}
	if len(rep.Results) > 0 && rep.Results[0].Overhead != nil {
		fmt.Fprintf(w, "fused q4 with K rotation and score export, same run; ms per step (median) and ratio to plain\n")
		fmt.Fprintf(w, "%8s %10s %9s %9s %11s %8s %8s %11s\n", "n", "plain", "rotate", "export", "rot+export", "rot/q4", "exp/q4", "rot+exp/q4")
		for _, r := range rep.Results {
			o := r.Overhead
			fmt.Fprintf(w, "%8d %10.3f %9.3f %9.3f %11.3f %7.3fx %7.3fx %10.3fx\n",
				r.N, o.PlainMs, o.RotMs, o.ExportMs, o.RotExportMs, o.RotRatio, o.ExportRatio, o.RotExportRatio)
		}
	}
	for i := 1; i < len(rep.Results); i++ {
		a, b := rep.Results[i-1], rep.Results[i]
		fmt.Fprintf(w, "fused q4 n=%d -> n=%d: time ×%.2f for ×%.2f tokens\n", a.N, b.N, b.FusedQ4Ms/a.FusedQ4Ms, float64(b.N)/float64(a.N))
	}
}

// evictBytes is larger than the last-level cache of any machine we run on.
const evictBytes = 128 << 20

// evictCaches writes a buffer larger than the caches from every worker.
func evictCaches(pool *parallel.Pool, buf []byte) {
	pool.For(len(buf), 1<<20, func(lo, hi int) {
		b := buf[lo:hi]
		for i := 0; i < len(b); i += 64 {
			b[i]++
		}
	})
}
