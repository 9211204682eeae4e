package scheduler

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"nibble/engine"
	"nibble/engine/kv"
)

// mappedFiles is the process's memory map (to see that a model file is gone).
func mappedFiles(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// statusKiB reads one "Name:  N kB" line of /proc/self/status.
func statusKiB(t *testing.T, key string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("%s not in /proc/self/status", key)
	return 0
}

// Twenty load/unload cycles in one process: peak RSS grows by less than
// 10 MiB after the first cycle (nothing leaks per cycle).
func TestLoadUnloadCyclesDoNotGrowRSS(t *testing.T) {
	if raceEnabled {
		t.Skip("skipping: the race detector's own memory swamps the RSS figures")
	}
	s := New(Config{Threads: 2})
	defer s.Close()
	path := modelPath(t, "tiny-llama3-q8_0.gguf") // the largest vocabulary: 128K tokens
	cycle := func() {
		if _, err := s.Load(path, engine.Options{Ctx: 2048, KV: kv.Q4}); err != nil {
			t.Fatal(err)
		}
		ask(t, s, Request{Prompt: "Hello there", Params: greedy(4)})
		if err := s.Unload(); err != nil {
			t.Fatal(err)
		}
		// Each cycle starts from a collected heap, so that its peak does
		// not depend on how far the collector got under a busy machine.
		runtime.GC()
	}
	cycle()
	after1 := statusKiB(t, "VmHWM")
	for range 19 {
		cycle()
	}
	after20 := statusKiB(t, "VmHWM")
	t.Logf("peak RSS after 1 cycle %.1f MiB, after 20 cycles %.1f MiB (current %.1f MiB)",
		float64(after1)/1024, float64(after20)/1024, float64(statusKiB(t, "VmRSS"))/1024)
	if grow := after20 - after1; grow >= 10*1024 {
		t.Fatalf("peak RSS grew by %.1f MiB over 19 more cycles", float64(grow)/1024)
	}
}
