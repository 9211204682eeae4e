// Package parallel runs data-parallel loops on a fixed set of worker
// goroutines. The CPU backend issues hundreds of small parallel loops per
// token, so workers are persistent and chunks are claimed with an atomic
// counter instead of spawning goroutines per call.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool is a set of Threads workers (the calling goroutine is one of them).
type Pool struct {
	threads int
	work    chan *job
}

type job struct {
	n, grain int
	next     atomic.Int64
	fn       func(lo, hi int)
	wg       sync.WaitGroup
}

// NewPool starts threads-1 workers; threads <= 0 means GOMAXPROCS.
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads, work: make(chan *job, threads)}
	for i := 1; i < threads; i++ {
		go p.worker()
	}
	return p
}

// Threads is the number of goroutines that execute a loop.
func (p *Pool) Threads() int { return p.threads }

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() { close(p.work) }

func (p *Pool) worker() {
	for j := range p.work {
		j.run()
		j.wg.Done()
	}
}

func (j *job) run() {
	for {
		lo := int(j.next.Add(int64(j.grain))) - j.grain
		if lo >= j.n {
			return
		}
		j.fn(lo, min(lo+j.grain, j.n))
	}
}

// For calls fn on disjoint ranges covering [0, n), in parallel. Each range
// holds at most grain items (grain <= 0 picks n split evenly four ways per
// thread, for load balance). It returns when every call has returned.
func (p *Pool) For(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain <= 0 {
		grain = max(1, (n+4*p.threads-1)/(4*p.threads))
	}
	if p.threads == 1 || n <= grain {
		for lo := 0; lo < n; lo += grain {
			fn(lo, min(lo+grain, n))
		}
		return
	}
	j := &job{n: n, grain: grain, fn: fn}
	helpers := min(p.threads-1, (n+grain-1)/grain-1)
	j.wg.Add(helpers)
	for i := 0; i < helpers; i++ {
		p.work <- j
	}
	j.run()
	j.wg.Wait()
}

var (
	defaultOnce sync.Once
	defaultPool *Pool
)

// Default is a process-wide pool with GOMAXPROCS threads.
func Default() *Pool {
	defaultOnce.Do(func() { defaultPool = NewPool(0) })
	return defaultPool
}
