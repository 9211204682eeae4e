package speed

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/quant"
)

// Rate is what the CPU achieves on the decode step's work.
type Rate struct {
	Type ggml.Type
	// BytesPerSec is the mat-vec's rate on a matrix of Type that leaves
	// the caches.
	BytesPerSec float64
	// PerOp is the cost of one small operation (a mat-vec whose matrix
	// is in cache): the threads' hand-off, paid by every op of a step.
	PerOp float64
}

// probeBytes is the probe's matrix: larger than any CPU's last-level
// cache, small enough to fill and time in well under a second.
const probeBytes = 96 << 20

var (
	probeMu sync.Mutex
	probed  = map[[2]int]Rate{}
)

// Probe measures the CPU backend on threads (<= 0: all cores) with weights
// of type t (a type the CPU cannot compute with is measured as Q8_0). The
// first call per type takes a few hundred milliseconds; later ones return
// the figure kept for the process.
func Probe(threads int, t ggml.Type) (Rate, error) {
	if !quant.Supported(t) {
		t = ggml.Q8_0
	}
	probeMu.Lock()
	defer probeMu.Unlock()
	key := [2]int{threads, int(t)}
	if r, ok := probed[key]; ok {
		return r, nil
	}
	r, err := measure(threads, t)
	if err != nil {
		return Rate{}, fmt.Errorf("speed probe (%s): %w", t, err)
	}
	probed[key] = r
	return r, nil
}

func measure(threads int, t ggml.Type) (Rate, error) {
	const cols = 4096
	rowBytes := t.RowBytes(cols)
	rows := probeBytes / rowBytes
	region := make([]byte, rows*rowBytes)
	// Written, not left zero: untouched pages all map the one zero page,
	// which stays in cache. 0x11 makes small normal f16 scales.
	for i := range region {
		region[i] = 0x11
	}
	b := cpu.New(threads)
	defer b.Close()
	const smallRows = 64
	m, err := b.MapWeights(region, []backend.WeightDesc{
		{Name: "probe", Type: t, Rows: rows, Cols: cols},
		{Name: "small", Type: t, Rows: smallRows, Cols: cols},
	})
	if err != nil {
		return Rate{}, err
	}
	defer m.Close()
	big, small := m.Weights()[0], m.Weights()[1]
	x, dst := b.Alloc(cols), b.Alloc(rows)
	defer b.Free(x)
	defer b.Free(dst)
	times := func(w backend.Weight, n int) []float64 {
		ts := make([]float64, n)
		for i := range ts {
			t0 := time.Now()
			b.MatMul(dst, w, x, 1)
			ts[i] = time.Since(t0).Seconds()
		}
		slices.Sort(ts)
		return ts
	}
	times(big, 1) // faults the region in
	// The fastest pass is what the memory gives: a pass is a few
	// milliseconds, so a burst of other work can slow any one of them
	// (and the median of a few) far more than it slows a whole decode.
	bigSec := times(big, 15)[0]
	// One small op's hand-off: the median, as every op of a step pays it.
	perOp := times(small, 200)[100]
	if err := b.Sync(); err != nil {
		return Rate{}, err
	}
	return Rate{Type: t, BytesPerSec: float64(len(region)) / bigSec, PerOp: perOp}, nil
}

// opsPerLayer are a llama-style layer's decode operations: norm, q, k, v,
// two RoPEs, KV store, attention, o, add, norm, gate, up, SwiGLU, down, add.
const opsPerLayer = 16

// CPU is the expected decode rate of p on the CPU at r, for a model of
// layers layers.
func CPU(p PerToken, r Rate, layers int) float64 {
	return TokensPerSecond(p, r.BytesPerSec, float64(layers*opsPerLayer+4)*r.PerOp)
}

// attnProbe is the geometry the attention probe times: a 1B-class layer
// (32 query heads of 64 over 8 KV heads) at 2048 positions.
var attnProbe = struct{ heads, kvHeads, headDim, n int }{32, 8, 64, 2048}

var attnProbed = map[[2]int]float64{}

// AttentionCost is the CPU's decode attention time per query head, head
// dimension and cached position, with a cache of type t: on the CPU
// attention over a long context is bound by its arithmetic (dequantizing
// and accumulating), not by the bytes it reads. Measured once per process
// and type, in a few tens of milliseconds.
func AttentionCost(threads int, t kv.Type) (float64, error) {
	probeMu.Lock()
	defer probeMu.Unlock()
	key := [2]int{threads, int(t)}
	if c, ok := attnProbed[key]; ok {
		return c, nil
	}
	g := attnProbe
	b := cpu.New(threads)
	defer b.Close()
	c, err := b.NewKVCache(kv.Config{Type: t, GroupSize: 32, Layers: 1, KVHeads: g.kvHeads, HeadDim: g.headDim, Ctx: g.n}, g.heads, 1)
	if err != nil {
		return 0, fmt.Errorf("speed attention probe (%s): %w", t, err)
	}
	defer c.Close()
	k, v := b.Alloc(g.kvHeads*g.headDim), b.Alloc(g.kvHeads*g.headDim)
	for pos := 0; pos < g.n; pos++ {
		b.KVStore(c, 0, k, v, pos, 1)
	}
	q, out := b.Alloc(g.heads*g.headDim), b.Alloc(g.heads*g.headDim)
	a := &backend.Attention{Heads: g.heads, KVHeads: g.kvHeads, HeadDim: g.headDim, Scale: 0.125}
	ts := make([]float64, 9)
	for i := range ts {
		t0 := time.Now()
		b.AttendDecode(out, q, c, 0, g.n, a)
		ts[i] = time.Since(t0).Seconds()
	}
	if err := b.Sync(); err != nil {
		return 0, fmt.Errorf("speed attention probe (%s): %w", t, err)
	}
	slices.Sort(ts)
	cost := ts[len(ts)/2] / float64(g.heads*g.headDim*g.n)
	attnProbed[key] = cost
	return cost, nil
}

// CPUAt is CPU with the attention's arithmetic added: perPos seconds per
// query head, head dimension and position (AttentionCost), over the
// positions each layer attends to in its head dim (p.HeadDimPositions).
func CPUAt(p PerToken, r Rate, layers, heads int, perPos float64) float64 {
	if r.BytesPerSec <= 0 || p.Bytes() <= 0 {
		return 0
	}
	fixed := float64(layers*opsPerLayer+4)*r.PerOp + float64(int64(heads)*p.HeadDimPositions)*perPos
	return 1 / (float64(p.Bytes())/r.BytesPerSec + fixed)
}
