package service

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"nibble/app/download"
)

// progressInterval spaces download:progress events: five a second, plus
// one at every change of state.
const progressInterval = 200 * time.Millisecond

// dlRecord is one download of this run.
type dlRecord struct {
	d   Download
	job *download.Job // nil once it ended, or when it never started
}

func downloadKey(id, quant string) string { return id + "/" + quant }

var stateNames = map[download.State]string{
	download.Starting: "starting", download.Downloading: "downloading", download.Verifying: "verifying",
	download.Done: "done", download.Failed: "failed", download.Canceled: "cancelled",
}

// download starts downloading a catalog file into the models folder, or
// resumes its partial download; progress arrives as EventDownload events,
// and EventModels follows when the file is in place. The file is checked
// against the catalog's size and SHA-256 and its GGUF header before it
// gets its name, so a damaged download is never listed. A file already
// downloaded is reported done; a download already running is reported as
// it stands.
func (c *catalogBrowser) download(id, quant string) (Download, error) {
	m, f, err := catalogFile(id, quant)
	if err != nil {
		return Download{}, err
	}
	rawURL, name := f.URL(), f.FileName()
	if rawURL == "" || name == "" {
		return Download{}, fmt.Errorf("%s %s has no download address (the catalog lists it for sizing only)", m.Name, f.Quant)
	}
	key := downloadKey(m.ID, f.Quant)
	d := Download{Key: key, ID: m.ID, Quant: f.Quant, FileName: name, State: "starting", Total: -1, ETASec: -1}
	c.mu.Lock()
	if r := c.downloads[key]; r != nil && r.job != nil {
		cur := r.d
		c.mu.Unlock()
		return cur, nil
	}
	final := filepath.Join(c.dirs.Models, name)
	if st, err := os.Stat(final); err == nil && st.Mode().IsRegular() {
		d.State, d.Done, d.Total, d.ETASec, d.Path = "done", st.Size(), st.Size(), 0, final
		c.downloads[key] = &dlRecord{d: d}
		c.mu.Unlock()
		return d, nil
	}
	want := download.Expect{SHA256: f.SHA256}
	if !f.SizeApprox {
		want.Size = f.SizeBytes
	}
	job, err := c.dl.Start(c.ctx, rawURL, c.dirs.Models, name, want)
	if err != nil {
		d.State, d.Error = "failed", downloadError(err)
		c.downloads[key] = &dlRecord{d: d}
		c.mu.Unlock()
		c.emit(EventDownload, d)
		return d, errors.New(d.Error)
	}
	r := &dlRecord{d: d, job: job}
	c.downloads[key] = r
	c.wg.Add(1)
	c.mu.Unlock()
	c.emit(EventDownload, d)
	go func() {
		defer c.wg.Done()
		c.follow(r, job)
	}()
	return d, nil
}

// follow reports one download's progress until it ends.
func (c *catalogBrowser) follow(r *dlRecord, job *download.Job) {
	for p := range job.Events() {
		if p.State.Final() {
			break // reported below, with the result
		}
		c.emit(EventDownload, c.updateDownload(r, p, nil))
	}
	res, err := job.Wait()
	d := c.updateDownload(r, job.Progress(), err)
	if err == nil {
		c.mu.Lock()
		r.d.Path, r.d.Done, r.d.Total, r.d.ETASec = res.Path, res.Size, res.Size, 0
		d = r.d
		c.mu.Unlock()
	}
	c.emit(EventDownload, d)
	if err == nil {
		c.files.changed()
	}
}

// updateDownload records a snapshot (with the job's error once it ended)
// and returns the new state.
func (c *catalogBrowser) updateDownload(r *dlRecord, p download.Progress, err error) Download {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.d.State = stateNames[p.State]
	r.d.Done, r.d.Total, r.d.Speed = p.Done, p.Total, p.Speed
	r.d.ETASec = -1
	if p.ETA >= 0 {
		r.d.ETASec = p.ETA.Seconds()
	}
	if p.State.Final() {
		r.job = nil
		r.d.Speed = 0
		switch {
		case err == nil:
		case errors.Is(err, download.ErrCanceled):
			r.d.State, r.d.Error = "cancelled", ""
		default:
			r.d.State, r.d.Error = "failed", downloadError(err)
		}
	}
	return r.d
}

// cancelDownload stops a running download; what it fetched stays for a
// resume (Download again continues it).
func (c *catalogBrowser) cancelDownload(id, quant string) {
	c.mu.Lock()
	var job *download.Job
	for k, r := range c.downloads {
		if strings.EqualFold(k, downloadKey(id, quant)) && r.job != nil {
			job = r.job
		}
	}
	c.mu.Unlock()
	if job != nil {
		job.Cancel()
	}
}

// downloadList is this run's downloads, running and ended, by key.
func (c *catalogBrowser) downloadList() []Download {
	c.mu.Lock()
	out := make([]Download, 0, len(c.downloads))
	for _, r := range c.downloads {
		out = append(out, r.d)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Download) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// close cancels the running downloads (their parts stay for a
// resume at the next run) and waits for them to stop.
func (c *catalogBrowser) close() {
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a verification of a large file finishes on its own
	}
}

// downloadError says what went wrong in the user's words.
func downloadError(err error) string {
	var (
		full    *download.DiskFullError
		corrupt *download.CorruptError
		status  *download.StatusError
		uerr    *url.Error
	)
	switch {
	case errors.As(err, &full):
		if full.Err == nil && full.Free >= 0 {
			return fmt.Sprintf("the disk is full: %s free, %s needed", mib(full.Free), mib(full.Need))
		}
		need := "more space is needed"
		if full.Need >= 0 {
			need = mib(full.Need) + " more is needed"
		}
		return fmt.Sprintf("the disk is full: %s; what was downloaded is kept, so free some space and download again to resume", need)
	case errors.As(err, &corrupt):
		r := corrupt.Reason
		switch {
		case strings.Contains(r, "SHA-256"):
			return "corrupted download: sha256 mismatch, file removed"
		case corrupt.Err != nil:
			return "corrupted download: not a valid GGUF file, file removed"
		}
		return "corrupted download: " + r + ", file removed"
	case errors.As(err, &status):
		return fmt.Sprintf("the server refused the download: %s (%s)", status.Status, status.URL)
	case errors.Is(err, download.ErrExists):
		return "the file is already in the models folder"
	case errors.Is(err, download.ErrBusy):
		return "this file is already being downloaded"
	case errors.As(err, &uerr):
		msg := "network error: " + uerr.Err.Error()
		if strings.Contains(err.Error(), "partial download is kept") {
			msg += "; what was downloaded is kept, so download again to resume"
		}
		return msg
	}
	return err.Error()
}

// mib is a byte count in MiB, one decimal.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
