//go:build linux

package metal_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/kv"
	"nibble/engine/numeric"
	"nibble/engine/quant"
	"nibble/internal/testdata"
)

// trainedModel is the small trained model of ../shared/testdata/trained
// (F16 weights, F32 norms).
const trainedModel = "nibble-docqa-29m-f16.gguf"

// requantize writes a copy of the GGUF file src to dst with every 2-D F16
// tensor (the weight matrices, the token embedding among them) quantized to
// typ; the other tensors (the F32 norms) and every metadata key, the
// tokenizer's included, are copied verbatim.
func requantize(t *testing.T, src, dst string, typ ggml.Type) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys {
		w.SetValue(k, f.KV[k])
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data := f.TensorData(ti)
		if data == nil {
			t.Fatalf("%s: tensor %s is out of the file", src, ti.Name)
		}
		to := ti.Type
		if ti.Type == ggml.F16 && len(ti.Dims) == 2 {
			to = typ
		}
		fill := func(b []byte) error {
			copy(b, data)
			return nil
		}
		if to != ti.Type {
			fill = func(b []byte) error {
				x := make([]float32, ti.Elements())
				if err := quant.Dequantize(ti.Type, x, data); err != nil {
					return err
				}
				return quant.Quantize(to, b, x)
			}
		}
		if err := w.AddTensor(ti.Name, to, ti.Dims, fill); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
}

// The trained model's forward pass on the emulator against the plain CPU
// backend (8-bit activations before quantized matmuls, fp16 before F16
// ones), as is (F16) and requantized here to Q8_0 and Q4_0: trained weights
// do not amplify the activations' rounding as the random-weight models of
// TestForwardMatchesCPU do, so the plain CPU backend is held to the bar
// that test holds the CPU with float activations to: cosine of the last
// prompt position's logits ≥ 0.9999 with an f16 cache and ≥ 0.999 with a
// q4 cache (smoothed), and the same 8 greedy tokens, but for Q8_0 weights
// with a q4 cache, where they part on a near tie that the 8-bit activations
// tip (the figures are at that case): there the tokens against the plain
// CPU are logged and metal's are held to the CPU with float activations'.
func TestForwardTrainedMatchesCPU(t *testing.T) {
	src := filepath.Join(testdata.Dir(t), "trained", trainedModel)
	if _, err := os.Stat(src); err != nil {
		t.Skipf("skipping: the trained model is absent: %v", err)
	}
	emulatorDevice(t) // skips, before any model loads, without clang
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		typ  ggml.Type // of the 2-D weights; F16: the file as is
		// With a q4 cache, the greedy tokens against the plain CPU backend
		// are logged, not asserted (see below).
		q4GreedyLogged bool
	}{
		{"f16", ggml.F16, false},
		{"q8_0", ggml.Q8_0, true},
		{"q4_0", ggml.Q4_0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := src
			if c.typ != ggml.F16 {
				path = filepath.Join(dir, "trained-"+c.name+".gguf")
				requantize(t, src, path, c.typ)
			}
			plain, _ := load(t, path, cpu.New(2), false)
			metal, em := load(t, path, newBackend(t), true)
			ids := em.EncodePrompt(forwardPrompt)
			if len(ids) <= forwardBatch {
				t.Fatalf("the prompt is %d tokens, not two batches of %d", len(ids), forwardBatch)
			}
			type kvCase struct {
				kv     kv.Config
				minCos float64
			}
			kvs := []kvCase{
				{kv.Config{Type: kv.F16}, 0.9999},
				{kv.Config{Type: kv.Q4, GroupSize: 32, Smooth: true}, 0.999},
			}
			if c.typ == ggml.F16 {
				// The f16 residual window, shorter than the prompt: the
				// second batch and the decode steps read codes and ring.
				kvs = append(kvs, kvCase{kv.Config{Type: kv.Q4, GroupSize: 32, Smooth: true, Residual: 16}, 0.999})
			}
			for _, k := range kvs {
				name := k.kv.Type.String()
				if k.kv.Residual > 0 {
					name += fmt.Sprintf("_residual%d", k.kv.Residual)
				}
				t.Run(name, func(t *testing.T) {
					got := runPass(t, metal.m, ids, k.kv)
					ref := runPass(t, plain.m, ids, k.kv)
					cos := numeric.Cosine(got.last, ref.last)
					t.Logf("%s weights, %d prompt tokens, kv %s: cos(last prompt logits) metal/cpu %.7f; greedy metal %v, cpu %v",
						c.name, len(ids), name, cos, got.greedy, ref.greedy)
					if !(cos >= k.minCos) {
						t.Errorf("cosine of the last-position logits to the CPU backend %.7f < %g", cos, k.minCos)
					}
					if slices.Equal(got.greedy, ref.greedy) {
						return
					}
					logParting(t, "the CPU's", ref, got)
					exact, _ := load(t, path, newExactCPU(), false)
					floatGreedy := runPass(t, exact.m, ids, k.kv).greedy
					t.Logf("greedy cpu with float activations %v", floatGreedy)
					if !c.q4GreedyLogged || k.kv.Type != kv.Q4 {
						t.Errorf("greedy tokens differ: metal %v, cpu %v", got.greedy, ref.greedy)
						return
					}
					// Q8_0 weights with a q4 cache: the bar is not met. The
					// cosine is (0.9999206 ≥ 0.999), but the tokens part at
					// step 3
					// (measured: metal [13 1576 1494 1591 19138 7093 278
					// 4902], cpu [13 1576 1494 1342 3697 920 304 731]) on a
					// near tie: the CPU's logits are 9.241 for its token and
					// 9.203 for metal's (0.4% apart, max |logit| 13.9). The
					// CPU with float activations picks metal's tokens, so
					// the plain CPU's 8-bit activations tip it: logged, not
					// asserted; metal is held to the float-activation CPU.
					t.Logf("greedy tokens differ (logged, not asserted: see the comment): metal %v, cpu %v", got.greedy, ref.greedy)
					if !slices.Equal(got.greedy, floatGreedy) {
						t.Errorf("greedy tokens differ: metal %v, cpu with float activations %v", got.greedy, floatGreedy)
					}
				})
			}
		})
	}
}
