package download

import (
	"errors"
	"fmt"
	"net/http"
)

// DiskFullError says the destination cannot hold the rest of the file. It
// matches ErrDiskFull.
type DiskFullError struct {
	Dir  string
	Need int64 // bytes still to download
	Free int64 // bytes available, -1 when unknown
	Err  error // the failed write; nil when refused before writing
}

func (e *DiskFullError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("not enough disk space in %s: need %s, %s free", e.Dir, human(e.Need), human(e.Free))
	}
	return fmt.Sprintf("disk full in %s (%v): %s more is needed; the partial download is kept, free some space and resume", e.Dir, e.Err, human(e.Need))
}

func (e *DiskFullError) Is(target error) bool { return target == ErrDiskFull }
func (e *DiskFullError) Unwrap() error        { return e.Err }

// CorruptError says the downloaded bytes are not the file wanted; the part
// has been deleted. It matches ErrCorrupt.
type CorruptError struct {
	Reason string
	Err    error // the GGUF parse error, if that was the reason
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("rejected: %s; the download was deleted", e.Reason)
}

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }
func (e *CorruptError) Unwrap() error        { return e.Err }

// StatusError is an HTTP answer other than the file.
type StatusError struct {
	URL    string
	Status string
	Code   int
}

func (e *StatusError) Error() string { return fmt.Sprintf("GET %s: %s", e.URL, e.Status) }

// retryable marks an error a reconnect may cure: a dropped connection, a
// stall, a short body, a busy server.
type retryable struct{ err error }

func (e retryable) Error() string { return e.err.Error() }
func (e retryable) Unwrap() error { return e.err }

func isRetryable(err error) bool {
	var r retryable
	return errors.As(err, &r)
}

// statusRetryable reports the HTTP answers that say "try again later".
func statusRetryable(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout
}

// errRestart asks the attempt loop to start over from byte 0 at once: the
// server's file is not the one the part holds.
var errRestart = errors.New("file changed on the server")

// errStalled is the cause of an attempt cancelled by the stall watchdog.
var errStalled = errors.New("stalled")
