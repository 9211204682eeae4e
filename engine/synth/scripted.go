package synth

import (
	"fmt"
	"math"
	"strings"

	"nibble/engine/gguf"
	"nibble/engine/parallel"
	"nibble/engine/quant"
)

// Script makes a model that always says the same thing: after the token Trigger it writes
// Pieces, one token each, then its end-of-sequence token. It tests what the app and the
// server do with a known reply (a reasoning model's <think> block, say) through the real
// engine, at any sampling temperature a chat uses.
type Script struct {
	// Trigger is the text of the vocabulary token that starts the reply (the last token of
	// every rendered prompt, e.g. "<0x0A>", the newline of llama's SPM vocabulary).
	Trigger string
	// Pieces become user-defined tokens of the vocabulary (replacing its last entries) and
	// are rendered exactly as written. Each must be distinct.
	Pieces []string
	// ChatTemplate is written as tokenizer.chat_template when not empty.
	ChatTemplate string
}

// scriptGain is the logit of the scripted next token: the other logits are 0, so sampling at
// any usual temperature picks it (a chance below e^-20 per token to stray).
const scriptGain = 40

// GenerateScripted writes a model like Generate's (o.Arch must be "llama"), whose layers add
// nothing (zero attention and feed-forward outputs) so that each token's logits depend on that
// token alone: a table of next tokens held in token_embd (one embedding dimension per
// scripted token, dimension 0 for every other) and output (the next token's row reads its
// predecessor's dimension). Every token outside the script is followed by end-of-sequence.
func GenerateScripted(path string, o Options, sc Script) error {
	o.TiedOutput = false
	if o.Arch != "llama" {
		return fmt.Errorf("synth: a scripted model is a llama, not %s", o.Arch)
	}
	if err := o.check(); err != nil {
		return err
	}
	if len(sc.Pieces)+2 > o.Embd {
		return fmt.Errorf("synth: a script of %d tokens needs embd > %d (got %d)", len(sc.Pieces), len(sc.Pieces)+1, o.Embd)
	}
	src, err := openVocab(&o)
	if err != nil {
		return fmt.Errorf("synth: vocab: %w", err)
	}
	defer src.Close()
	tokens, ok1 := src.Strings("tokenizer.ggml.tokens")
	types, ok2 := src.Int32s("tokenizer.ggml.token_type")
	scores, ok3 := src.Float32s("tokenizer.ggml.scores")
	eos, ok4 := src.Uint("tokenizer.ggml.eos_token_id")
	if !ok1 || !ok2 || !ok3 || !ok4 || len(types) != len(tokens) || len(scores) != len(tokens) || int(eos) >= len(tokens) {
		return fmt.Errorf("synth: vocab: a scripted model needs tokens, token types, scores and an EOS id")
	}
	trigger := -1
	for i, t := range tokens {
		if t == sc.Trigger {
			trigger = i
			break
		}
	}
	if trigger < 0 {
		return fmt.Errorf("synth: the trigger %q is not a token of the vocabulary", sc.Trigger)
	}
	// The script's tokens, trigger first; ids from the end of the vocabulary.
	vocab := len(tokens)
	ids := make(map[string]int, vocab)
	for i, t := range tokens {
		ids[t] = i
	}
	seq := []int{trigger}
	seen := map[string]bool{}
	for i, p := range sc.Pieces {
		if p == "" || seen[p] {
			return fmt.Errorf("synth: script piece %d (%q) is empty or repeated", i, p)
		}
		seen[p] = true
		// A piece the vocabulary has as a token without spaces (which SPM writes as U+2581)
		// renders the same from that token; the vocabulary cannot hold it twice.
		if id, ok := ids[p]; ok && !strings.ContainsAny(p, " \u2581") && id != trigger && id != int(eos) {
			seq = append(seq, id)
			continue
		}
		id := vocab - len(sc.Pieces) + i
		if id <= trigger || id == int(eos) {
			return fmt.Errorf("synth: the vocabulary is too small for the script")
		}
		tokens[id], types[id], scores[id] = p, 4, 0 // 4: user-defined, rendered as written
		seq = append(seq, id)
	}
	dim := map[int]int{} // token → its embedding dimension (0: every other token)
	next := map[int]int{}
	for i, id := range seq {
		dim[id] = i + 1
		next[i+1] = int(eos)
		if i+1 < len(seq) {
			next[i+1] = seq[i+1]
		}
	}
	next[0] = int(eos)

	w := gguf.NewWriter()
	if err := setModelKeys(w, &o, vocab); err != nil {
		return err
	}
	for _, k := range src.Keys {
		if strings.HasPrefix(k, "tokenizer.") {
			w.SetValue(k, src.KV[k])
		}
	}
	for _, kv := range []struct {
		key string
		v   any
	}{{"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.token_type", types}, {"tokenizer.ggml.scores", scores}} {
		if err := w.Set(kv.key, kv.v); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if sc.ChatTemplate != "" {
		if err := w.Set("tokenizer.chat_template", sc.ChatTemplate); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	w.Set("general.description", "scripted by nibble synth: replies with a fixed token sequence")

	pool := parallel.Default()
	gain := float32(scriptGain / math.Sqrt(float64(o.Embd))) // RMS norm makes a one-hot sqrt(embd)
	for _, s := range layout(&o, vocab) {
		fill := scriptedRows(s.name, dim, next, gain)
		err := w.AddTensor(s.name, s.typ, s.dims, func(dst []byte) error {
			if fill == nil {
				return fillTensor(pool, dst, &s, o.Seed)
			}
			cols := int(s.dims[0])
			rowBytes := s.typ.RowBytes(cols)
			row := make([]float32, cols)
			for r := 0; r < len(dst)/rowBytes; r++ {
				clear(row)
				fill(r, row)
				if err := quant.Quantize(s.typ, dst[r*rowBytes:(r+1)*rowBytes], row); err != nil {
					return fmt.Errorf("tensor %s row %d: %w", s.name, r, err)
				}
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

// scriptedRows fills the rows of the tensors that carry the script, or is nil for a tensor
// left random.
func scriptedRows(name string, dim map[int]int, next map[int]int, gain float32) func(r int, row []float32) {
	switch {
	case name == "token_embd.weight":
		return func(tok int, row []float32) { row[dim[tok]] = 1 }
	case name == "output.weight":
		return func(tok int, row []float32) {
			for d, n := range next {
				if n == tok {
					row[d] = gain
				}
			}
		}
	case name == "output_norm.weight":
		return func(_ int, row []float32) {
			for i := range row {
				row[i] = 1
			}
		}
	case strings.HasSuffix(name, "attn_output.weight"), strings.HasSuffix(name, "ffn_down.weight"):
		return func(int, []float32) {}
	}
	return nil
}
