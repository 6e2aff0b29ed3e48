//go:build linux

package childproc

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

func TestMany(t *testing.T) {
	missing := Spec{Path: "/nonexistent/program"}
	for _, tt := range []struct {
		name    string
		n, jobs int
		spec    func(i int) Spec
		// cancelAt cancels the context once this many children have
		// started (0: never).
		cancelAt    int
		wantStarted int
		wantFailed  []int // the children reported with a start error
		wantKilled  bool  // the children reported were killed by the cancel
	}{
		{"all of them, two at a time", 5, 2, func(int) Spec { return fake("result") }, 0, 5, nil, false},
		{"more jobs than children", 2, 8, func(int) Spec { return fake("result") }, 0, 2, nil, false},
		{"none", 0, 2, func(int) Spec { return fake("result") }, 0, 0, nil, false},
		{"skipped from the third", 6, 2, func(i int) Spec { s := fake("result"); s.Skip = i >= 2; return s }, 0, 2, nil, false},
		{"one cannot start", 3, 1, func(i int) Spec {
			if i == 1 {
				return missing
			}
			return fake("result")
		}, 0, 3, []int{1}, false},
		{"canceled once two run", 6, 2, func(int) Spec { return fake("hang") }, 2, 2, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var (
				mu             sync.Mutex
				running, most  int
				startedSoFar   int
				inDone         atomic.Bool
				reported       []int
				failed, killed []int
				pids           []int
			)
			spec := func(i int) Spec {
				s := tt.spec(i)
				s.Started = func(pid int) {
					killAtCleanup(t, pid)
					mu.Lock()
					defer mu.Unlock()
					pids = append(pids, pid)
					running++
					most = max(most, running)
					if startedSoFar++; startedSoFar == tt.cancelAt {
						cancel()
					}
				}
				return s
			}
			started := Many(ctx, tt.n, tt.jobs, spec, func(i int, res Result, err error) {
				if inDone.Swap(true) {
					t.Errorf("done called concurrently with itself (child %d)", i)
				}
				defer inDone.Store(false)
				mu.Lock()
				defer mu.Unlock()
				reported = append(reported, i)
				var se *StartError
				switch {
				case errors.As(err, &se):
					failed = append(failed, i)
					return
				case err != nil:
					t.Errorf("child %d: %v", i, err)
				case res.Canceled:
					killed = append(killed, i)
				case res.ExitCode() != 0:
					t.Errorf("child %d: %s", i, res.ExitText())
				}
				running--
			})
			slices.Sort(reported)
			if started != tt.wantStarted || len(reported) != started || len(slices.Compact(slices.Clone(reported))) != started {
				t.Fatalf("started %d, reported %v; want %d started, each reported once", started, reported, tt.wantStarted)
			}
			if most > tt.jobs {
				t.Errorf("%d ran at once, more than the %d jobs", most, tt.jobs)
			}
			if !slices.Equal(failed, tt.wantFailed) {
				t.Errorf("start failures %v, want %v", failed, tt.wantFailed)
			}
			if tt.wantKilled && (len(killed) != started || started == 0) || !tt.wantKilled && len(killed) != 0 {
				t.Errorf("killed by the cancel %v of %d", killed, started)
			}
			for _, pid := range pids {
				wantGone(t, pid, 0)
			}
		})
	}
}
