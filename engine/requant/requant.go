// Package requant rewrites a GGUF model with its weight matrices in another
// type, as llama-quantize does: every 2D weight is expanded to float32 and
// encoded again, while 1D tensors (norms, biases) and the metadata are
// copied unchanged. The token embedding (and an untied output) may be kept
// at a higher precision than the other weights.
package requant

import (
	"fmt"
	"slices"
	"strings"

	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/quant"
)

// Types are the types a model can be written in: those quant.Quantize
// encodes. MXFP4 is llama.cpp's MXFP4_MOE: the experts' 3-D weights in
// MXFP4, the other weights in Q8_0.
var Types = []ggml.Type{ggml.F32, ggml.F16, ggml.BF16, ggml.Q8_0, ggml.Q4_0, ggml.MXFP4}

// Options say how to rewrite a model.
type Options struct {
	// Type is the type of the 2D weights.
	Type ggml.Type
	// EmbedType is the type of token_embd.weight and output.weight; zero
	// (F32's value) is taken as "same as Type" unless EmbedTypeSet.
	EmbedType    ggml.Type
	EmbedTypeSet bool
	// Metadata values to set (or replace) in the written file, e.g.
	// tokenizer.chat_template: Go values as gguf.Writer.Set takes them.
	Set map[string]any
	// Progress (may be nil) gets the tensors written so far and their count.
	Progress func(done, total int)
}

// Summary is what File wrote.
type Summary struct {
	Tensors int               // tensors written
	ByType  map[ggml.Type]int // tensors written per type
	Kept    []string          // 2D weights left in their type (their rows do not fit the type's blocks)
}

// ParseType names a type of Types, case-insensitively ("q4_0", "F16").
func ParseType(s string) (ggml.Type, error) {
	for _, t := range Types {
		if strings.EqualFold(s, t.String()) {
			return t, nil
		}
	}
	names := make([]string, len(Types))
	for i, t := range Types {
		names[i] = strings.ToLower(t.String())
	}
	return 0, fmt.Errorf("unknown or unsupported type %q (supported: %s)", s, strings.Join(names, ", "))
}

// fileTypes are llama.cpp's general.file_type values (enum llama_ftype).
var fileTypes = map[ggml.Type]uint32{ggml.F32: 0, ggml.F16: 1, ggml.Q4_0: 2, ggml.Q8_0: 7, ggml.BF16: 32, ggml.MXFP4: 38}

// File writes the model at in to out (atomically) with its weights in
// o.Type. in and out must differ.
func File(in, out string, o Options) (Summary, error) {
	var sum Summary
	embedType := o.Type
	if o.Type == ggml.MXFP4 {
		embedType = ggml.Q8_0 // MXFP4_MOE: only the experts are MXFP4
	}
	if o.EmbedTypeSet {
		embedType = o.EmbedType
	}
	for _, t := range []ggml.Type{o.Type, embedType} {
		if !slices.Contains(Types, t) {
			_, err := ParseType(t.String())
			return sum, fmt.Errorf("requant: %w", err)
		}
	}
	if in == out {
		return sum, fmt.Errorf("requant: the output %s is the input: write to another file", out)
	}
	f, err := gguf.Open(in)
	if err != nil {
		return sum, fmt.Errorf("requant: %w", err)
	}
	defer f.Close()
	if f.Arch() == "" {
		return sum, fmt.Errorf("requant: %s has no general.architecture: not a model", in)
	}
	if len(f.Tensors) == 0 {
		return sum, fmt.Errorf("requant: %s has no tensors", in)
	}

	w := gguf.NewWriter()
	for _, k := range f.Keys {
		w.SetValue(k, f.KV[k])
	}
	if err := w.Set("general.file_type", fileTypes[o.Type]); err != nil {
		return sum, fmt.Errorf("requant: %w", err)
	}
	if o.Type != ggml.F32 && o.Type != ggml.F16 && o.Type != ggml.BF16 {
		if err := w.Set("general.quantization_version", uint32(2)); err != nil {
			return sum, fmt.Errorf("requant: %w", err)
		}
	}
	keys := make([]string, 0, len(o.Set))
	for k := range o.Set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := w.Set(k, o.Set[k]); err != nil {
			return sum, fmt.Errorf("requant: %w", err)
		}
	}

	sum.ByType = map[ggml.Type]int{}
	done := 0
	for i := range f.Tensors {
		t := &f.Tensors[i]
		src := f.TensorData(t)
		if src == nil {
			return sum, fmt.Errorf("requant: %s: tensor %s lies outside the file", in, t.Name)
		}
		to := targetType(t, o.Type, embedType)
		if to != t.Type && t.Dims[0]%uint64(to.BlockSize()) != 0 {
			sum.Kept = append(sum.Kept, t.Name)
			to = t.Type
		}
		if to != t.Type && !t.Type.Known() {
			return sum, fmt.Errorf("requant: %s: tensor %s has an unknown type %d", in, t.Name, uint32(t.Type))
		}
		sum.ByType[to]++
		sum.Tensors++
		err := w.AddTensor(t.Name, to, t.Dims, func(dst []byte) error {
			defer func() {
				done++
				if o.Progress != nil {
					o.Progress(done, len(f.Tensors))
				}
			}()
			if to == t.Type {
				copy(dst, src)
				return nil
			}
			return convert(t, to, dst, src)
		})
		if err != nil {
			return sum, fmt.Errorf("requant: %w", err)
		}
	}
	if err := w.WriteFile(out); err != nil {
		return sum, fmt.Errorf("requant: %w", err)
	}
	return sum, nil
}

// targetType is the type tensor t is written in: 1D tensors, norms and
// routers keep theirs (F32, as llama.cpp keeps them), the embedding and an
// untied output get embedType, the other weights typ; with typ MXFP4
// (llama.cpp's MXFP4_MOE) only the experts' 3-D weights are MXFP4, the
// other weights Q8_0.
func targetType(t *gguf.TensorInfo, typ, embedType ggml.Type) ggml.Type {
	if len(t.Dims) < 2 || strings.Contains(t.Name, "norm") || !strings.HasSuffix(t.Name, ".weight") ||
		strings.Contains(t.Name, "ffn_gate_inp") {
		return t.Type
	}
	if t.Name == "token_embd.weight" || t.Name == "output.weight" {
		return embedType
	}
	if typ == ggml.MXFP4 && len(t.Dims) < 3 {
		return ggml.Q8_0
	}
	return typ
}

// convert re-encodes t's data src (of type t.Type) as type to, row by row.
func convert(t *gguf.TensorInfo, to ggml.Type, dst, src []byte) error {
	cols := int(t.Dims[0])
	rows := int(t.Elements() / t.Dims[0])
	inRow, outRow := t.Type.RowBytes(cols), to.RowBytes(cols)
	if inRow*rows != len(src) || outRow*rows != len(dst) {
		return fmt.Errorf("tensor %s: %d rows of %d %s elements do not match its %d bytes", t.Name, rows, cols, t.Type, len(src))
	}
	row := make([]float32, cols)
	for r := range rows {
		if err := quant.Dequantize(t.Type, row, src[r*inRow:(r+1)*inRow]); err != nil {
			return fmt.Errorf("tensor %s row %d: %w", t.Name, r, err)
		}
		if err := quant.Quantize(to, dst[r*outRow:(r+1)*outRow], row); err != nil {
			return fmt.Errorf("tensor %s row %d: %w", t.Name, r, err)
		}
	}
	return nil
}
