// Package download fetches GGUF model files for the model picker. A file is
// written to NAME.part in the destination folder next to a small sidecar
// (NAME.part.json) that records where it comes from, so an interrupted or
// cancelled download continues with an HTTP Range request, but only of the
// same file. When the body is complete the part is fsync'd, its size and
// SHA-256 checked and its GGUF header parsed, and only then is it renamed to
// NAME: a truncated or corrupt download never appears under the final name.
package download

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults for the zero fields of Options.
const (
	DefaultRetries          = 5
	DefaultRetryDelay       = time.Second
	DefaultStallTimeout     = 60 * time.Second
	DefaultProgressInterval = 100 * time.Millisecond // at most 10 events a second
	DefaultSpeedWindow      = 5 * time.Second
)

const (
	partSuffix = ".part"
	metaSuffix = ".part.json"
	// maxNameBytes keeps NAME.part.json, with 4 bytes to spare, within the
	// 255-byte file name limit of APFS and ext4.
	maxNameBytes = 255 - len(metaSuffix) - 4
)

// Sentinel errors, for errors.Is on what Start, Wait and Discard return.
var (
	ErrBusy     = errors.New("already being downloaded")
	ErrExists   = errors.New("file already exists")
	ErrDiskFull = errors.New("disk full")
	ErrCorrupt  = errors.New("corrupt download")
	ErrCanceled = errors.New("download canceled")
)

// Expect is what the caller knows about the file in advance (from the
// catalog); zero fields are not checked.
type Expect struct {
	Size   int64  // exact size in bytes
	SHA256 string // hex digest
}

// Options tune a Manager; the zero value is ready to use.
type Options struct {
	// Client makes the requests; nil means http.DefaultClient. Leave its
	// Timeout zero: a multi-GB body outlasts any fixed deadline, so a dead
	// connection is caught by StallTimeout instead.
	Client *http.Client
	// FreeSpace reports the bytes available to new files in dir, or -1 when
	// it cannot tell; nil means the file system's figure. Tests inject a
	// full disk here.
	FreeSpace func(dir string) (int64, error)
	// WrapWriter, when set, wraps the writer of each part file. Tests use it
	// to fail a write the way a full disk does.
	WrapWriter func(w io.Writer) io.Writer
	// Retries is how many times in a row a job reconnects after a network
	// error, a stall or a 5xx answer before it gives up; a reconnect that
	// makes progress starts the count again. 0 means DefaultRetries,
	// negative means never.
	Retries int
	// RetryDelay is the wait before the first reconnect, doubled for each
	// further one (at most 30 s); 0 means DefaultRetryDelay.
	RetryDelay time.Duration
	// StallTimeout ends an attempt that receives nothing for this long; 0
	// means DefaultStallTimeout.
	StallTimeout time.Duration
	// ProgressInterval is the spacing of progress events; 0 means
	// DefaultProgressInterval.
	ProgressInterval time.Duration
	// SpeedWindow is the span the reported speed is averaged over; 0 means
	// DefaultSpeedWindow.
	SpeedWindow time.Duration
}

// Manager runs downloads, at most one per destination file. It is safe for
// concurrent use.
type Manager struct {
	opt    Options
	mu     sync.Mutex
	active map[string]*Job // by final path
}

// NewManager returns a Manager with opt's zero fields set to the defaults.
func NewManager(opt Options) *Manager {
	if opt.Client == nil {
		opt.Client = http.DefaultClient
	}
	if opt.FreeSpace == nil {
		opt.FreeSpace = freeSpace
	}
	if opt.Retries == 0 {
		opt.Retries = DefaultRetries
	}
	opt.Retries = max(opt.Retries, 0)
	if opt.RetryDelay <= 0 {
		opt.RetryDelay = DefaultRetryDelay
	}
	if opt.StallTimeout <= 0 {
		opt.StallTimeout = DefaultStallTimeout
	}
	if opt.ProgressInterval <= 0 {
		opt.ProgressInterval = DefaultProgressInterval
	}
	if opt.SpeedWindow <= 0 {
		opt.SpeedWindow = DefaultSpeedWindow
	}
	return &Manager{opt: opt, active: map[string]*Job{}}
}

// Start downloads rawURL to destDir/fileName (a .gguf name, created with
// its folder when missing) in the background. A resumable part of the same
// file is continued; any other part is replaced. ctx bounds the whole
// download: pass a long-lived context and use Job.Cancel to stop it. Start
// itself fails on bad arguments, when the file exists or is being
// downloaded, and when the size is known and the disk cannot hold it.
func (m *Manager) Start(ctx context.Context, rawURL, destDir, fileName string, want Expect) (*Job, error) {
	if err := checkArgs(rawURL, destDir, fileName, &want); err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	if err := os.MkdirAll(destDir, 0o755); err != nil {
		return nil, fmt.Errorf("download %s: %w", fileName, err)
	}
	j := newJob(m, rawURL, destDir, fileName, want)
	m.mu.Lock()
	if m.active[j.final] != nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("download %s: %w in %s", fileName, ErrBusy, destDir)
	}
	m.active[j.final] = j
	m.mu.Unlock()
	if err := j.prepare(ctx); err != nil {
		m.release(j)
		return nil, fmt.Errorf("download %s: %w", fileName, err)
	}
	go j.run()
	return j, nil
}

// Resume continues the partial download of fileName in destDir from the
// URL and expectations its sidecar recorded.
func (m *Manager) Resume(ctx context.Context, destDir, fileName string) (*Job, error) {
	if err := checkName(fileName); err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	meta, err := readSidecar(filepath.Join(destDir, fileName+metaSuffix))
	if err != nil {
		return nil, fmt.Errorf("download %s: nothing to resume: %w", fileName, err)
	}
	return m.Start(ctx, meta.URL, destDir, fileName, Expect{Size: meta.ExpectSize, SHA256: meta.SHA256})
}

// Discard deletes the partial download of fileName in destDir (the part and
// its sidecar). It refuses while the file is being downloaded.
func (m *Manager) Discard(destDir, fileName string) error {
	if err := checkName(fileName); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	final := filepath.Join(destDir, fileName)
	m.mu.Lock()
	defer m.mu.Unlock() // held so a Start cannot begin writing the part meanwhile
	if m.active[final] != nil {
		return fmt.Errorf("discard %s: %w; cancel it first", fileName, ErrBusy)
	}
	return removePart(final)
}

// Jobs lists the downloads in progress, by file name.
func (m *Manager) Jobs() []*Job {
	m.mu.Lock()
	js := make([]*Job, 0, len(m.active))
	for _, j := range m.active {
		js = append(js, j)
	}
	m.mu.Unlock()
	slices.SortFunc(js, func(a, b *Job) int { return strings.Compare(a.final, b.final) })
	return js
}

func (m *Manager) release(j *Job) {
	m.mu.Lock()
	if m.active[j.final] == j {
		delete(m.active, j.final)
	}
	m.mu.Unlock()
}

// removePart deletes final's part and sidecar; missing ones are fine.
func removePart(final string) error {
	var errs []error
	for _, p := range []string{final + partSuffix, final + metaSuffix} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkArgs(rawURL, destDir, fileName string, want *Expect) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("bad URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("bad URL %q: want http:// or https:// with a host", rawURL)
	}
	if destDir == "" {
		return errors.New("no destination folder given")
	}
	if err := checkName(fileName); err != nil {
		return err
	}
	if want.Size < 0 {
		return fmt.Errorf("%s: expected size %d is negative", fileName, want.Size)
	}
	want.SHA256 = strings.ToLower(strings.TrimSpace(want.SHA256))
	if want.SHA256 != "" {
		if b, err := hex.DecodeString(want.SHA256); err != nil || len(b) != 32 {
			return fmt.Errorf("%s: expected SHA-256 %q is not 64 hex digits", fileName, want.SHA256)
		}
	}
	return nil
}

// checkName accepts a plain .gguf file name: no folders, so a catalog entry
// cannot write outside the models folder.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("no file name given")
	case strings.ContainsAny(name, `/\:`) || strings.ContainsRune(name, 0) || name != filepath.Base(name):
		return fmt.Errorf("file name %q must not contain a folder", name)
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("file name %q must not start with a dot", name)
	case !strings.EqualFold(filepath.Ext(name), ".gguf"):
		return fmt.Errorf("file name %q must end in .gguf", name)
	case len(name) > maxNameBytes:
		return fmt.Errorf("file name %q is longer than %d bytes", name, maxNameBytes)
	}
	return nil
}

// human formats a byte count for messages, in binary units as the rest of
// Nibble does.
func human(n int64) string {
	switch {
	case n < 0:
		return "an unknown amount"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}
