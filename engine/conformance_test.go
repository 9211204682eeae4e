package engine

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nibble/engine/cpu"
	"nibble/engine/kv"
	"nibble/engine/numeric"
	"nibble/engine/sample"
	"nibble/internal/testdata"
)

// reference is one llama.cpp output file of the shared fixtures' models/.
type reference struct {
	Prompt     string         `json:"prompt"`
	PromptFile string         `json:"prompt_file"`
	Tokens     []int32        `json:"tokens"`
	Top        [][][2]float64 `json:"top"`
	Greedy     []int32        `json:"greedy"`
	GreedyTop  [][][2]float64 `json:"greedy_top"`
}

func loadReference(t *testing.T, td, modelFile, which string) (*reference, string, []float32) {
	t.Helper()
	dir := filepath.Join(td, "models", strings.TrimSuffix(modelFile, ".gguf")+".ref")
	raw, err := os.ReadFile(filepath.Join(dir, which+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	prompt := ref.Prompt
	if ref.PromptFile != "" {
		b, err := os.ReadFile(filepath.Join(td, ref.PromptFile))
		if err != nil {
			t.Fatal(err)
		}
		prompt = string(b)
	}
	lb, err := os.ReadFile(filepath.Join(dir, which+".last_logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	last := make([]float32, len(lb)/4)
	for i := range last {
		last[i] = math.Float32frombits(binary.LittleEndian.Uint32(lb[4*i:]))
	}
	return &ref, prompt, last
}

// conformance holds what one model/prompt pair measured.
type conformance struct {
	cosLast       float64
	top1          float64 // fraction of prompt positions whose argmax matches
	maxAbsTop     float64 // largest |Δ| over the reference's top-8 logits
	greedyFree    int     // free-running greedy tokens equal to the reference, as a prefix
	teacherForced int     // teacher-forced steps whose argmax matches
}

func measureConformance(t *testing.T, m *Model, ref *reference, prompt string, last []float32, kvt kv.Type) conformance {
	t.Helper()
	ids := m.EncodePrompt(prompt)
	if !slices.Equal(ids, ref.Tokens) {
		t.Fatalf("tokens differ from llama.cpp:\n got %v\nwant %v", ids, ref.Tokens)
	}
	n := len(ids)
	st, err := m.NewState(kv.Config{Type: kvt, GroupSize: 32, Ctx: n + len(ref.Greedy) + 1}, n)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var c conformance
	hits := 0
	var lastRow []float32
	err = st.ForwardAll(ids, 0, func(row int, logits []float32) {
		if sample.Greedy(logits) == int32(ref.Top[row][0][0]) {
			hits++
		}
		for _, e := range ref.Top[row] {
			c.maxAbsTop = max(c.maxAbsTop, math.Abs(float64(logits[int(e[0])])-e[1]))
		}
		if row == n-1 {
			lastRow = slices.Clone(logits)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	c.top1 = float64(hits) / float64(n)
	c.cosLast = numeric.Cosine(lastRow, last)

	// Teacher-forced: feed llama.cpp's greedy tokens; count argmax matches.
	logits := lastRow
	buf := make([]float32, m.HP.Vocab)
	free := true
	for i, want := range ref.Greedy {
		got := sample.Greedy(logits)
		if got == want {
			c.teacherForced++
			if free {
				c.greedyFree++
			}
		} else {
			free = false
		}
		if i == len(ref.Greedy)-1 {
			break
		}
		if err := st.Forward([]int32{want}, n+i, buf); err != nil {
			t.Fatal(err)
		}
		logits = buf
	}
	return c
}

// TestConformanceWithLlamaCpp checks every tiny model against llama.cpp's
// reference logits (the shared fixtures' README, sections 3-4) with an f16 cache.
func TestConformanceWithLlamaCpp(t *testing.T) {
	td := testdata.Dir(t)
	for _, file := range testdata.Models {
		b := cpu.New(2)
		m, err := LoadModel(filepath.Join(td, "models", file), b)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		f16 := strings.Contains(file, "f16")
		for _, which := range []string{"short", "long"} {
			t.Run(strings.TrimSuffix(file, ".gguf")+"/"+which, func(t *testing.T) {
				ref, prompt, last := loadReference(t, td, file, which)
				c := measureConformance(t, m, ref, prompt, last, kv.F16)
				t.Logf("cos(last)=%.6f top1=%.1f%% max|Δtop8|=%.3f greedy free=%d/24 teacher-forced=%d/24",
					c.cosLast, 100*c.top1, c.maxAbsTop, c.greedyFree, c.teacherForced)
				minCos, minTop1 := 0.998, 0.90
				if f16 {
					minCos, minTop1 = 0.99999, 0.99
					if c.greedyFree != len(ref.Greedy) {
						t.Errorf("greedy tokens: only the first %d of %d match llama.cpp", c.greedyFree, len(ref.Greedy))
					}
					if c.maxAbsTop > 0.1 {
						t.Errorf("max |Δ| over reference top-8 logits %.3f > 0.1", c.maxAbsTop)
					}
				}
				if c.cosLast < minCos {
					t.Errorf("cosine of last-position logits %.6f < %g", c.cosLast, minCos)
				}
				if c.top1 < minTop1 {
					t.Errorf("top-1 agreement %.1f%% < %.0f%%", 100*c.top1, 100*minTop1)
				}
			})
		}
		m.Close()
		b.Close()
	}
}
