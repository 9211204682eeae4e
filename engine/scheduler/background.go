package scheduler

import (
	"context"

	"nibble/engine"
	"nibble/engine/kvprobe"
)

// idleJob is background work on the loaded model that the owner runs one
// unit at a time, only while no request is running or waiting, so a reply
// never waits for more than one unit of it.
type idleJob struct {
	ctx   context.Context
	model *engine.Model // the model it was started on: it ends when that goes
	step  func() (done bool, err error)
	close func()
	end   chan error // gets the job's outcome once; buffered
}

// ProbeKV runs kvprobe.Choose on the loaded model in the background: one
// forward batch at a time, and only while no request runs or waits.
// progress, when set, is called on the owner goroutine after each batch
// with the batches done and in all (it must not block). ProbeKV returns
// when the probe ends, when ctx is cancelled (ctx's error), or when the
// model is unloaded or replaced (ErrUnloaded; ErrClosed on Close). path,
// when set, is the model file the caller means: if another one is loaded
// by the time the probe starts, it fails with ErrUnloaded instead of
// measuring that one. A Reconfigure does not stop it: the probe measures
// the model, not the sessions.
func (s *Scheduler) ProbeKV(ctx context.Context, path string, o kvprobe.ChoiceOptions, progress func(done, total int)) (*kvprobe.Choice, error) {
	var probe *kvprobe.Probe
	job := &idleJob{ctx: ctx, end: make(chan error, 1)}
	err := s.do(func() error {
		l := s.current()
		if l == nil {
			return ErrNoModel
		}
		if path != "" && l.info.Path != path {
			return ErrUnloaded
		}
		var err error
		if probe, err = kvprobe.New(l.m, s.b, o); err != nil {
			return err
		}
		job.model = l.m
		job.step = func() (bool, error) {
			done, err := probe.Step()
			if err == nil && progress != nil {
				progress(probe.Progress())
			}
			return done, err
		}
		job.close = probe.Close
		s.idle = append(s.idle, job)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := s.waitJob(job); err != nil {
		return nil, err
	}
	return probe.Result(), nil
}

// ReconfigureWhenIdle reconfigures the loaded model once no request is
// running or waiting, so no reply is cut short by it: adjust gets the model
// as it is then and returns the options to apply, or false to leave it as
// it is (then applied is false). It fails with ErrUnloaded when the model
// it was asked for has been unloaded or replaced by then; options that do
// not fit fail as Reconfigure's do, the old ones staying in force.
func (s *Scheduler) ReconfigureWhenIdle(ctx context.Context, adjust func(ModelInfo) (engine.Options, bool)) (ModelInfo, bool, error) {
	// The job writes its outcome here on the owner goroutine; they are read
	// only once the job has ended (job.end), never after a cancellation,
	// when the job may still be running.
	var (
		info    ModelInfo
		applied bool
	)
	job := &idleJob{ctx: ctx, end: make(chan error, 1), close: func() {}}
	err := s.do(func() error {
		l := s.current()
		if l == nil {
			return ErrNoModel
		}
		job.model = l.m
		job.step = func() (bool, error) {
			cur, _ := s.Info()
			o, ok := adjust(cur)
			if !ok {
				info = cur
				return true, nil
			}
			var err error
			info, err = s.reconfigure(o)
			applied = err == nil
			return true, err
		}
		s.idle = append(s.idle, job)
		return nil
	})
	if err != nil {
		return ModelInfo{}, false, err
	}
	ended, err := s.waitJob(job)
	if !ended {
		return ModelInfo{}, false, err
	}
	return info, applied, err
}

// waitJob waits for job's outcome (ended) or for its context or the
// scheduler's end (not ended: the job may still be running, so what it
// writes must not be read).
func (s *Scheduler) waitJob(job *idleJob) (ended bool, err error) {
	select {
	case err := <-job.end:
		return true, err
	case <-job.ctx.Done():
		s.nudge() // the owner drops it at its next look
		return false, job.ctx.Err()
	case <-s.done:
		return false, ErrClosed
	}
}

// stepIdle runs one unit of the first background job, and ends it when it
// is done, failed, cancelled or its model is gone.
func (s *Scheduler) stepIdle() {
	job := s.idle[0]
	var done bool
	var err error
	l := s.current()
	switch {
	case job.ctx.Err() != nil:
		err = job.ctx.Err()
	case l == nil || l.m != job.model:
		err = ErrUnloaded
	default:
		done, err = job.step()
	}
	// A step that unloads the model (a reconfigure whose fallback fails)
	// has already ended every job through endIdle, this one included.
	if (done || err != nil) && len(s.idle) > 0 && s.idle[0] == job {
		s.idle = s.idle[1:]
		job.close()
		job.end <- err
	}
}

// endIdle ends every background job with reason (an unload).
func (s *Scheduler) endIdle(reason error) {
	for _, job := range s.idle {
		job.close()
		job.end <- reason
	}
	s.idle = nil
}
