package quant

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/parallel"
)

type loadedTensor struct {
	info gguf.TensorInfo
	data []byte
	f    []float32
}

// loadModel dequantizes every tensor of a test model.
func loadModel(t *testing.T, name string) map[string]*loadedTensor {
	t.Helper()
	f, err := gguf.Open(filepath.Join(testdataDir(t), "models", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	out := map[string]*loadedTensor{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if !Supported(ti.Type) {
			t.Fatalf("%s: %s has unsupported type %s", name, ti.Name, ti.Type)
		}
		data := f.TensorData(ti)
		v := make([]float32, ti.Elements())
		if err := Dequantize(ti.Type, v, data); err != nil {
			t.Fatalf("%s: %s: %v", name, ti.Name, err)
		}
		out[ti.Name] = &loadedTensor{*ti, data, v}
	}
	return out
}

func moments(v []float32) (mean, std float64) {
	var s, s2 float64
	for _, x := range v {
		s += float64(x)
		s2 += float64(x) * float64(x)
	}
	mean = s / float64(len(v))
	return mean, math.Sqrt(s2/float64(len(v)) - mean*mean)
}

// The generator's distributions (testdata README §2) must come back out of
// every tensor: a layout error turns them into noise of the wrong scale.
func TestModelTensorsDequantize(t *testing.T) {
	for _, name := range []string{
		"tiny-llama-spm-f16.gguf", "tiny-llama-spm-q4_0.gguf", "tiny-llama-spm-q4_k_m.gguf",
		"tiny-llama3-q8_0.gguf", "tiny-qwen2-q4_0.gguf",
	} {
		for tn, lt := range loadModel(t, name) {
			mean, std := moments(lt.f)
			if math.IsNaN(mean) || math.IsInf(mean, 0) || math.IsNaN(std) {
				t.Fatalf("%s %s: non-finite values", name, tn)
			}
			var wantMean, wantStd float64
			switch {
			case strings.HasSuffix(tn, "norm.weight"):
				wantMean, wantStd = 1, 0.1
			case tn == "rope_freqs.weight":
				continue
			case strings.HasSuffix(tn, ".bias"):
				wantStd = 0.1
			case tn == "token_embd.weight" || tn == "output.weight":
				wantStd = 0.4
			default:
				wantStd = 0.08
			}
			if math.Abs(mean-wantMean) > 0.05 || math.Abs(std-wantStd) > 0.12*wantStd {
				t.Errorf("%s %s (%s): mean %.4f std %.4f, want %.2f / %.2f", name, tn, lt.info.Type, mean, std, wantMean, wantStd)
			}
		}
	}
}

// The Q4_0 and Q4_K_M files were quantized from the F16 file: each of their
// tensors must stay within its format's quantization error of the original.
func TestModelQuantizedAgainstF16(t *testing.T) {
	src := loadModel(t, "tiny-llama-spm-f16.gguf")
	maxRelRMS := map[ggml.Type]float64{ggml.F32: 0, ggml.Q4_0: 0.10, ggml.Q4_K: 0.085, ggml.Q6_K: 0.022} // measured 0.086 / 0.071 / 0.018
	seen := map[ggml.Type]bool{}
	for _, name := range []string{"tiny-llama-spm-q4_0.gguf", "tiny-llama-spm-q4_k_m.gguf"} {
		for tn, lt := range loadModel(t, name) {
			ref, ok := src[tn]
			if !ok || len(ref.f) != len(lt.f) {
				t.Fatalf("%s: %s has no F16 twin", name, tn)
			}
			var e2, r2 float64
			for i, v := range lt.f {
				d := float64(v) - float64(ref.f[i])
				e2 += d * d
				r2 += float64(ref.f[i]) * float64(ref.f[i])
			}
			rel := math.Sqrt(e2 / r2)
			bound, ok := maxRelRMS[lt.info.Type]
			if !ok {
				t.Fatalf("%s %s: unexpected type %s", name, tn, lt.info.Type)
			}
			seen[lt.info.Type] = true
			if rel > bound+1e-9 {
				t.Errorf("%s %s (%s): relative rms error %.4f vs F16, want <= %.2f", name, tn, lt.info.Type, rel, bound)
			}
		}
	}
	if !seen[ggml.Q4_0] || !seen[ggml.Q4_K] || !seen[ggml.Q6_K] {
		t.Errorf("types covered: %v", seen)
	}
}

// MatMul over real tensors of every quantized type against a float64 dot
// of the dequantized weights.
func TestModelMatMul(t *testing.T) {
	pool := parallel.NewPool(2)
	defer pool.Close()
	rng := rand.New(rand.NewPCG(9, 9))
	picks := map[string][]string{
		"tiny-llama-spm-f16.gguf":    {"blk.0.ffn_down.weight", "blk.1.attn_q.weight"},
		"tiny-llama-spm-q4_0.gguf":   {"blk.0.ffn_down.weight", "token_embd.weight"},
		"tiny-llama-spm-q4_k_m.gguf": {"blk.0.ffn_gate.weight", "blk.1.ffn_down.weight"},
		"tiny-llama3-q8_0.gguf":      {"blk.0.ffn_up.weight"},
		"tiny-qwen2-q4_0.gguf":       {"blk.1.attn_k.weight", "output.weight"},
	}
	for name, tensors := range picks {
		model := loadModel(t, name)
		for _, tn := range tensors {
			lt, ok := model[tn]
			if !ok {
				t.Fatalf("%s: no %s", name, tn)
			}
			cols := int(lt.info.Dims[0])
			rows := len(lt.f) / cols
			w := Matrix{Type: lt.info.Type, Rows: rows, Cols: cols, Data: lt.data}
			const n = 5
			x := randomVector(rng, n*cols, 1)
			dst := make([]float32, n*rows)
			if err := MatMul(pool, dst, w, x, n); err != nil {
				t.Fatalf("%s %s: %v", name, tn, err)
			}
			for i := 0; i < n; i++ {
				xrow := x[i*cols : (i+1)*cols]
				x64 := make([]float64, cols)
				for j, v := range xrow {
					x64[j] = float64(v)
				}
				step := 1 + rows/1024 // sample the vocabulary-sized matrices
				for r := i; r < rows; r += step {
					wr := make([]float64, cols)
					for j, v := range lt.f[r*cols : (r+1)*cols] {
						wr[j] = float64(v)
					}
					want := dot64(wr, x64)
					tol := activationErrorBound(w.Type, wr, xrow) + 1e-5*absDot(wr, x64)
					if g := float64(dst[i*rows+r]); math.Abs(g-want) > tol {
						t.Fatalf("%s %s (%s) row %d x %d: got %g, want %g (tol %.3g)", name, tn, w.Type, r, i, g, want, tol)
					}
				}
			}
		}
	}
}
