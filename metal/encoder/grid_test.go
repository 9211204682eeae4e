package encoder

import (
	"testing"

	"nibble/engine/ggml"
)

// MatVecGrid: the type's rows and sets on a GPU with enough simdgroups for
// its cores (ggml-metal's grid on Apple GPUs), splits by powers of two up
// to 8 otherwise, never below one chunk a lane nor above 512 threads, and
// the threadgroups cover every row.
func TestMatVecGrid(t *testing.T) {
	for _, c := range []struct {
		typ                       ggml.Type
		rows, cols, cores         int
		wantRows, wantSets, split int
	}{
		{ggml.Q4_K, 8192, 2048, 8, 2, 2, 1},     // gate on an M1
		{ggml.Q4_K, 2048, 2048, 32, 2, 2, 1},    // q on an M1 Max: 1024 simdgroups ≥ 512
		{ggml.Q4_K, 512, 2048, 32, 2, 2, 2},     // k on an M1 Max
		{ggml.Q4_K, 2048, 2048, 132, 2, 2, 4},   // q on an H200: 4 chunks a lane at most
		{ggml.Q4_K, 2048, 8192, 132, 2, 2, 4},   // down: 4096 ≥ 2112 simdgroups
		{ggml.Q4_0, 512, 8192, 132, 4, 2, 8},    // the largest split
		{ggml.Q8_0, 512, 8192, 132, 2, 4, 4},    // 4 sets: 16 simdgroups at most
		{ggml.Q6_K, 128256, 2048, 132, 2, 2, 1}, // the output head
		{ggml.F16, 40, 256, 132, 4, 2, 1},       // 16 chunks: no lane left without one
	} {
		g := MatVecGrid(c.typ, c.rows, c.cols, 1, c.cores, MatVecSimdgroupsPerCore)
		if g.Rows != c.wantRows || g.Sets != c.wantSets || g.Split != c.split {
			t.Errorf("%v %d×%d on %d cores: %+v, want rows %d, sets %d, split %d", c.typ, c.rows, c.cols, c.cores, g, c.wantRows, c.wantSets, c.split)
		}
		if g.Groups*g.Rows*g.Sets < c.rows || (g.Groups-1)*g.Rows*g.Sets >= c.rows || g.Threads() > 512 || 32*g.Split > max(c.cols/16, 32) {
			t.Errorf("%v %d×%d on %d cores: %+v", c.typ, c.rows, c.cols, c.cores, g)
		}
	}
}
