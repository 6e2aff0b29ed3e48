package childproc

import (
	"context"
	"errors"
	"sync"
)

// Many runs n fresh children, spec(i) for i in [0, n), at most jobs at a
// time, each in its own process group, each bounded by its Spec.Timeout,
// all killed (their whole groups and every descendant, also those that
// changed group or session) when ctx ends or this process dies.
// done(i, res, err) is called once per started child as it ends, never
// concurrently with itself; err is a start failure. No child starts after
// ctx has ended. It returns how many children were started; it returns
// only after every started child has ended and been reported.
//
// spec is called in order of i, never concurrently with itself, just
// before child i would start (when a job is free); a Spec with Skip set
// starts nothing and is not reported. A child that could not be started
// counts as started and is reported with its error, except when ctx had
// ended (ErrNotStarted), which is neither.
func Many(ctx context.Context, n, jobs int, spec func(i int) Spec, done func(i int, res Result, err error)) (started int) {
	jobs = max(1, min(jobs, n))
	var (
		next     int
		nextMu   sync.Mutex
		reportMu sync.Mutex
		wg       sync.WaitGroup
	)
	// take is the next child to start, and its spec; false when there is
	// none (all taken, or ctx has ended).
	take := func() (int, Spec, bool) {
		nextMu.Lock()
		defer nextMu.Unlock()
		for next < n && ctx.Err() == nil {
			i := next
			next++
			if s := spec(i); !s.Skip {
				return i, s, true
			}
		}
		return 0, Spec{}, false
	}
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, s, ok := take()
				if !ok {
					return
				}
				res, err := Run(ctx, s)
				if errors.Is(err, ErrNotStarted) {
					return // ctx ended just before it started
				}
				reportMu.Lock()
				started++
				done(i, res, err)
				reportMu.Unlock()
			}
		}()
	}
	wg.Wait()
	return started
}
