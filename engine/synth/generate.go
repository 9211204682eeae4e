package synth

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"nibble/engine/family"
	"nibble/engine/gguf"
	"nibble/engine/parallel"
	"nibble/engine/quant"
)

// Generate writes the model described by o to path (atomically: a temporary
// file renamed into place). The same options and seed give the same bytes.
func Generate(path string, o Options) error {
	if err := o.check(); err != nil {
		return err
	}
	w := gguf.NewWriter()
	vocab, err := copyTokenizer(w, &o)
	if err != nil {
		return err
	}
	specs := layout(&o, vocab)
	var total, done int64
	for i := range specs {
		total += specs[i].bytes()
	}
	pool := parallel.Default()
	for i := range specs {
		s := &specs[i]
		err := w.AddTensor(s.name, s.typ, s.dims, func(dst []byte) error {
			if err := fillTensor(pool, dst, s, o.Seed); err != nil {
				return err
			}
			done += s.bytes()
			if o.Progress != nil {
				o.Progress(done, total)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// copyTokenizer sets the model metadata and copies every tokenizer.* key of
// o.VocabFrom unchanged; it returns the vocabulary size.
func copyTokenizer(w *gguf.Writer, o *Options) (int, error) {
	src, err := openVocab(o)
	if err != nil {
		return 0, fmt.Errorf("synth: vocab: %w", err)
	}
	defer src.Close()
	vocab, ok := src.ArrayLen("tokenizer.ggml.tokens")
	if !ok || vocab < 1 || vocab > maxVocab {
		return 0, fmt.Errorf("synth: vocab: %s has no usable tokenizer.ggml.tokens array", o.VocabFrom)
	}
	if err := setModelKeys(w, o, vocab); err != nil {
		return 0, err
	}
	// Values read by Open are copies, not views of the mapping, so they
	// outlive src.
	for _, k := range src.Keys {
		if strings.HasPrefix(k, "tokenizer.") {
			w.SetValue(k, src.KV[k])
		}
	}
	return vocab, nil
}

func setModelKeys(w *gguf.Writer, o *Options, vocab int) error {
	a := o.Arch + "."
	fam, _ := family.Lookup(o.Arch) // check has made sure it is registered
	hd := uint32(o.headDim())
	kvs := []struct {
		key string
		v   any
	}{
		{"general.architecture", o.Arch},
		{"general.name", fmt.Sprintf("nibble-synth-%s-%dL-%dE-%s", o.Arch, o.Layers, o.Embd, strings.ToLower(o.Type.String()))},
		{"general.description", fmt.Sprintf("random weights by nibble synth: arch=%s layers=%d embd=%d heads=%d kv_heads=%d ff=%d%s type=%s seed=%d tied=%v",
			o.Arch, o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.expertsDescription(), o.Type, o.Seed, o.TiedOutput)},
		{"general.file_type", fileType(o.Type, o.ExpertType)},
		{"general.quantization_version", uint32(2)},
		{a + "vocab_size", uint32(vocab)},
		{a + "context_length", uint32(o.Ctx)},
		{a + "embedding_length", uint32(o.Embd)},
		{a + "block_count", uint32(o.Layers)},
		{a + "feed_forward_length", uint32(o.FF)},
		{a + "attention.head_count", uint32(o.Heads)},
		{a + "attention.head_count_kv", uint32(o.KVHeads)},
		{a + "rope.freq_base", o.RopeBase},
		{a + "attention.layer_norm_rms_epsilon", fam.Synth.RMSEps},
		{a + "rope.dimension_count", hd},
		{a + "attention.key_length", hd},
		{a + "attention.value_length", hd},
	}
	add := func(key string, v any) {
		kvs = append(kvs, struct {
			key string
			v   any
		}{a + key, v})
	}
	if o.AttnScale > 0 {
		add("attention.scale", o.AttnScale)
	}
	// The family keys llama.cpp reads (and the engine, engine/model): the
	// soft-caps of a family that has them, the window, which a family that ignores it must still state, and the
	// original context of a LongRoPE family.
	if t := fam.Traits; t.AttnSoftcap > 0 || t.FinalSoftcap > 0 {
		add("attn_logit_softcapping", t.AttnSoftcap)
		add("final_logit_softcapping", t.FinalSoftcap)
	}
	if o.Window > 0 {
		add("attention.sliding_window", uint32(o.Window))
	}
	if o.Experts > 0 {
		add("expert_count", uint32(o.Experts))
		add("expert_used_count", uint32(o.ExpertsUsed))
		if statesExpertFF(fam) {
			add("expert_feed_forward_length", uint32(o.ExpertFF))
		}
		if o.SharedFF > 0 {
			add("expert_shared_feed_forward_length", uint32(o.SharedFF))
		}
	}
	if o.YaRNFactor > 0 {
		add("rope.scaling.type", "yarn")
		add("rope.scaling.factor", o.YaRNFactor)
		add("rope.scaling.original_context_length", uint32(o.YaRNOrigCtx))
	}
	if fam.Quirks.IgnoresWindow {
		add("attention.sliding_window", uint32(0))
	}
	if o.gemma4() {
		g, hdg := o.Gemma4, uint32(o.headDimGlobal())
		set := func(key string, v any) {
			for i := range kvs {
				if kvs[i].key == a+key {
					kvs[i].v = v
					return
				}
			}
			add(key, v)
		}
		// As llama.cpp's converter writes them: the global layers' head dim
		// as key_length, the sliding layers' as key_length_swa.
		set("attention.key_length", hdg)
		set("attention.value_length", hdg)
		set("rope.dimension_count", hdg)
		set("attention.key_length_swa", hd)
		set("attention.value_length_swa", hd)
		set("rope.dimension_count_swa", hd)
		set("rope.freq_base_swa", fam.Traits.RopeBaseLocal)
		set("attention.sliding_window_pattern", o.slidingLayers())
		set("attention.shared_kv_layers", uint32(g.SharedKVLayers))
		set("embedding_length_per_layer_input", uint32(g.PerLayerEmbd))
		if kvh := o.layerKVHeads(); kvh != nil {
			a32 := make([]int32, len(kvh))
			for i, v := range kvh {
				a32[i] = int32(v)
			}
			set("attention.head_count_kv", a32)
		}
	}
	if fam.Tensors.RopeFactors == family.RopeLongShort {
		if o.LongRoPEOrigCtx > 0 {
			add("rope.scaling.original_context_length", uint32(o.LongRoPEOrigCtx))
			add("rope.scaling.attn_factor", o.longRoPEAttnFactor())
		} else {
			add("rope.scaling.original_context_length", uint32(o.Ctx))
		}
	}
	for _, kv := range kvs {
		if err := w.Set(kv.key, kv.v); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	return nil
}

// expertsDescription is the experts' part of general.description.
func (o *Options) expertsDescription() string {
	if o.Experts == 0 {
		return ""
	}
	return fmt.Sprintf(" experts=%d used=%d expert_ff=%d", o.Experts, o.ExpertsUsed, o.ExpertFF)
}

// fillTensor generates and encodes the tensor row by row, rows in parallel.
func fillTensor(pool *parallel.Pool, dst []byte, s *tensorSpec, seed uint64) error {
	cols := int(s.dims[0])
	rows := int(s.bytes() / int64(s.typ.RowBytes(cols)))
	rowBytes := s.typ.RowBytes(cols)
	tseed := nameSeed(seed, s.name)
	var (
		once     sync.Once
		firstErr error
	)
	grain := max(1, (64<<10)/cols) // about 64K elements per task
	pool.For(rows, grain, func(lo, hi int) {
		row := make([]float32, cols)
		for r := lo; r < hi; r++ {
			fillRow(row, tseed, r, s.d)
			if s.values != nil {
				copy(row, s.values)
			}
			if g := s.rowGain(r); g != 1 {
				for i := range row {
					row[i] *= g
				}
			}
			if err := quant.Quantize(s.typ, dst[r*rowBytes:(r+1)*rowBytes], row); err != nil {
				once.Do(func() { firstErr = fmt.Errorf("tensor %s row %d: %w", s.name, r, err) })
				return
			}
		}
	})
	return firstErr
}

// openVocab reads the vocabulary GGUF from VocabData when set, else VocabFrom.
func openVocab(o *Options) (*gguf.File, error) {
	if o.VocabData != nil {
		return gguf.ReadHeader(bytes.NewReader(o.VocabData), int64(len(o.VocabData)), gguf.HeaderOptions{})
	}
	return gguf.Open(o.VocabFrom)
}
