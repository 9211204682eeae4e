package model

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nibble/engine/family"
	"nibble/engine/gguf"
	"nibble/internal/testdata"
)

// familyFixture opens a model of the shared fixtures' families/.
func familyFixture(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(filepath.Join(testdata.Dir(t), "families", name))
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Head dims come from attention.key_length: the Gemma 2 fixture has 128
// where n_embd/n_head is 64, and its q·k scale is 1/sqrt(128).
func TestHeadDimFromKeyLength(t *testing.T) {
	hp, err := HParamsFromGGUF(familyFixture(t, "tiny-gemma2-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if hp.HeadDim != 128 || hp.Embd/hp.Heads != 64 || hp.QDim() != 512 || hp.KVDim() != 256 {
		t.Errorf("head dim %d (embd/heads %d), q dim %d, kv dim %d; want 128, 64, 512, 256", hp.HeadDim, hp.Embd/hp.Heads, hp.QDim(), hp.KVDim())
	}
	if got, want := hp.QKScale(), float32(1/math.Sqrt(128)); got != want {
		t.Errorf("q·k scale %g, want 1/sqrt(128) = %g", got, want)
	}
	// A llama file with key_length 32 for 4 heads of a 64-wide model has
	// 128-wide q: the loader wants exactly that shape.
	path := writeTiny(t, func(kv map[string]any, ts map[string][]uint64) {
		kv["llama.attention.key_length"], kv["llama.attention.value_length"] = uint32(32), uint32(32)
		ts["blk.0.attn_q.weight"], ts["blk.0.attn_output.weight"] = []uint64{64, 128}, []uint64{128, 64}
		ts["blk.0.attn_k.weight"], ts["blk.0.attn_v.weight"] = []uint64{64, 64}, []uint64{64, 64}
	})
	m, err := Open(path, testBackend(t))
	if err != nil {
		t.Fatalf("key_length 32: %v", err)
	}
	if m.HP.HeadDim != 32 {
		t.Errorf("head dim %d, want 32", m.HP.HeadDim)
	}
	m.Close()
}

// Keys and values of different widths are refused with a clear error.
func TestValueLengthMustMatchKeyLength(t *testing.T) {
	path := writeTiny(t, func(kv map[string]any, ts map[string][]uint64) {
		kv["llama.attention.key_length"], kv["llama.attention.value_length"] = uint32(16), uint32(32)
	})
	_, err := Open(path, testBackend(t))
	if err == nil || !strings.Contains(err.Error(), "value length 32 differs from key length 16") {
		t.Fatalf("err %v, want a value/key length error", err)
	}
}

// The layer specs follow llama.cpp: Gemma 2 slides on even layers, Gemma 3
// on il%6 < 5 with RoPE base 10000 there and the file's base on the global
// layers; Qwen3 and Gemma 3 norm q and k; Gemma 2 soft-caps at 50 and 30;
// Phi-3 ignores its file's window; llama keeps a model-wide window.
func TestLayerSpecs(t *testing.T) {
	g2, err := HParamsFromGGUF(familyFixture(t, "tiny-gemma2-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	g3, err := HParamsFromGGUF(familyFixture(t, "tiny-gemma3-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	q3, err := HParamsFromGGUF(familyFixture(t, "tiny-qwen3-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	windows := func(hp HParams) (w []int, bases []float32) {
		for il := range hp.Layers {
			ls := hp.Layer(il)
			w, bases = append(w, ls.Window), append(bases, ls.Rope.Base)
		}
		return w, bases
	}
	if w, _ := windows(g2); !slices.Equal(w, []int{64, 0}) || g2.AttnSoftcap != 50 || g2.FinalSoftcap != 30 || g2.Layer(0).Softcap != 50 || g2.Layer(0).Act != GeluTanhGLU || !g2.Layer(1).PostNorms {
		t.Errorf("gemma2: windows %v, soft-caps %g/%g, layer 0 %+v", w, g2.AttnSoftcap, g2.FinalSoftcap, g2.Layer(0))
	}
	if w, b := windows(g3); !slices.Equal(w, []int{64, 64, 64, 64, 64, 0}) || !slices.Equal(b, []float32{1e4, 1e4, 1e4, 1e4, 1e4, 1e6}) || !g3.Layer(0).QKNorm || g3.Layer(0).Softcap != 0 || g3.FinalSoftcap != 0 {
		t.Errorf("gemma3: windows %v, rope bases %v, layer 0 %+v, final soft-cap %g", w, b, g3.Layer(0), g3.FinalSoftcap)
	}
	if ls := q3.Layer(1); !ls.QKNorm || ls.Window != 0 || ls.Act != SwiGLU || ls.PostNorms || ls.Rope.Base != 1e6 || !ls.Rope.Neox || q3.HeadDim != 64 {
		t.Errorf("qwen3: layer 1 %+v, head dim %d", ls, q3.HeadDim)
	}
	llama := FamilyHParams("llama")
	llama.Window, llama.Layers = 4096, 3
	if w, _ := windows(llama); !slices.Equal(w, []int{4096, 4096, 4096}) {
		t.Errorf("llama with a window: layer windows %v, want it on every layer", w)
	}
	if fam, _ := family.Lookup("phi3"); !fam.Quirks.IgnoresWindow {
		t.Error("phi3 must ignore its file's sliding window, as llama.cpp does")
	}
}

// The family tables name every tensor of the family fixtures with its
// dims, and no tensor they lack.
func TestFamilyLayoutsMatchFixtures(t *testing.T) {
	for _, name := range []string{"tiny-qwen3-f16.gguf", "tiny-gemma2-f16.gguf", "tiny-gemma3-f16.gguf"} {
		f := familyFixture(t, name)
		hp, err := HParamsFromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		checkLayout(t, name, f, hp)
	}
}

// Gemma's q·k scale is 1/sqrt(head_dim), except the 27B models (Gemma 2 of
// 46 layers, Gemma 3 of 62), which llama.cpp scales by 1/sqrt(n_embd/n_head);
// a file's attention.scale wins over both.
func TestGemmaAttentionScale(t *testing.T) {
	for _, c := range []struct {
		arch           string
		layers, embd   int
		heads, headDim int
		fileScale      float32
		want           float64
	}{
		{"gemma2", 26, 2304, 8, 256, 0, 1 / math.Sqrt(256)},
		{"gemma2", 46, 4608, 32, 128, 0, 1 / math.Sqrt(144)},
		{"gemma3", 62, 5376, 32, 128, 0, 1 / math.Sqrt(168)},
		{"gemma3", 34, 2560, 8, 256, 0, 1 / math.Sqrt(256)},
		{"gemma3", 62, 5376, 32, 128, 0.5, 0.5},
	} {
		hp := FamilyHParams(c.arch)
		hp.Layers, hp.Embd, hp.Heads, hp.HeadDim, hp.AttnScale = c.layers, c.embd, c.heads, c.headDim, c.fileScale
		if got := hp.QKScale(); got != float32(c.want) {
			t.Errorf("%s %d layers: scale %g, want %g", c.arch, c.layers, got, c.want)
		}
	}
}
