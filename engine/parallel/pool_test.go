package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"
	"weak"
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

// loopOver runs one parallel loop over a fresh megabyte and returns a weak
// pointer to it: nothing but the loop's closure refers to it.
func loopOver(p *Pool) weak.Pointer[[1 << 20]byte] {
	buf := new([1 << 20]byte)
	p.For(len(buf), 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			buf[i] = byte(i)
		}
	})
	return weak.Make(buf)
}

// A finished loop's closure (and what it captured: a tensor being written,
// a model's state) is not kept by the pool until the next loop.
func TestForDoesNotKeepTheLoop(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	w := loopOver(p)
	runtime.GC()
	runtime.GC()
	if w.Value() != nil {
		t.Fatal("the pool still holds the finished loop's closure and the megabyte it captured")
	}
}
