package download

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// State is where a job stands.
type State int

const (
	Starting    State = iota // checking an existing part, connecting
	Downloading              // receiving the body
	Verifying                // fsync, size, SHA-256 and GGUF checks
	Done                     // renamed to the final name
	Failed
	Canceled // the part is kept for resume
)

var stateNames = [...]string{"starting", "downloading", "verifying", "done", "failed", "canceled"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Final reports whether the job has ended.
func (s State) Final() bool { return s >= Done }

// Progress is a snapshot of a job.
type Progress struct {
	State State
	Done  int64 // bytes in the part file (after a restart this drops to 0)
	Total int64 // file size; -1 until known
	// Speed is bytes per second over the last SpeedWindow; bytes that were
	// already on disk when the job started do not count.
	Speed      float64
	ETA        time.Duration // -1 when unknown
	Reconnects int           // automatic resumes after network errors so far
	Err        error         // why the job failed or was cancelled (final snapshot only)
}

// Fraction is Done/Total in [0, 1], 0 while the total is unknown.
func (p Progress) Fraction() float64 {
	if p.Total <= 0 {
		return 0
	}
	return min(float64(p.Done)/float64(p.Total), 1)
}

// Result describes a finished download.
type Result struct {
	Path   string // destDir/fileName
	Size   int64
	SHA256 string // hex digest of the file
	Reused int64  // bytes of an earlier partial download that were kept
	// Fetched is the body bytes received by this job, restarts included.
	Fetched int64
}

// Job is one download. Its methods are safe for concurrent use.
type Job struct {
	m                           *Manager
	url, dir, name, final, part string
	want                        Expect

	// Set by prepare, then owned by the job's goroutine.
	ctx    context.Context
	cancel context.CancelCauseFunc
	meta   sidecar // the record of the part being written
	offset int64   // bytes of an existing part to continue from

	events chan Progress
	done   chan struct{}

	mu       sync.Mutex
	prog     Progress
	sent     Progress // the last event published
	rate     rate
	finished bool
	res      Result
	err      error
}

func newJob(m *Manager, rawURL, dir, name string, want Expect) *Job {
	final := filepath.Join(dir, name)
	return &Job{
		m: m, url: rawURL, dir: dir, name: name, final: final, part: final + partSuffix, want: want,
		events: make(chan Progress, 1),
		done:   make(chan struct{}),
		rate:   rate{window: m.opt.SpeedWindow},
	}
}

// Name is the final file name.
func (j *Job) Name() string { return j.name }

// Path is where the file will be once done.
func (j *Job) Path() string { return j.final }

// URL is the address being downloaded.
func (j *Job) URL() string { return j.url }

// Progress returns the current snapshot.
func (j *Job) Progress() Progress {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.prog
}

// Events delivers progress snapshots, at most one per ProgressInterval
// plus one per state change, and is closed after the final snapshot. It
// holds only the latest snapshot: a slow reader skips intermediate ones
// instead of slowing the download, and always gets the final one.
func (j *Job) Events() <-chan Progress { return j.events }

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Wait blocks until the job ends and returns its outcome.
func (j *Job) Wait() (Result, error) {
	<-j.done
	return j.res, j.err
}

// Cancel stops the download and keeps the part for resume; the job's error
// matches ErrCanceled. A job already verifying finishes regardless.
func (j *Job) Cancel() { j.cancel(ErrCanceled) }

// prepare runs in Start: it decides whether the existing part is continued
// and refuses early when the disk cannot hold the rest.
func (j *Job) prepare(ctx context.Context) error {
	if _, err := os.Lstat(j.final); err == nil {
		return fmt.Errorf("%s: %w; delete it to download it again", j.final, ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	j.meta = sidecar{URL: j.url}
	if st, err := os.Stat(j.part); err == nil && st.Mode().IsRegular() {
		if old, err := readSidecar(j.final + metaSuffix); err == nil && resumable(old, j.url, j.want, st.Size()) {
			j.offset, j.meta = st.Size(), *old
			// What the first Start expected still holds when this one
			// does not say.
			if j.want.Size == 0 {
				j.want.Size = old.ExpectSize
			}
			if j.want.SHA256 == "" {
				j.want.SHA256 = old.SHA256
			}
		}
	}
	j.meta.ExpectSize, j.meta.SHA256 = j.want.Size, j.want.SHA256
	j.meta.Size = max(j.meta.Size, j.want.Size)
	total := int64(-1)
	if j.meta.Size > 0 {
		total = j.meta.Size
		if err := j.checkSpace(total - j.offset); err != nil {
			return err
		}
	}
	j.prog = Progress{State: Starting, Done: j.offset, Total: total, ETA: -1}
	j.sent = j.prog
	j.ctx, j.cancel = context.WithCancelCause(ctx)
	return nil
}

// resumable reports whether a part of have bytes recorded by old may be
// continued for a download of url with the expectations want.
func resumable(old *sidecar, url string, want Expect, have int64) bool {
	switch {
	case have <= 0 || old.URL != url:
		return false
	case want.Size > 0 && old.Size > 0 && old.Size != want.Size,
		want.Size > 0 && old.ExpectSize > 0 && old.ExpectSize != want.Size,
		want.SHA256 != "" && old.SHA256 != "" && old.SHA256 != want.SHA256:
		return false // a different file is wanted now
	case old.Size > 0 && have > old.Size:
		return false
	}
	// The part's bytes and the server's must be proven to be one file: by a
	// validator the server checks (If-Range), or by a digest checked at the
	// end.
	return old.ifRange() != "" || old.SHA256 != "" || want.SHA256 != ""
}

func (j *Job) checkSpace(need int64) error {
	if need <= 0 {
		return nil
	}
	free, err := j.m.opt.FreeSpace(j.dir)
	if err != nil {
		return fmt.Errorf("check free space: %w", err)
	}
	if free >= 0 && free < need {
		return &DiskFullError{Dir: j.dir, Need: need, Free: free}
	}
	return nil
}

func (j *Job) run() {
	stop := make(chan struct{})
	go j.tick(stop)
	res, err := j.download()
	close(stop)
	j.finish(res, err)
}

// tick samples the speed and publishes progress at the configured pace.
func (j *Job) tick(stop <-chan struct{}) {
	tk := time.NewTicker(j.m.opt.ProgressInterval)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tk.C:
			j.mu.Lock()
			if !j.finished {
				if j.prog.State == Downloading {
					j.rate.add(now, j.prog.Done)
					j.prog.Speed = j.rate.speed()
					j.prog.ETA = -1
					if j.prog.Total >= 0 && j.prog.Speed > 0 {
						j.prog.ETA = time.Duration(float64(j.prog.Total-j.prog.Done) / j.prog.Speed * float64(time.Second)).Round(time.Second)
					}
				}
				if j.prog != j.sent {
					j.publishLocked()
				}
			}
			j.mu.Unlock()
		}
	}
}

// publishLocked replaces any unread event with the current snapshot. Only
// holders of j.mu send, so after making room the send cannot block.
func (j *Job) publishLocked() {
	p := j.prog
	j.sent = p
	select {
	case j.events <- p:
		return
	default:
	}
	select {
	case <-j.events:
	default:
	}
	j.events <- p
}

func (j *Job) setState(s State) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.prog.State = s
	if s == Downloading {
		j.rate.reset()
		j.rate.add(time.Now(), j.prog.Done)
	}
	j.publishLocked()
}

func (j *Job) setDone(done, total int64) {
	j.mu.Lock()
	if done < j.prog.Done {
		j.rate.reset() // a restart: the old samples would give a negative speed
	}
	j.prog.Done, j.prog.Total = done, total
	j.mu.Unlock()
}

func (j *Job) noteReconnect() {
	j.mu.Lock()
	j.prog.Reconnects++
	j.mu.Unlock()
}

// canceledErr is the job's error after its context ended.
func (j *Job) canceledErr(done, total int64) error {
	msg := "canceled before any byte was written"
	if done > 0 {
		msg = fmt.Sprintf("canceled at %s of %s; the partial download is kept for resume", human(done), human(total))
	}
	if cause := context.Cause(j.ctx); cause != ErrCanceled {
		return fmt.Errorf("%s: %w: %w", msg, ErrCanceled, cause)
	}
	return fmt.Errorf("%s: %w", msg, ErrCanceled)
}

func (j *Job) finish(res Result, err error) {
	state := Done
	if err != nil {
		state = Failed
		if errors.Is(err, ErrCanceled) {
			state = Canceled
		}
		if errors.Is(err, ErrCorrupt) {
			if rerr := removePart(j.final); rerr != nil {
				err = fmt.Errorf("%w (and deleting it failed: %v)", err, rerr)
			}
		}
		err = fmt.Errorf("download %s: %w", j.name, err)
	}
	// Released before Done closes, so Start may be called again right away.
	j.m.release(j)
	j.mu.Lock()
	j.finished = true
	j.res, j.err = res, err
	j.prog.State, j.prog.Err = state, err
	if state == Done {
		j.prog.Done, j.prog.Total, j.prog.ETA = res.Size, res.Size, 0
	}
	j.publishLocked()
	close(j.events)
	j.mu.Unlock()
	j.cancel(nil)
	close(j.done)
}
