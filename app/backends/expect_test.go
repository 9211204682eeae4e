package backends

import (
	"math"
	"testing"

	"nibble/catalog"
	"nibble/engine/estimate"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/engine/speed"
	"nibble/metal/traffic"
)

// TestExpectMetal: on a Mac the figure is the traffic model's step at the
// chip's bandwidth from traffic.Devices, named as Metal names the GPU.
func TestExpectMetal(t *testing.T) {
	hp := model.HParams{Arch: "llama", Layers: 16, Embd: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, FF: 8192, Vocab: 128256, CtxTrain: 131072, TiedOutput: true}
	// A Q4_0 file of that shape: 4.5 bits an element, tied output.
	elems := int64(16)*(2048*2048*2+2*2048*512+3*2048*8192) + 128256*2048
	d := estimate.Desc{Name: "1b", HParams: hp, WeightsBytes: elems * 18 / 32, FileType: "Q4_0", Exact: true}
	shape := traffic.Shape{Name: "1b", Layers: 16, Hidden: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 8192, Vocab: 128256,
		Weight: ggml.Q4_0, Embed: ggml.Q4_0, Output: ggml.Q4_0}
	for _, dev := range traffic.Devices {
		e, err := ExpectDecode(d, 4096, kv.Q4, Choice{Backend: Metal, Device: "Apple " + dev.Name}, 0)
		if err != nil {
			t.Fatal(err)
		}
		step := traffic.DecodeStep(shape, 4096, traffic.Cache{Type: kv.Q4, GroupSize: 32})
		if want := dev.GBs * 1e9 / float64(step.Bytes()); math.Abs(e.TokPerSec-want) > 1e-9*want {
			t.Errorf("%s: %.2f tok/s, want %.2f", dev.Name, e.TokPerSec, want)
		}
	}
	if _, err := ExpectDecode(d, 4096, kv.Q4, Choice{Backend: Metal, Device: "Apple M9 Hyper"}, 0); err == nil {
		t.Error("an unknown chip has a figure")
	}
	if _, err := ExpectDecode(estimate.Desc{Name: "no shape"}, 4096, kv.Q4, Choice{Backend: Metal, Device: "Apple M1"}, 0); err == nil {
		t.Error("a header without a shape has a figure")
	}
}

// A mixture of experts: the Metal figure is the step that reads the chosen
// experts only, far above the one that would read them all.
func TestExpectMetalMoE(t *testing.T) {
	hp := model.HParams{Arch: "qwen3moe", Layers: 48, Embd: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, FF: 6144, Vocab: 151936,
		CtxTrain: 40960, Experts: 128, ExpertsUsed: 8, ExpertFF: 768}
	d := estimate.Desc{Name: "30b-a3b", HParams: hp, WeightsBytes: 17_000_000_000, FileType: "Q4_0", Exact: true}
	e, err := ExpectDecode(d, 4096, kv.Q4, Choice{Backend: Metal, Device: "Apple M1 Max"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	shape := traffic.Shape{Name: "30b-a3b", Layers: 48, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, Vocab: 151936,
		Weight: ggml.Q4_0, Embed: ggml.Q4_0, Output: ggml.Q4_0, Experts: 128, ExpertsUsed: 8, ExpertFFN: 768, ExpertWeight: ggml.Q4_0}
	step := traffic.DecodeStep(shape, 4096, traffic.Cache{Type: kv.Q4, GroupSize: 32})
	if want := 400e9 / float64(step.Bytes()); math.Abs(e.TokPerSec-want) > 1e-9*want {
		t.Errorf("%.2f tok/s, want %.2f (%s)", e.TokPerSec, want, e.How)
	}
	if resident, _ := traffic.WeightBytes(shape); e.TokPerSec < 5*400e9/float64(resident) {
		t.Errorf("%.2f tok/s: not the active experts' rate", e.TokPerSec)
	}
}

// The catalog's mixtures and Gemma 4s on Metal: the traffic shape takes the
// experts with only the dense feed-forward a family has beside them
// (Qwen3-30B-A3B's ff describes no block; Gemma 4 26B-A4B's is one), and
// each Gemma 4 layer's attention: sliding layers of 256-wide heads over
// their window, global ones of 512 over the context, E4B's last 18 layers
// reading earlier layers' K/V. The expected rate is that shape's step.
func TestExpectMetalCatalog(t *testing.T) {
	for _, w := range []struct {
		id                  string
		ffn, experts        int
		globalKV, slidingKV int
		shared, perLayer    int
	}{
		{"qwen3-30b-a3b", 0, 128, 0, 0, 0, 0},
		{"mixtral-8x7b-instruct-v0.1", 0, 8, 0, 0, 0, 0},
		{"gemma-4-26b-a4b-it", 2112, 128, 2, 8, 0, 0},
		{"gemma-4-31b-it", 21504, 0, 4, 16, 0, 0},
		{"gemma-4-e4b-it", 10240, 0, 2, 2, 18, 256},
	} {
		m, err := catalog.ByID(w.id)
		if err != nil {
			t.Fatal(err)
		}
		d, err := estimate.FromCatalog(m, "")
		if err != nil {
			t.Fatal(err)
		}
		s := MetalShape(d, speed.PerToken{Type: ggml.Q4_K})
		if s.FFN != w.ffn || s.Experts != w.experts || s.PerLayerEmbd != w.perLayer {
			t.Errorf("%s: ffn %d, %d experts, per-layer input %d", w.id, s.FFN, s.Experts, s.PerLayerEmbd)
		}
		if w.globalKV > 0 {
			shared := 0
			for il := range s.Layers {
				l := s.Layer(il)
				want := traffic.Layer{KVHeads: w.slidingKV, HeadDim: 256, Window: m.SlidingWindow}
				if il%6 == 5 {
					want = traffic.Layer{KVHeads: w.globalKV, HeadDim: 512}
				}
				want.SharesKV = il >= m.Layers-w.shared
				if l != want {
					t.Errorf("%s layer %d: %+v, want %+v", w.id, il, l, want)
					break
				}
				if l.SharesKV {
					shared++
				}
			}
			if shared != w.shared {
				t.Errorf("%s: %d layers share K/V, want %d", w.id, shared, w.shared)
			}
		} else if s.PerLayer != nil {
			t.Errorf("%s: per-layer attention %+v for uniform layers", w.id, s.PerLayer)
		}
		e, err := ExpectDecode(d, 32768, kv.Q4, Choice{Backend: Metal, Device: "Apple M4 Max"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := speed.Read(d, 32768, kv.Q4, 0)
		if err != nil {
			t.Fatal(err)
		}
		step := traffic.DecodeStep(MetalShape(d, p), 32768, traffic.Cache{Type: kv.Q4, GroupSize: 32})
		if want := 546e9 / float64(step.Bytes()); math.Abs(e.TokPerSec-want) > 1e-9*want {
			t.Errorf("%s: %.2f tok/s, want %.2f", w.id, e.TokPerSec, want)
		}
		t.Logf("%s: %.1f tok/s on an M4 Max at 32K (%s)", w.id, e.TokPerSec, e.How)
	}
}
