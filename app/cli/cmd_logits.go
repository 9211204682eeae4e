package cli

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sort"
)

func init() {
	Register(&Command{
		Name:  "logits",
		Usage: "-m MODEL (--prompt TEXT | --prompt-file F) [--top 20] [--json] [--out F.f32] [--kv f16|q8|q4]",
		Run:   logitsCmd,
	})
}

// topLogits returns the k largest logits as [id, logit] pairs, ties by lower id.
func topLogits(logits []float32, k int) [][2]float64 {
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return logits[idx[a]] > logits[idx[b]] })
	out := make([][2]float64, 0, k)
	for _, i := range idx[:min(k, len(idx))] {
		out = append(out, [2]float64{float64(i), float64(logits[i])})
	}
	return out
}

func logitsCmd(env *Env, args []string) error {
	fs := NewFlags(env, "logits")
	var mf modelFlags
	mf.register(fs)
	prompt := fs.String("prompt", "", "prompt `TEXT`")
	promptFile := fs.String("prompt-file", "", "prompt `FILE`")
	asJSON := fs.Bool("json", false, "print {\"tokens\":[ids], \"top\":[[id,logit],…]}")
	out := fs.String("out", "", "write all last-position logits as raw little-endian float32 to `FILE`")
	top := fs.Int("top", 20, "how many top logits to print")
	if _, err := ParseFlags(fs, args); err != nil {
		return err
	}
	if err := intFlagAtLeast("--top", *top, 0); err != nil {
		return err
	}
	text, err := promptText(*prompt, *promptFile)
	if err != nil {
		return err
	}
	if text == "" {
		return fmt.Errorf("%w: give --prompt or --prompt-file", ErrUsage)
	}
	s, closeAll, err := mf.open(env)
	if err != nil {
		return err
	}
	defer closeAll()
	ids := s.M.EncodePrompt(text)
	if _, err := s.Prefill(context.Background(), ids); err != nil {
		return err
	}
	logits := s.Logits()
	if *out != "" {
		buf := make([]byte, 4*len(logits))
		for i, v := range logits {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		if err := os.WriteFile(*out, buf, 0o644); err != nil {
			return fmt.Errorf("write logits: %w", err)
		}
	}
	tops := topLogits(logits, *top)
	if *asJSON {
		pairs := make([][2]any, len(tops))
		for i, t := range tops {
			pairs[i] = [2]any{int(t[0]), float32(t[1])}
		}
		return writeJSON(env.Stdout, map[string]any{"tokens": ids, "top": pairs})
	}
	fmt.Fprintf(env.Stdout, "%d tokens; top logits at the last position:\n", len(ids))
	for _, t := range tops {
		fmt.Fprintf(env.Stdout, "%8d %10.4f %q\n", int(t[0]), t[1], s.M.Tok.Piece(int32(t[0])))
	}
	return nil
}

// promptText is the prompt given inline or, when file is set, read from it.
func promptText(inline, file string) (string, error) {
	if file == "" {
		return inline, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read prompt: %w", err)
	}
	return string(b), nil
}
