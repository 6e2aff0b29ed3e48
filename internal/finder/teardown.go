package finder

import (
	"errors"
	"fmt"
	"time"

	"miotool/internal/handle"
	"miotool/internal/streams"
)

// TeardownWait is what the teardown after a find waits for: abandoned
// naive evaluations whose kernels still run. Closing the handle
// synchronizes their streams, as MIOpen's handle destructor does, so it
// lasts until they run out or the handle's close timeout.
type TeardownWait struct {
	// Draining is the number of abandoned evaluations still running when
	// the teardown began.
	Draining int
	// Waited is the time since the teardown began.
	Waited time.Duration
	// Left is how much longer the wait lasts at most: the handle's close
	// timeout, less Waited.
	Left time.Duration
	// SinceAbandoned is the time since the find abandoned its naive
	// evaluation (0 when unknown).
	SinceAbandoned time.Duration
}

func (w TeardownWait) String() string {
	what := "the abandoned naive evaluation"
	if w.Draining > 1 {
		what = fmt.Sprintf("%d abandoned naive evaluations", w.Draining)
	}
	return fmt.Sprintf("waiting for %s to run out (%s left at most)", what, w.Left.Round(time.Second))
}

// TeardownOptions configure Teardown.
type TeardownOptions struct {
	// Notice, when set, is told on the caller's goroutine when the
	// teardown has to wait for abandoned evaluations, at once and then
	// every Every while it waits.
	Notice func(TeardownWait)
	// Every is the period of the notices (a second when zero).
	Every time.Duration
	// Result is the find's result, for when it abandoned its naive
	// evaluation (optional).
	Result *Result
}

// TeardownReport is what the teardown did.
type TeardownReport struct {
	// Took is how long closing the handle and freeing the tensors took.
	Took time.Duration
	// Before and After are the tracker's counters around the teardown.
	Before, After streams.Counters
	// Notices is how many times Notice was called.
	Notices int
}

// Teardown closes h and then frees ts, after a find: what it waits for
// is the abandoned naive evaluation, which it does not shorten (the
// handle synchronizes its streams, as MIOpen's destructor does). It only
// says so, through opts.Notice. The find's Result is final before it:
// teardown changes none of it, so a command can print the verdict first
// and the teardown's figures after.
func Teardown(h *handle.Handle, ts *Tensors, opts TeardownOptions) (TeardownReport, error) {
	rep := TeardownReport{Before: h.Tracker().Counters()}
	every := opts.Every
	if every <= 0 {
		every = time.Second
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		var errs []error
		if err := h.Close(); err != nil {
			errs = append(errs, fmt.Errorf("handle teardown: %w", err))
		}
		if ts != nil {
			if err := ts.Free(); err != nil {
				errs = append(errs, fmt.Errorf("free the tensors: %w", err))
			}
		}
		done <- errors.Join(errs...)
	}()
	var tick <-chan time.Time
	notice := func() {
		waited := time.Since(start)
		w := TeardownWait{Draining: rep.Before.Draining, Waited: waited, Left: max(0, h.CloseTimeout()-waited)}
		if r := opts.Result; r != nil && r.NaiveAbandoned && !r.NaiveAbandonedAt.IsZero() {
			w.SinceAbandoned = time.Since(r.NaiveAbandonedAt)
		}
		rep.Notices++
		opts.Notice(w)
	}
	if opts.Notice != nil && rep.Before.Draining > 0 {
		notice()
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		select {
		case err := <-done:
			rep.Took = time.Since(start)
			rep.After = h.Tracker().Counters()
			return rep, err
		case <-tick:
			notice()
		}
	}
}
