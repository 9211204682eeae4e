package cpu

import (
	"runtime"

	"nibble/engine/backend"
	"nibble/engine/cpu/attention"
	"nibble/engine/kv"
)

// Runtime overhead: what the process needs beyond the mapped weights and
// the memory the backend counts (KV cache, activations, attention
// workspace). Three parts:
//
//   - a base: Go runtime, binary text, chat template, parsed metadata
//     scalars, GC slack (measured);
//   - the tokenizer and the parsed vocabulary arrays, proportional to the
//     vocabulary (measured: merges add to it for BPE vocabularies);
//   - the matmul activation pool (quant.MatMul keeps the quantized or
//     fp16-rounded copy of its input in a sync.Pool, outside the backend's
//     count): at most 4 bytes per element of the widest input of a batch,
//     computed from the shape.
//
// Measured with TestMeasureOverhead (overhead_measure_test.go) on the five
// test models, Linux x86-64, Go 1.26: peak RSS (wait4 rusage) of `nibble
// run` on the LONG prompt (ctx 1024, f16 KV, batch 512, 8 tokens, 2
// threads, worst of 3 runs) minus the file size (every page is touched) and
// the counted KV + scratch. `nibble help` alone peaks at 11-13 MiB.
//
//	model                  vocab   peak RSS  file  KV+scratch  overhead  this model
//	tiny-llama-spm-f16     32000   54-56     19.3  7.2         27-29     32.1 MiB
//	tiny-llama-spm-q4_0    32000   35-36      7.9  7.2         20-21     32.1
//	tiny-llama-spm-q4_k_m  32000   33-34      8.0  7.2         18-19     32.1
//	tiny-llama3-q8_0      128256  103-118    41.9  6.5         54-69     75.7
//	tiny-qwen2-q4_0        50257   46-48     19.3  6.2         21-23     40.0
//
// The spread comes from when the GC runs. The fit is a line through the
// worst spm (32k entries) and llama-bpe (128k entries + 280k merges)
// figures with ~10% added: 16 MiB + 480 B per vocabulary entry. On real
// models the pool term dominates the difference: Llama-3.1-8B at batch 512
// gets 16 + 58.7 + 28.0 = 103 MiB, Llama-3.1-70B 16 + 58.7 + 56.0 = 131 MiB.
// Not covered: garbage the GC lets pile up against a multi-GB live heap
// (GOGC=100 waits for the heap to double) if the KV cache lives in the Go
// heap; a memory limit (debug.SetMemoryLimit) keeps that bounded.
const (
	baseOverhead     = 16 << 20
	perVocabOverhead = 480 // bytes per vocabulary entry
)

// footprint is the CPU backend's answer to the memory estimator.
type footprint struct{}

func init() { backend.RegisterFootprint("cpu", footprint{}) }

func (footprint) WorkspaceBytes(cfg kv.Config, heads, maxBatch, threads int) int64 {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0) // what New(0) runs
	}
	var n int64
	for _, g := range cfg.Geometries() { // one workspace per head shape, as NewKVCache makes them
		n += attention.WorkspaceBytes(attention.Params{Heads: heads, KVHeads: g.KVHeads, HeadDim: g.HeadDim}, cfg.Slots(), maxBatch, threads)
	}
	geometry := attention.Params{Heads: heads, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim}
	if cfg.Evict.Policy == kv.EvictH2O {
		n += attention.ScoreScratchBytes(geometry, cfg.Slots(), maxBatch)
	}
	return n
}

func (footprint) OverheadBytes(s backend.Shape, batch int) int64 {
	return baseOverhead + perVocabOverhead*int64(s.Vocab) + activationPoolBytes(s, batch)
}

// activationPoolBytes bounds quant.MatMul's pooled input copy: batch rows
// of the widest matmul input, 4 bytes per element (the f16/bf16 path keeps
// float32s; the q8 paths need less).
func activationPoolBytes(s backend.Shape, batch int) int64 {
	return 4 * int64(batch) * int64(max(s.Embd, s.Heads*s.HeadDim, s.FF))
}
