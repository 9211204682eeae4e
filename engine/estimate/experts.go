package estimate

import (
	"fmt"
	"strings"

	"nibble/engine/gguf"
)

// Experts describes a mixture-of-experts model for the estimate: every
// expert's weights are resident (mapped, and wired on Metal) because any
// token may route to any of them, but one token reads only Used of Count.
// Zero for a dense model.
type Experts struct {
	Count int   // experts per layer ({arch}.expert_count)
	Used  int   // experts each token is routed to ({arch}.expert_used_count)
	Bytes int64 // the expert tensors (ffn_*_exps, all experts) of every layer
}

// sparseReadShare is where "read per token" is worth showing beside the
// resident weights: a token reads at most this share of them (experts, or
// per-layer embedding tables that are only looked up).
const sparseReadShare = 0.9

// SparseRead reports whether a token reads markedly less than the resident
// weights, so that the read figure is shown beside them.
func (d Desc) SparseRead() bool {
	return d.ActiveBytes > 0 && float64(d.ActiveBytes) < sparseReadShare*float64(d.WeightsBytes)
}

// expertTensor reports whether t holds one slice per expert: a block
// tensor named ffn_*_exps (llama.cpp's names: ffn_gate_exps, ffn_up_exps,
// ffn_down_exps, the fused ffn_gate_up_exps, and their biases or scales)
// whose outermost dimension is the expert count. A 1-D tensor of that name
// (Arctic's ffn_norm_exps) is shared by all experts.
func expertTensor(t *gguf.TensorInfo) bool {
	rest, ok := strings.CutPrefix(t.Name, "blk.")
	if !ok {
		return false
	}
	_, rest, ok = strings.Cut(rest, ".")
	if !ok {
		return false
	}
	base, _, _ := strings.Cut(rest, ".")
	return strings.HasPrefix(base, "ffn_") && strings.HasSuffix(base, "_exps") && len(t.Dims) >= 2
}

// lookupTable reports whether t is only gathered by row, one row per token:
// the token embeddings when the output has its own matrix (tied, the table
// is read whole for the logits) and Gemma's per-layer embeddings.
func lookupTable(t *gguf.TensorInfo, tiedOutput bool) bool {
	switch t.Name {
	case "token_embd.weight":
		return !tiedOutput && len(t.Dims) == 2
	case "per_layer_token_embd.weight":
		return len(t.Dims) == 2
	}
	return false
}

// readExperts reads the expert counts from the file's keys and sums the
// expert tensors, and returns the bytes one decode token reads: every
// tensor once, expert tensors at Used/Count, lookup tables one row. A file
// whose keys and expert tensors disagree is an error.
func readExperts(f *gguf.File, arch string, tiedOutput bool) (Experts, int64, error) {
	var e Experts
	count, hasCount := f.Uint(arch + ".expert_count")
	used, hasUsed := f.Uint(arch + ".expert_used_count")
	if hasCount && count > 0 {
		if !hasUsed || used == 0 || used > count {
			return Experts{}, 0, fmt.Errorf("%s.expert_count is %d but %s.expert_used_count is %d (want 1..%d)", arch, count, arch, used, count)
		}
		if count > 1<<16 {
			return Experts{}, 0, fmt.Errorf("%s.expert_count = %d is out of range", arch, count)
		}
		e.Count, e.Used = int(count), int(used)
	}
	var active int64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		switch {
		case expertTensor(t):
			if e.Count == 0 {
				return Experts{}, 0, fmt.Errorf("tensor %s holds experts but %s.expert_count is missing", t.Name, arch)
			}
			if n := t.Dims[len(t.Dims)-1]; n != uint64(e.Count) {
				return Experts{}, 0, fmt.Errorf("tensor %s has %d experts (dims %v), %s.expert_count says %d", t.Name, n, t.Dims, arch, e.Count)
			}
			e.Bytes += int64(t.Size)
		case lookupTable(t, tiedOutput):
			active += int64(t.Size / t.Dims[1])
		default:
			active += int64(t.Size)
		}
	}
	if e.Count > 0 {
		// Every expert's slice is the same size, so Used of Count slices
		// are exactly this share.
		active += e.Bytes * int64(e.Used) / int64(e.Count)
	}
	return e, active, nil
}

// catalogActive is a catalog entry's bytes read per token: the file's size
// scaled by the active share of its parameters (the model card's figures),
// approximate as the listed size is.
func catalogActive(size int64, params, active float64) int64 {
	if active <= 0 || params <= 0 || active >= params {
		return size
	}
	return int64(float64(size) * active / params)
}

// SparseRead reports whether a token reads markedly less than the resident
// weights (Desc.SparseRead, for the estimate's figures).
func (e *Estimate) SparseRead() bool {
	return e.Active > 0 && float64(e.Active) < sparseReadShare*float64(e.Weights)
}

// ReadPerToken says what a token reads beside what is resident, e.g.
// "1.93 GiB read per token (8 of 128 experts)"; "" when a token reads
// nearly all the weights.
func (e *Estimate) ReadPerToken() string {
	if !e.SparseRead() {
		return ""
	}
	s := Human(e.Active) + " read per token"
	if e.Experts.Count > 0 {
		s += fmt.Sprintf(" (%d of %d experts)", e.Experts.Used, e.Experts.Count)
	}
	return s
}
