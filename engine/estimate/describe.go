package estimate

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"

	"nibble/catalog"
	"nibble/engine/estimate/httprange"
	"nibble/engine/gguf"
	"nibble/engine/model"
)

// headerOptions skips every metadata array longer than this: the estimate
// needs only the vocabulary's length and the per-layer arrays (Gemma 4's
// window pattern and head counts, one per layer), and skipping the token
// and merge strings avoids allocating tens of MB for them.
var headerOptions = gguf.HeaderOptions{SkipArraysLongerThan: 1024}

// FromGGUF describes a parsed GGUF header: hyper-parameters and the exact
// weight bytes (the sum of its tensors' sizes, as the loader maps them).
func FromGGUF(f *gguf.File, name string) (Desc, error) {
	hp, runnable, err := hparams(f)
	if err != nil {
		return Desc{}, fmt.Errorf("%s: %w", name, err)
	}
	d := Desc{Name: name, HParams: hp, Exact: true, Runnable: runnable, Source: name}
	if n, ok := f.String("general.name"); ok && n != "" {
		d.Name = n
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		d.WeightsBytes += int64(t.Size)
		d.Params += int64(t.Elements())
	}
	if d.Experts, d.ActiveBytes, err = readExperts(f, hp.Arch, hp.TiedOutput); err != nil {
		return Desc{}, fmt.Errorf("%s: %w", name, err)
	}
	if ft, ok := f.Uint("general.file_type"); ok {
		d.FileType = FileTypeName(ft)
	}
	return d, nil
}

// hparams reads any architecture's standard keys, so any GGUF can be
// estimated even when it cannot be run yet.
func hparams(f *gguf.File) (model.HParams, bool, error) {
	hp, err := model.ReadHParams(f)
	return hp, model.Supported(hp.Arch), err
}

// FromFile reads only the header of a local GGUF.
func FromFile(path string) (Desc, error) {
	fh, err := os.Open(path)
	if err != nil {
		return Desc{}, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return Desc{}, err
	}
	return fromReader(fh, st.Size(), path, filepath.Base(path))
}

// FromURL reads only the header of a remote GGUF through HTTP range
// requests (client nil: http.DefaultClient).
func FromURL(ctx context.Context, client *http.Client, url string) (Desc, error) {
	r, err := httprange.Open(ctx, client, url)
	if err != nil {
		return Desc{}, err
	}
	return fromReader(r, r.Size(), url, filepath.Base(url))
}

func fromReader(r io.ReaderAt, size int64, source, name string) (Desc, error) {
	f, err := gguf.ReadHeader(r, size, headerOptions)
	if err != nil {
		return Desc{}, fmt.Errorf("read %s: %w", source, err)
	}
	d, err := FromGGUF(f, name)
	if err != nil {
		return Desc{}, err
	}
	d.Source = source
	return d, nil
}

// FromCatalog describes a catalog entry with one of its files (quant ""
// takes the first). The weights are the listed file size, marked
// approximate unless the catalog gives an exact figure; the other listed
// files become the alternatives offered in advice.
func FromCatalog(m *catalog.Model, quant string) (Desc, error) {
	file := m.Files[0]
	if quant != "" {
		f, ok := m.Quant(quant)
		if !ok {
			return Desc{}, fmt.Errorf("catalog %s has no %s file", m.ID, quant)
		}
		file = f
	}
	// The family's traits (RoPE flavour, window pattern, soft-caps, norms)
	// as a file of this architecture would give them; the catalog gives the
	// sizes.
	hp := model.FamilyHParams(m.Arch)
	hp.Layers, hp.Embd, hp.Heads, hp.KVHeads, hp.HeadDim = m.Layers, m.Embd, m.Heads, m.KVHeads, m.HeadDim
	hp.FF, hp.Vocab, hp.CtxTrain, hp.RopeBase, hp.RopeDims = m.FF, m.Vocab, m.CtxTrain, float32(m.RopeBase), m.HeadDim
	hp.RMSEps, hp.Window = float32(m.RMSEps), m.SlidingWindow
	hp.TiedOutput, hp.QKVBias = m.TiedOutput, m.QKVBias
	if m.Experts > 0 {
		// Sizes the routing activations a session allocates; gating and
		// norms stay the family's.
		hp.Experts, hp.ExpertsUsed, hp.ExpertFF = m.Experts, m.ExpertsUsed, m.ExpertFF
	}
	if m.SlidingWindowPattern > 0 {
		// The entry's own pattern, for a family this engine does not
		// register yet (its traits would leave every layer windowed).
		hp.SWAPattern = m.SlidingWindowPattern
	}
	catalogLayerShapes(&hp, m)
	if err := hp.Validate(); err != nil {
		return Desc{}, fmt.Errorf("catalog %s: %w", m.ID, err)
	}
	d := Desc{
		Name: m.Name, HParams: hp, WeightsBytes: file.SizeBytes, Exact: !file.SizeApprox,
		FileType: file.Quant, Params: int64(math.Round(m.ParamsB * 1e9)), Runnable: model.Supported(m.Arch),
		Source: "catalog:" + m.ID,
	}
	d.ActiveBytes = catalogActive(file.SizeBytes, m.ParamsB, m.ActiveParamsB)
	if m.Experts > 0 {
		d.Experts = Experts{Count: m.Experts, Used: m.ExpertsUsed}
		if m.ExpertsUsed < m.Experts {
			// Resident minus read is the unrouted experts' share.
			d.Experts.Bytes = (file.SizeBytes - d.ActiveBytes) * int64(m.Experts) / int64(m.Experts-m.ExpertsUsed)
		}
	}
	for _, f := range m.Files {
		if f.Quant == file.Quant {
			continue
		}
		where := f.Repo + "/" + f.File
		if f.Repo == "" {
			where = ""
		}
		d.Alternatives = append(d.Alternatives, Alternative{FileType: f.Quant, Bytes: f.SizeBytes, Approx: f.SizeApprox, Where: where})
	}
	return d, nil
}

// catalogLayerShapes gives hp the entry's per-layer shapes as a file of
// the model gives them (Gemma 4): the global layers' head dim as the
// model-wide one and the sliding layers' as the local one, kv heads per
// layer, the layers that share K/V and the per-layer input width.
func catalogLayerShapes(hp *model.HParams, m *catalog.Model) {
	if d := m.HeadDimGlobal; d > 0 && d != m.HeadDim {
		hp.HeadDimLocal, hp.RopeDimsLocal = m.HeadDim, m.HeadDim
		hp.HeadDim, hp.RopeDims = d, d
	}
	if g := m.KVHeadsGlobal; g > 0 && g != m.KVHeads {
		hp.LayerKVHeads = make([]int, m.Layers)
		for il := range hp.LayerKVHeads {
			hp.LayerKVHeads[il] = g
			if hp.SlidingLayer(il) {
				hp.LayerKVHeads[il] = m.KVHeads
			}
		}
		hp.KVHeads = hp.LayerKVHeads[0]
	}
	hp.SharedKVLayers, hp.PerLayerEmbd = m.SharedKVLayers, m.PerLayerEmbd
}

// fileTypes are llama.cpp's llama_ftype values (general.file_type).
var fileTypes = map[uint64]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
	11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M",
	18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S",
	25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M",
	32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
}

// FileTypeName names a general.file_type value.
func FileTypeName(ft uint64) string {
	if n, ok := fileTypes[ft]; ok {
		return n
	}
	return fmt.Sprintf("file_type %d", ft)
}
