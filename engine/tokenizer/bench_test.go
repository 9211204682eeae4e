package tokenizer

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"nibble/engine/gguf"
)

func benchEncode(b *testing.B, vocab string) {
	td := testdataDir(b)
	benchEncodeWith(b, loadGGUF(b, filepath.Join(td, "tokenizer", "ggml-vocab-"+vocab+".gguf")))
}

func benchEncodeWith(b *testing.B, tk *Tokenizer) {
	text, err := os.ReadFile(filepath.Join(testdataDir(b), "long_prompt.txt"))
	if err != nil {
		b.Skip(err)
	}
	s := string(text)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	cpu0 := cpuTime()
	for b.Loop() {
		n = len(tk.Encode(s, true, false))
	}
	// The test machine is shared; CPU time per op is steadier than wall time.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(n), "tokens")
}

func BenchmarkEncodeLongLlamaBPE(b *testing.B)    { benchEncode(b, "llama-bpe") }
func BenchmarkEncodeLongSPM(b *testing.B)         { benchEncode(b, "llama-spm") }
func BenchmarkEncodeLongGPT2(b *testing.B)        { benchEncode(b, "gpt-2") }
func BenchmarkEncodeLongDeepseekLLM(b *testing.B) { benchEncode(b, "deepseek-llm") }

// Qwen2's pre-tokenizer over the GPT-2 vocabulary (no Qwen vocab in testdata).
func BenchmarkEncodeLongQwen2(b *testing.B) {
	f, err := gguf.Open(filepath.Join(testdataDir(b), "tokenizer", "ggml-vocab-gpt-2.gguf"))
	if err != nil {
		b.Skip(err)
	}
	v, err := VocabFromGGUF(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	v.Pre = "qwen2"
	tk, err := New(v)
	if err != nil {
		b.Fatal(err)
	}
	benchEncodeWith(b, tk)
}

func BenchmarkDecodeLongLlamaBPE(b *testing.B) {
	td := testdataDir(b)
	text, err := os.ReadFile(filepath.Join(td, "long_prompt.txt"))
	if err != nil {
		b.Skip(err)
	}
	tk := loadGGUF(b, filepath.Join(td, "tokenizer", "ggml-vocab-llama-bpe.gguf"))
	ids := tk.Encode(string(text), false, false)
	b.ReportAllocs()
	for b.Loop() {
		_ = tk.Decode(ids)
	}
}

// cpuTime is this process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
