// Package vocab embeds the default tokenizer vocabulary used by `nibble synth`.
package vocab

import _ "embed"

// LlamaSPM is a vocabulary-only GGUF (SentencePiece, 32000 tokens).
//
//go:embed ggml-vocab-llama-spm.gguf
var LlamaSPM []byte
