package parallel

import (
	"sync/atomic"
	"testing"
)

func TestForCoversEveryIndexOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 5} {
		p := NewPool(threads)
		for _, n := range []int{0, 1, 7, 100, 1001} {
			for _, grain := range []int{0, 1, 3, 64} {
				hits := make([]int32, n)
				p.For(n, grain, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						atomic.AddInt32(&hits[i], 1)
					}
				})
				for i, h := range hits {
					if h != 1 {
						t.Fatalf("threads %d n %d grain %d: index %d hit %d times", threads, n, grain, i, h)
					}
				}
			}
		}
		p.Close()
	}
}
