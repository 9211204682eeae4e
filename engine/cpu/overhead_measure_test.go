//go:build linux

package cpu

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/estimate"
	"nibble/engine/kv"
	"nibble/internal/testdata"
)

// TestMeasureOverhead is how the overhead constants in footprint.go were
// measured. It is slow (builds nibble, runs it 15 times), so it only runs
// with NIBBLE_MEASURE_OVERHEAD=1:
//
//	NIBBLE_MEASURE_OVERHEAD=1 go test ./engine/cpu -run MeasureOverhead -v
//
// For every test model it runs `nibble run` on the LONG prompt (one full
// prefill batch of 512, then 8 decoded tokens; ctx 1024, f16 KV, 2 threads)
// and takes the child's peak RSS from wait4's rusage. Everything in that
// peak that is not the mapped file (all of it is touched: the tokenizer
// reads the metadata, the forward pass every weight) or the backend's
// counted allocations (KV cache + scratch, computed with the same functions
// as the backend) is runtime overhead: the Go runtime and binary text, the
// parsed metadata, tokenizer and chat template, the matmul activation pool
// and the garbage the GC lets accumulate.
func TestMeasureOverhead(t *testing.T) {
	if os.Getenv("NIBBLE_MEASURE_OVERHEAD") == "" {
		t.Skip("set NIBBLE_MEASURE_OVERHEAD=1 to measure the runtime overhead (slow)")
	}
	dir := testdata.Dir(t)
	bin := filepath.Join(t.TempDir(), "nibble")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = testdata.RepoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	peak := func(args ...string) int64 {
		var best int64
		for range 3 { // the peak varies with GC timing; keep the worst
			cmd := exec.Command(bin, args...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
			best = max(best, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss<<10)
		}
		return best
	}
	t.Logf("nibble help: peak RSS %.1f MiB (runtime + binary alone)", mib(peak("help")))
	for _, name := range []string{"tiny-llama-spm-f16", "tiny-llama-spm-q4_0", "tiny-llama-spm-q4_k_m", "tiny-llama3-q8_0", "tiny-qwen2-q4_0"} {
		path := filepath.Join(dir, "models", name+".gguf")
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		d, err := estimate.FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		o := estimate.Options{Ctx: 1024, KV: kv.F16, Batch: 512, Threads: 2, Overhead: 1}
		e, err := estimate.Compute(d, o)
		if err != nil {
			t.Fatal(err)
		}
		rss := peak("run", "-m", path, "--prompt-file", filepath.Join(dir, "long_prompt.txt"), "-n", "8", "--temp", "0",
			"--ctx", "1024", "--kv", "f16", "--threads", "2", "--batch", "512")
		over := rss - st.Size() - e.KV - e.Scratch
		hp := d.HParams
		s := backend.Shape{Embd: hp.Embd, Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim, FF: hp.FF, Vocab: hp.Vocab}
		pool := activationPoolBytes(s, 512)
		fit := footprint{}.OverheadBytes(s, 512)
		t.Logf("%-22s vocab %6d: peak RSS %6.1f MiB - file %5.1f - KV+scratch %4.1f = overhead %5.1f MiB (pool %.1f); model %5.1f MiB (%+.0f%%)",
			name, d.HParams.Vocab, mib(rss), mib(st.Size()), mib(e.KV+e.Scratch), mib(over), mib(pool), mib(fit), 100*(float64(fit)/float64(over)-1))
		if fit < over {
			t.Errorf("%s: the overhead model (%.1f MiB) is below the measured %.1f MiB", name, mib(fit), mib(over))
		}
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
