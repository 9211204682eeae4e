// Package demo makes the demo model the app falls back to when no model is
// configured: a small Llama-shaped GGUF with random weights and the built-in
// Llama SentencePiece vocabulary, synthesized offline. It shows the engine's
// machinery (streaming, cancellation, tok/s), not sensible text.
//
// The file is the one the Makefile's $(DEMO) target writes (same options,
// same seed, same name in the cache folder), so the CLI and the app share it.
//
// The demo `make run` opens is another: the trained document Q&A model and
// sample document checked in beside this file (README.md).
package demo

import (
	"fmt"
	"os"
	"path/filepath"

	"nibble/catalog/vocab"
	"nibble/engine/ggml"
	"nibble/engine/synth"
)

// FileName is the demo model's name inside the cache folder.
const FileName = "demo-llama-q8_0.gguf"

// Path is where the demo model lives under cacheDir.
func Path(cacheDir string) string { return filepath.Join(cacheDir, FileName) }

// Options are the Makefile's: synth --arch llama --layers 4 --embd 512
// --heads 8 --kv-heads 2 --ff 1536 --type q8_0 --seed 7.
func Options() synth.Options {
	o := synth.DefaultOptions("llama")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 4, 512, 8, 2, 1536
	o.Type = ggml.Q8_0
	o.Seed = 7
	o.VocabData = vocab.LlamaSPM
	return o
}

// Ensure returns the demo model's path under cacheDir, synthesizing it
// first when it is not there (synth.Generate writes atomically, so a file
// that exists is whole). progress (may be nil) gets the bytes of tensor
// data written.
func Ensure(cacheDir string, progress func(done, total int64)) (string, error) {
	path := Path(cacheDir)
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		return path, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	o := Options()
	o.Progress = progress
	if err := synth.Generate(path, o); err != nil {
		return "", fmt.Errorf("demo model: synthesizing %s: %w", path, err)
	}
	return path, nil
}

// Is reports whether path is the demo model of cacheDir.
func Is(cacheDir, path string) bool {
	return path != "" && filepath.Clean(path) == Path(cacheDir)
}
