// Package parallel runs data-parallel loops on a fixed set of worker
// goroutines. A decode step issues over a hundred small parallel loops, so
// workers are persistent, spin briefly between loops (a futex wake-up costs
// tens of microseconds, a sizeable share of a 1 ms matmul) and only then
// park; chunks are claimed with an atomic counter.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// spinFor is how long an idle worker polls for the next loop before parking.
const spinFor = 200 * time.Microsecond

// Pool is a set of Threads workers (the calling goroutine is one of them).
type Pool struct {
	threads  int
	gen      atomic.Uint64 // bumped for every published job
	cur      atomic.Pointer[job]
	closed   atomic.Bool
	sleeping atomic.Int32
	mu       sync.Mutex
	wake     *sync.Cond
}

type job struct {
	n, grain int
	next     atomic.Int64 // next unclaimed index
	done     atomic.Int64 // indices finished
	fn       func(lo, hi int)
}

// NewPool starts threads-1 workers; threads <= 0 means GOMAXPROCS.
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads}
	p.wake = sync.NewCond(&p.mu)
	for i := 1; i < threads; i++ {
		go p.worker()
	}
	return p
}

// Threads is the number of goroutines that execute a loop.
func (p *Pool) Threads() int { return p.threads }

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	p.closed.Store(true)
	p.gen.Add(1)
	p.mu.Lock()
	p.wake.Broadcast()
	p.mu.Unlock()
}

func (p *Pool) worker() {
	var seen uint64
	for {
		seen = p.await(seen)
		if p.closed.Load() {
			return
		}
		if j := p.cur.Load(); j != nil {
			j.run()
		}
	}
}

// await returns the generation after seen, spinning first, then parking.
func (p *Pool) await(seen uint64) uint64 {
	deadline := time.Now().Add(spinFor)
	for i := 0; ; i++ {
		if g := p.gen.Load(); g != seen {
			return g
		}
		if i&255 == 255 {
			if time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// sleeping is raised before re-checking gen, and For bumps gen before
	// reading sleeping, so a wake-up cannot be lost.
	p.sleeping.Add(1)
	defer p.sleeping.Add(-1)
	for {
		if g := p.gen.Load(); g != seen {
			return g
		}
		p.wake.Wait()
	}
}

func (j *job) run() {
	for {
		lo := int(j.next.Add(int64(j.grain))) - j.grain
		if lo >= j.n {
			return
		}
		hi := min(lo+j.grain, j.n)
		j.fn(lo, hi)
		j.done.Add(int64(hi - lo))
	}
}

// For calls fn on disjoint ranges covering [0, n), in parallel. Each range
// holds at most grain items (grain <= 0 splits n four ways per thread, for
// load balance). It returns when every call has returned. Concurrent and
// nested calls are safe: each caller finishes any chunk of its own loop that
// no worker took.
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
	p.cur.Store(j)
	p.gen.Add(1)
	if p.sleeping.Load() > 0 {
		p.mu.Lock()
		p.wake.Broadcast()
		p.mu.Unlock()
	}
	j.run()
	for i := 0; j.done.Load() < int64(n); i++ {
		if i&63 == 63 {
			runtime.Gosched()
		}
	}
	// Let go of the finished loop, so that fn and what it captured (a
	// tensor being written, a model's state) are not kept until the next.
	p.cur.CompareAndSwap(j, nil)
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
