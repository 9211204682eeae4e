// Package backendtest is the backend conformance suite, written once and run
// against any backend.Backend: every op on random inputs over the shapes the
// engine uses, against float64 references computed from the formats'
// definitions (the ggml weight blocks through quant.Dequantize, the KV cache
// format of docs/ARCHITECTURE.md decoded here from its bytes), and the
// contract's rules (host slices copied when an op is issued, contract
// violations reported at Sync, memory counted and given back). The CPU
// backend runs it in go test ./engine/...; the Metal backend runs it with
// its device (the MSL emulator on Linux).
//
// Inputs reach a backend the way the engine's do: weights through
// MapWeights, activations through Embed of F32 tables (exact; Embed is
// checked first, against Read).
//
// Tolerances, per op:
//
//	get_rows       |Δ| ≤ 2^-20·max|row|: dequantized rows (a device may fuse d·q+m)
//	mat-vec/-mat   |Δ_i| ≤ c_T·‖w_i∘x‖₂ (F16 c = 2e-3, BF16 1.4e-2: activations
//	               rounded to the weight's type) or c_T·‖w_i‖₂·‖x‖∞ (block types,
//	               c = 1.4e-2: 8-bit activations), + 6e-4·Σ|w_ij·x_j| for block types
//	               (fp16 block scales) + 1e-5·Σ|w_ij·x_j| (f32 accumulation)
//	rms_norm       |Δ| ≤ 1e-5·|want| + 1e-6·max|row|
//	rope           |Δ| ≤ (4e-6 + 4·pos·2^-23)·max|x|: an f32 angle is off by ~pos·2^-23
//	swiglu         |Δ| ≤ 1e-5·|want| + 1e-7
//	add, add_bias  exact (one f32 add); copy, read, argmax: exact
//	experts        route: the ids exact, weights 1e-5·|want| + 1e-7; matmul-id:
//	               mat-vec's; add-bias-id exact; sum 1e-6·|want| + 1e-6·max|w·y|;
//	               clamped swiglu as swiglu
//	kv append      codes and metadata equal the format's, except at rounding ties:
//	               every value within one quantization step (f16: one ulp), at most
//	               1% of elements differing
//	decode attn    per query head ‖Δ‖₂/‖want‖₂ ≤ 2e-4 against the stored values
//	prefill attn   per query head ‖Δ‖₂/‖want‖₂ ≤ 1e-3 (new rows through f16)
package backendtest

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/ggml"
)

// Factory makes a fresh backend for one test; the suite closes it.
type Factory func(t *testing.T) backend.Backend

// Run runs the whole suite against the backends newBackend makes, one per
// subtest.
func Run(t *testing.T, newBackend Factory) {
	t.Run("Embed", func(t *testing.T) { testEmbed(start(t, newBackend)) })
	t.Run("Memory", func(t *testing.T) { testMemory(start(t, newBackend)) })
	t.Run("MapWeights", func(t *testing.T) { testMapWeights(start(t, newBackend)) })
	t.Run("MatMul", func(t *testing.T) { testMatMul(start(t, newBackend)) })
	t.Run("RMSNorm", func(t *testing.T) { testRMSNorm(start(t, newBackend)) })
	t.Run("AddBias", func(t *testing.T) { testAddBias(start(t, newBackend)) })
	t.Run("RoPE", func(t *testing.T) { testRoPE(start(t, newBackend)) })
	t.Run("SwiGLU", func(t *testing.T) { testSwiGLU(start(t, newBackend)) })
	t.Run("AddCopyRead", func(t *testing.T) { testAddCopyRead(start(t, newBackend)) })
	t.Run("Argmax", func(t *testing.T) { testArgmax(start(t, newBackend)) })
	t.Run("KVStore", func(t *testing.T) { testKVStore(start(t, newBackend)) })
	t.Run("AttendDecode", func(t *testing.T) { testAttendDecode(start(t, newBackend)) })
	t.Run("AttendPrefill", func(t *testing.T) { testAttendPrefill(start(t, newBackend)) })
	t.Run("Gemma4Ops", func(t *testing.T) { testGemma4Ops(start(t, newBackend)) })
	t.Run("ExpertScaler", func(t *testing.T) { testExpertScaler(start(t, newBackend)) })
	t.Run("HostSlicesCopied", func(t *testing.T) { testHostSlicesCopied(start(t, newBackend)) })
	t.Run("ErrorsAtSync", func(t *testing.T) { testErrorsAtSync(start(t, newBackend)) })
	t.Run("Experts", func(t *testing.T) { testExperts(start(t, newBackend)) })
}

// harness is one subtest's backend, its weight mappings and a generator
// seeded by the test's name (same inputs every run).
type harness struct {
	t    *testing.T
	b    backend.Backend
	rng  *rand.Rand
	maps []backend.Mapping
}

func start(t *testing.T, newBackend Factory) *harness {
	b := newBackend(t)
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	hs := &harness{t: t, b: b, rng: rand.New(rand.NewPCG(h.Sum64(), 0x6e6962626c65))}
	t.Cleanup(func() {
		for _, m := range hs.maps {
			if err := m.Close(); err != nil {
				t.Errorf("closing a weight mapping: %v", err)
			}
		}
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return hs
}

// regionLead is where the first tensor starts in a region: not 0, so a
// handle that ignores its offset reads the wrong bytes.
const regionLead = 96

// mapWeights lays the tensors out in one region (each at a 32-byte aligned
// offset, as GGUF does) and maps them.
func (h *harness) mapWeights(ds []backend.WeightDesc, data [][]byte) []backend.Weight {
	h.t.Helper()
	m, err := h.b.MapWeights(Layout(ds, data, regionLead), ds)
	if err != nil {
		h.t.Fatalf("MapWeights: %v", err)
	}
	h.maps = append(h.maps, m)
	if w := m.Weights(); len(w) != len(ds) {
		h.t.Fatalf("MapWeights made %d handles for %d descriptors", len(w), len(ds))
	}
	return m.Weights()
}

// Layout lays tensors out in one region as a GGUF file's data section
// does: the first at byte lead, each next one at the following 32-byte
// boundary. It sets each descriptor's Offset and returns the region, data[i]
// holding ds[i]'s bytes.
func Layout(ds []backend.WeightDesc, data [][]byte, lead int64) []byte {
	off := lead
	for i := range ds {
		ds[i].Offset = off
		off = (off + int64(len(data[i])) + 31) &^ 31
	}
	region := make([]byte, off)
	for i, d := range ds {
		copy(region[d.Offset:], data[i])
	}
	return region
}

// weight maps one tensor.
func (h *harness) weight(name string, typ ggml.Type, rows, cols int, data []byte) backend.Weight {
	return h.mapWeights([]backend.WeightDesc{{Name: name, Type: typ, Rows: rows, Cols: cols}}, [][]byte{data})[0]
}

// upload returns a new tensor holding x, rows of width floats, written by
// Embed from an F32 table.
func (h *harness) upload(x []float32, width int) backend.Tensor {
	h.t.Helper()
	rows := len(x) / width
	t := h.b.Alloc(len(x))
	h.b.Embed(t, h.weight("upload", ggml.F32, rows, width, f32Bytes(x)), iota32(rows))
	return t
}

func (h *harness) sync() {
	h.t.Helper()
	if err := h.b.Sync(); err != nil {
		h.t.Fatalf("Sync: %v", err)
	}
}

// read syncs and returns n floats of t from off.
func (h *harness) read(t backend.Tensor, off, n int) []float32 {
	h.t.Helper()
	h.sync()
	out := make([]float32, n)
	h.b.Read(out, t, off)
	return out
}

func (h *harness) normals(n int, std float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(h.rng.NormFloat64() * std)
	}
	return x
}

func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func iota32(n int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
	}
	return ids
}

func maxAbs[T float32 | float64](x []T) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

// closeTo fails when |got[i] - want[i]| > rel·|want[i]| + abs for some i,
// naming the first such element.
func closeTo(t *testing.T, what string, got []float32, want []float64, rel, abs float64) {
	t.Helper()
	for i, w := range want {
		if d := math.Abs(float64(got[i]) - w); !(d <= rel*math.Abs(w)+abs) {
			t.Fatalf("%s: element %d is %g, want %g (|Δ| %.3g > %.3g)", what, i, got[i], w, d, rel*math.Abs(w)+abs)
		}
	}
}
