package backends

import (
	"fmt"
	"strings"

	"nibble/engine/estimate"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/engine/speed"
	"nibble/metal/traffic"
)

// Expected is a model's decode speed to expect before it is loaded.
type Expected struct {
	TokPerSec float64
	// How says where the figure comes from, in words.
	How string
}

// ExpectDecode is the decode rate to expect for d with a cache of ctx
// positions of type t on the backend c chose: on Metal the traffic
// model's bytes per step at the chip's published bandwidth; on the CPU
// the bytes speed.Read counts at the rate speed.Probe measures on threads.
func ExpectDecode(d estimate.Desc, ctx int, t kv.Type, c Choice, threads int) (Expected, error) {
	p, err := speed.Read(d, ctx, t, 0)
	if err != nil {
		return Expected{}, err
	}
	if c.Backend == Metal {
		return expectMetal(d, p, ctx, t, c.Device)
	}
	r, err := speed.Probe(threads, p.Type)
	if err != nil {
		return Expected{}, err
	}
	perPos, err := speed.AttentionCost(threads, t)
	if err != nil {
		return Expected{}, err
	}
	hp := d.HParams
	return Expected{TokPerSec: speed.CPUAt(p, r, hp.Layers, hp.Heads, perPos),
		How: fmt.Sprintf("%.1f MB a token at the CPU's measured %.1f GB/s (%s)", float64(p.Bytes())/1e6, r.BytesPerSec/1e9, r.Type)}, nil
}

// expectMetal reads the chip's bandwidth from traffic.Devices by its name
// ("Apple M2 Pro").
func expectMetal(d estimate.Desc, p speed.PerToken, ctx int, t kv.Type, device string) (Expected, error) {
	dev, err := traffic.DeviceByName(strings.TrimSpace(strings.TrimPrefix(device, "Apple ")))
	if err != nil {
		return Expected{}, fmt.Errorf("no published memory bandwidth for %q", device)
	}
	step := traffic.DecodeStep(MetalShape(d, p), max(ctx, 1), traffic.Cache{Type: t, GroupSize: 32})
	return Expected{TokPerSec: dev.TokensPerSecond(step),
		How: fmt.Sprintf("%.1f MB a token at the %s's %.0f GB/s", float64(step.Bytes())/1e6, dev.Name, dev.GBs)}, nil
}

// MetalShape is d's geometry for the traffic model, every matrix of the
// file's dominant type.
func MetalShape(d estimate.Desc, p speed.PerToken) traffic.Shape {
	return TrafficShape(d.Name, d.HParams, p.Type)
}

// TrafficShape is hp's geometry for the traffic model, every matrix of
// type t: a mixture of experts' chosen experts with the dense feed-forward
// a token reads beside them (none for Qwen3-MoE, whose feed_forward_length
// describes no block), and each layer's attention where layers differ
// (Gemma 4's sliding and global head shapes, sliding windows, layers that
// share K/V) and Gemma's per-layer inputs.
func TrafficShape(name string, hp model.HParams, t ggml.Type) traffic.Shape {
	hd, kvh := hp.HeadDim, hp.KVHeads
	if hd <= 0 {
		hd = hp.Embd / max(hp.Heads, 1)
	}
	if kvh <= 0 {
		kvh = hp.Heads
	}
	s := traffic.Shape{Name: name, Layers: hp.Layers, Hidden: hp.Embd, Heads: hp.Heads, KVHeads: kvh, HeadDim: hd,
		FFN: hp.FF, Vocab: hp.Vocab, Weight: t, Embed: t, Output: t, QKVBias: hp.QKVBias, PerLayerEmbd: hp.PerLayerEmbd}
	if hp.MoE() {
		s.Experts, s.ExpertsUsed, s.ExpertFFN, s.ExpertWeight = hp.Experts, hp.ExpertsUsed, hp.ExpertFF, t
		s.FFN = hp.DenseFF()
	}
	layers, uniform := make([]traffic.Layer, max(hp.Layers, 0)), true
	for il := range layers {
		l := traffic.Layer{KVHeads: kvh, HeadDim: hd, SharesKV: hp.KVSource(il) != il}
		if hp.HeadDimLocal > 0 || hp.LayerKVHeads != nil {
			l.KVHeads, l.HeadDim = hp.KVHeadsOf(il), hp.HeadDimOf(il)
		}
		if hp.SlidingLayer(il) {
			l.Window = hp.Window
		}
		layers[il] = l
		uniform = uniform && l == traffic.Layer{KVHeads: kvh, HeadDim: hd}
	}
	if !uniform {
		s.PerLayer = layers
	}
	return s
}
