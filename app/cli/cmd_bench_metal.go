package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"nibble/app/backends"
	"nibble/catalog"
	"nibble/engine/estimate"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/metal/traffic"
)

func init() {
	Register(&Command{
		Name: "bench metal-model",
		Usage: "[--catalog ID | --layers N --hidden N --heads N --kv-heads N --head-dim N --ffn N --vocab N] " +
			"[--experts N --experts-used K --expert-ffn N [--expert-weights TYPE]] " +
			"[--weights Q4_K] [--output Q6_K] [--ctx 131072] [--kv q4|q8|f16] [--kv-group 32] [--device NAME] [--fused] [--rope-kv] [--json]",
		Run: benchMetalModelCmd,
	})
}

type metalModelDevice struct {
	traffic.Device
	Cores int `json:"gpu_cores"`
	// MatVecSplit is the mat-vec grid's split for the layer's smallest and
	// largest matrices (k and gate, or q and o): simdgroups sharing a set
	// of rows where the cores outnumber the rows (metal/encoder.MatVecGrid).
	MatVecSplit   [2]int  `json:"matvec_split"`
	StepMs        float64 `json:"step_ms"`
	AttentionMs   float64 `json:"attention_ms"`
	AttnLayerUs   float64 `json:"attention_layer_us"`
	AttnComputeUs float64 `json:"attention_layer_compute_floor_us,omitempty"`
	TokensPerSec  float64 `json:"tokens_per_s"`
}

type metalModelReport struct {
	Model string        `json:"model"`
	Shape traffic.Shape `json:"shape"`
	// ResidentWeights is every weight of the model (every expert);
	// ActiveWeights what one decode step reads of them (the chosen experts).
	ResidentWeights int64              `json:"resident_weight_bytes"`
	ActiveWeights   int64              `json:"active_weight_bytes"`
	Ctx             int                `json:"ctx"`
	KV              string             `json:"kv"`
	KVGroup         int                `json:"kv_group,omitempty"`
	Step            traffic.Step       `json:"step"`
	Attention       traffic.Step       `json:"attention_all_layers"`
	AttnLayer       traffic.Step       `json:"attention_one_layer"`
	Devices         []metalModelDevice `json:"devices"`
}

// benchMetalModelCmd prints the traffic model of one decode step of the
// Metal backend (metal/traffic): bytes per kernel and the time they take at
// Apple's published bandwidths. No GPU is needed.
func benchMetalModelCmd(env *Env, args []string) error {
	fs := NewFlags(env, "bench metal-model")
	catalogID := fs.String("catalog", "", "catalog model `ID` for the shape")
	layers := fs.Int("layers", 80, "layers")
	hidden := fs.Int("hidden", 8192, "embedding width")
	heads := fs.Int("heads", 64, "query heads")
	kvHeads := fs.Int("kv-heads", 8, "kv heads")
	headDim := fs.Int("head-dim", 128, "head dim")
	ffn := fs.Int("ffn", 28672, "feed-forward width")
	vocab := fs.Int("vocab", 128256, "vocabulary")
	experts := fs.Int("experts", 0, "experts per layer (mixture of experts; --ffn is then a shared expert's width, 0 for none)")
	expertsUsed := fs.Int("experts-used", 0, "experts chosen per token")
	expertFFN := fs.Int("expert-ffn", 0, "an expert's feed-forward width")
	expertWeights := fs.String("expert-weights", "", "weight `TYPE` of the experts (default: --weights)")
	weights := fs.String("weights", "Q4_K", "weight `TYPE` of the layers")
	output := fs.String("output", "Q6_K", "weight `TYPE` of the output and embedding")
	ctx := fs.Int("ctx", 131072, "positions in the cache (the token attends to all)")
	kvType := fs.String("kv", "q4", "KV cache type: f16, q8 or q4")
	group := fs.Int("kv-group", kv.DefaultGroupSize, "q4/q8 group size: 32 or 64")
	dev := fs.String("device", "", "only this device (M1 ... M4 Max)")
	fused := fs.Bool("fused", false, "the step with the RMS norms fused into the mat-vecs that read them (not what the backend encodes)")
	ropeKV := fs.Bool("rope-kv", false, "the step with K's RoPE fused into the KV store (not what the backend encodes)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := ParseFlags(fs, args); err != nil {
		return err
	}
	wt, err := ggml.ParseType(*weights)
	if err != nil {
		return fmt.Errorf("%w: --weights: %v", ErrUsage, err)
	}
	ot, err := ggml.ParseType(*output)
	if err != nil {
		return fmt.Errorf("%w: --output: %v", ErrUsage, err)
	}
	kt, err := kv.ParseType(*kvType)
	if err != nil {
		return fmt.Errorf("%w: --kv: %v", ErrUsage, err)
	}
	et := wt
	if *expertWeights != "" {
		if et, err = ggml.ParseType(*expertWeights); err != nil {
			return fmt.Errorf("%w: --expert-weights: %v", ErrUsage, err)
		}
	}
	s := traffic.Shape{Name: "custom", Layers: *layers, Hidden: *hidden, Heads: *heads, KVHeads: *kvHeads, HeadDim: *headDim,
		FFN: *ffn, Vocab: *vocab, Weight: wt, Embed: ot, Output: ot,
		Experts: *experts, ExpertsUsed: *expertsUsed, ExpertFFN: *expertFFN, ExpertWeight: et}
	if *catalogID != "" {
		m, err := catalog.ByID(*catalogID)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		// The shape the estimator reads from the entry: the experts with
		// only a dense feed-forward beside them that the family has, and
		// each layer's attention (Gemma 4's head shapes, windows, shared
		// K/V).
		d, err := estimate.FromCatalog(m, "")
		if err != nil {
			return err
		}
		s = backends.TrafficShape(m.ID, d.HParams, wt)
		s.Embed, s.Output, s.ExpertWeight = ot, ot, et
	}
	// A catalog shape replaced the shape flags; its sizes are positive. A
	// mixture of experts may have no dense feed-forward beside its experts.
	minFFN := 1
	if s.Experts > 0 {
		minFFN = 0
		if err := checkIntFlags(intBound{"--experts-used", s.ExpertsUsed, 1}, intBound{"--expert-ffn", s.ExpertFFN, 1}); err != nil {
			return err
		}
		if s.ExpertsUsed > s.Experts {
			return fmt.Errorf("%w: %d experts used of %d", ErrUsage, s.ExpertsUsed, s.Experts)
		}
	}
	if err := checkIntFlags(intBound{"--layers", s.Layers, 1}, intBound{"--hidden", s.Hidden, 1}, intBound{"--heads", s.Heads, 1},
		intBound{"--kv-heads", s.KVHeads, 1}, intBound{"--head-dim", s.HeadDim, 1}, intBound{"--ffn", s.FFN, minFFN},
		intBound{"--vocab", s.Vocab, 1}, intBound{"--ctx", *ctx, 1}, intBound{"--experts", s.Experts, 0}); err != nil {
		return err
	}
	switch {
	case s.Heads%s.KVHeads != 0:
		return fmt.Errorf("%w: %d heads are not a multiple of %d kv heads", ErrUsage, s.Heads, s.KVHeads)
	case kt != kv.F16 && checkKVGroup(*group) != nil:
		return checkKVGroup(*group)
	}
	devices := traffic.Devices
	if *dev != "" {
		d, err := traffic.DeviceByName(*dev)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		devices = []traffic.Device{d}
	}
	c := traffic.Cache{Type: kt, GroupSize: *group}
	if kt == kv.F16 {
		c.GroupSize = 0
	}
	step := traffic.DecodeStepWith(s, *ctx, c, traffic.Fusions{MatVec: *fused, RoPEInStore: *ropeKV})
	r := metalModelReport{Model: s.Name, Shape: s, Ctx: *ctx, KV: kt.String(), KVGroup: c.GroupSize, Step: step,
		Attention: step.Filter("attn_")}
	r.ResidentWeights, r.ActiveWeights = traffic.WeightBytes(s)
	// One layer over the whole context: the widest such (Gemma 4's global
	// layers), else the first.
	one := s.Layer(0)
	for il := range s.Layers {
		if l := s.Layer(il); l.Window == 0 && (one.Window > 0 || l.KVHeads*l.HeadDim > one.KVHeads*one.HeadDim) {
			one = l
		}
	}
	r.AttnLayer.Attention(s.Heads, one.KVHeads, one.HeadDim, *ctx, *ctx, c)
	for _, d := range devices {
		sec := d.Seconds(step.Bytes())
		big := max(s.FFN, s.Heads*s.HeadDim)
		r.Devices = append(r.Devices, metalModelDevice{Device: d, Cores: d.Cores(), StepMs: 1e3 * sec, TokensPerSec: 1 / sec,
			MatVecSplit: [2]int{d.MatVecSplit(s.Weight, s.KVHeads*s.HeadDim, s.Hidden), d.MatVecSplit(s.Weight, big, s.Hidden)},
			AttentionMs: 1e3 * d.Seconds(r.Attention.Bytes()), AttnLayerUs: 1e6 * d.Seconds(r.AttnLayer.Bytes()),
			AttnComputeUs: 1e6 * d.ComputeSeconds(r.AttnLayer.FLOPs)})
	}
	mb := func(b int64) string { return fmt.Sprintf("%.1f", float64(b)/1e6) }
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	w := env.Stdout
	headShape := fmt.Sprintf("%d/%d heads × %d", s.Heads, s.KVHeads, s.HeadDim)
	if s.PerLayer != nil {
		headShape = fmt.Sprintf("%d heads", s.Heads) // the layers line gives their kv heads and dims
	}
	fmt.Fprintf(w, "model %s: %d layers, %s, hidden %d, ffn %d, vocab %d, weights %v (output %v)\n",
		s.Name, s.Layers, headShape, s.Hidden, s.FFN, s.Vocab, s.Weight, s.Output)
	if s.Experts > 0 {
		fmt.Fprintf(w, "experts: %d of %d per token, ffn %d, weights %v\n", s.ExpertsUsed, s.Experts, s.ExpertFFN, s.ExpertWeight)
	}
	if s.PerLayer != nil {
		fmt.Fprintf(w, "layers: %s\n", layerSummary(s))
	}
	fmt.Fprintf(w, "weights: %s MB resident, %s MB active (read per token)\n", mb(r.ResidentWeights), mb(r.ActiveWeights))
	fmt.Fprintf(w, "decode step at %d positions, %s KV cache\n\n", *ctx, kt)
	fmt.Fprintf(w, "%-22s %6s %12s %10s\n", "kernel", "count", "read MB", "write MB")
	for _, k := range step.Kernels {
		fmt.Fprintf(w, "%-22s %6d %12s %10s\n", k.Name, k.Count, mb(k.Read), mb(k.Written))
	}
	fmt.Fprintf(w, "%-22s %6s %12s %10s\n\n", "total", "", mb(step.Read), mb(step.Written))
	fmt.Fprintf(w, "%-9s %5s %8s %10s %9s %13s %15s %9s %9s\n", "device", "cores", "GB/s", "step ms", "tok/s", "attention ms", "attn/layer us", "floor us", "mv split")
	for _, d := range r.Devices {
		floor := "-"
		if d.AttnComputeUs > 0 {
			floor = fmt.Sprintf("%.0f", d.AttnComputeUs)
		}
		fmt.Fprintf(w, "%-9s %5d %8.0f %10.2f %9.1f %13.2f %15.0f %9s %9s\n", d.Name, d.Cores, d.GBs, d.StepMs, d.TokensPerSec, d.AttentionMs,
			d.AttnLayerUs, floor, fmt.Sprintf("%d/%d", d.MatVecSplit[0], d.MatVecSplit[1]))
	}
	fmt.Fprintln(w, "\nTimes are bytes/bandwidth (a floor); floor us is one layer's attention FLOPs at Apple's published FP32 peak;")
	fmt.Fprintln(w, "mv split: simdgroups sharing a mat-vec's rows on the chip's cores, for k and the widest matrix.")
	return nil
}

// layerSummary counts the layers of each attention shape, in order of
// first appearance: "25 × 8/256 window 1024, 5 × 2/512".
func layerSummary(s traffic.Shape) string {
	var kinds []traffic.Layer
	count := map[traffic.Layer]int{}
	for il := range s.Layers {
		l := s.Layer(il)
		if count[l] == 0 {
			kinds = append(kinds, l)
		}
		count[l]++
	}
	parts := make([]string, len(kinds))
	for i, l := range kinds {
		parts[i] = fmt.Sprintf("%d × %d/%d", count[l], l.KVHeads, l.HeadDim)
		if l.Window > 0 {
			parts[i] += fmt.Sprintf(" window %d", l.Window)
		}
		if l.SharesKV {
			parts[i] += " sharing K/V"
		}
	}
	return strings.Join(parts, ", ")
}
