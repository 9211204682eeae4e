package cli

import (
	"fmt"
	"strings"

	"nibble/engine/gguf"
	"nibble/engine/tokenizer"
)

func init() {
	Register(&Command{Name: "tokenize", Usage: "-m MODEL TEXT [--json] [--no-special] [--parse-special]", Run: tokenizeCmd})
}

func tokenizeCmd(env *Env, args []string) error {
	fs := NewFlags(env, "tokenize")
	path := fs.String("m", "", "model or vocab `FILE.gguf`")
	asJSON := fs.Bool("json", false, "print {\"tokens\":[ids]}")
	noSpecial := fs.Bool("no-special", false, "do not add BOS/EOS")
	parseSpecial := fs.Bool("parse-special", false, "turn special-token text into special tokens")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if *path == "" || len(pos) == 0 {
		return fmt.Errorf("%w: need -m MODEL and TEXT", ErrUsage)
	}
	f, err := gguf.Open(*path)
	if err != nil {
		return err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return fmt.Errorf("tokenizer of %s: %w", *path, err)
	}
	ids := tok.Encode(strings.Join(pos, " "), !*noSpecial, *parseSpecial)
	if *asJSON {
		if ids == nil {
			ids = []int32{}
		}
		return writeJSON(env.Stdout, map[string]any{"tokens": ids})
	}
	for _, id := range ids {
		fmt.Fprintf(env.Stdout, "%6d %q\n", id, tok.Piece(id))
	}
	return nil
}
