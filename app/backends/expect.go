package backends

import (
	"fmt"
	"strings"

	"nibble/engine/estimate"
	"nibble/engine/kv"
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
	hd := hp.HeadDim
	if hd <= 0 {
		hd = hp.Embd / hp.Heads
	}
	return Expected{TokPerSec: speed.CPUAt(p, r, hp.Layers, hp.Heads, hd, perPos),
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
	hp := d.HParams
	hd, kvh := hp.HeadDim, hp.KVHeads
	if hd <= 0 {
		hd = hp.Embd / hp.Heads
	}
	if kvh <= 0 {
		kvh = hp.Heads
	}
	s := traffic.Shape{Name: d.Name, Layers: hp.Layers, Hidden: hp.Embd, Heads: hp.Heads, KVHeads: kvh, HeadDim: hd,
		FFN: hp.FF, Vocab: hp.Vocab, Weight: p.Type, Embed: p.Type, Output: p.Type, QKVBias: hp.QKVBias}
	if hp.MoE() {
		// A token reads its chosen experts only, and the dense
		// feed-forward (shared experts) beside them.
		s.Experts, s.ExpertsUsed, s.ExpertFFN, s.ExpertWeight = hp.Experts, hp.ExpertsUsed, hp.ExpertFF, p.Type
		s.FFN = hp.DenseFF()
	}
	return s
}
