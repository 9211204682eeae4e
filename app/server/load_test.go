package server

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"nibble/engine/scheduler"
)

// 200 requests, 8 at a time, through 2 slots and the queue: no errors, and
// afterwards no more goroutines or heap than before (within slack).
func TestLoad(t *testing.T) {
	const total, concurrency = 200, 8
	sched := loadScheduler(t, scheduler.Config{Slots: 2, QueueLimit: 16})
	srv, ts := serve(t, sched, Config{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}
	send := func(i int) error {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Question %d"}],"max_tokens":4,"stream":%v}`, i, i%2 == 0)
		path := "/v1/chat/completions"
		if i%4 == 1 {
			path, body = "/v1/completions", fmt.Sprintf(`{"prompt":"Question %d","max_tokens":4}`, i)
		}
		res, err := client.Post(ts.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		switch {
		case err != nil:
			return err
		case res.StatusCode != 200:
			return fmt.Errorf("status %d: %s", res.StatusCode, b)
		case i%2 == 0 && !strings.HasSuffix(string(b), "data: [DONE]\n\n"):
			return fmt.Errorf("stream without [DONE]: %s", b)
		}
		return nil
	}
	// Warm up (first session, connection pool, lazily made buffers), then
	// take the baseline.
	var warm sync.WaitGroup
	for i := range 2 * concurrency { // enough overlap for the second slot's session
		warm.Add(1)
		go func() {
			defer warm.Done()
			if err := send(i); err != nil {
				t.Error(err)
			}
		}()
	}
	warm.Wait()
	goroutinesBefore, heapBefore := settle(client)
	backendBefore := sched.AllocatedBytes()

	start := time.Now()
	var next, failures atomic.Int64
	var firstErr sync.Once
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				if err := send(int(i)); err != nil {
					failures.Add(1)
					firstErr.Do(func() { t.Errorf("request %d: %v", i, err) })
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	goroutinesAfter, heapAfter := settle(client)
	backendAfter := sched.AllocatedBytes()
	st := srv.Stats()
	t.Logf("%d requests, %d concurrent, in %s (%.0f req/s): %d errors; goroutines %d before, %d after; heap after GC %.1f MiB before, %.1f MiB after; backend %.1f MiB before, %.1f MiB after; stats %+v",
		total, concurrency, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), failures.Load(),
		goroutinesBefore, goroutinesAfter, float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20),
		float64(backendBefore)/(1<<20), float64(backendAfter)/(1<<20), st)
	if failures.Load() != 0 || st.Completed != total+2*concurrency || st.Rejected != 0 || st.Active != 0 {
		t.Fatalf("errors: %d, stats %+v", failures.Load(), st)
	}
	if goroutinesAfter > goroutinesBefore+2 {
		t.Errorf("goroutines grew from %d to %d", goroutinesBefore, goroutinesAfter)
	}
	if backendAfter != backendBefore {
		t.Errorf("the backend's allocations went from %d to %d bytes", backendBefore, backendAfter)
	}
	if heapAfter > heapBefore+4<<20 {
		t.Errorf("heap grew from %d to %d bytes", heapBefore, heapAfter)
	}
}

// settle waits for connection and mailbox goroutines to finish, then
// returns the goroutine count and the live heap after a GC.
func settle(client *http.Client) (goroutines int, heap uint64) {
	client.CloseIdleConnections()
	prev, stable := -1, 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && stable < 5; {
		time.Sleep(20 * time.Millisecond)
		if n := runtime.NumGoroutine(); n == prev {
			stable++
		} else {
			prev, stable = n, 0
		}
	}
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return runtime.NumGoroutine(), ms.HeapAlloc
}
