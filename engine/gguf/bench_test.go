package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReadHeader parses the largest vocabulary fixture (128K tokens,
// 280K merges) from memory, so it measures parsing rather than disk.
func BenchmarkReadHeader(b *testing.B) {
	path := filepath.Join(sharedTestdata(b), "tokenizer", "ggml-vocab-llama-bpe.gguf")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Skipf("%s absent", path)
	}
	for _, c := range []struct {
		name string
		skip int
	}{{"full", 0}, {"skip-long-arrays", 1000}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ReadHeader(bytes.NewReader(data), int64(len(data)), HeaderOptions{SkipArraysLongerThan: c.skip}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
