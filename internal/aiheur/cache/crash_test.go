package cache

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"miotool/internal/aiheur/fdeep"
	"miotool/internal/aiheur/fdeep/fdeeptest"
)

const crashChildEnv = "MIOTOOL_CACHE_TEST_HAMMER_UNLOCKED"

// crashSignatures are the ways the pre-fix cache takes a Go process down:
// a read of a released model's unmapped weights, or the runtime catching
// the unsynchronised map.
var crashSignatures = []string{
	"unexpected fault address",
	"signal SIGSEGV",
	"concurrent map writes",
	"concurrent map read and map write",
}

// The pre-fix cache crashes for real. A child process (this test binary,
// re-executed) hammers fresh unlocked caches from several goroutines, the
// way the PyTorch test hammers MIOpen: all start together, miss the same
// key, load, and run inference with what they got. The parent asserts the
// child died by a signal or with one of the runtime's fatal errors.
func TestUnlockedCacheCrashesForReal(t *testing.T) {
	if os.Getenv(crashChildEnv) == "1" {
		hammerUnlocked(t)
		return
	}
	if raceEnabled {
		t.Skip("the unlocked cache is racy by design; run without -race")
	}
	if !fdeep.WeightsUnmapOnRelease() {
		t.Skip("released weights are not unmapped on this platform")
	}
	const attempts = 3
	for attempt := 1; attempt <= attempts; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestUnlockedCacheCrashesForReal$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), crashChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		cancel()
		text := string(out)
		if err == nil {
			t.Logf("attempt %d: child survived: %s", attempt, lastLine(text, "NO-CRASH"))
			continue
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("attempt %d: running the child: %v", attempt, err)
		}
		for _, sig := range crashSignatures {
			if strings.Contains(text, sig) {
				t.Logf("attempt %d: child crashed as expected (%v): %q", attempt, exit, sig)
				return
			}
		}
		if strings.HasPrefix(exit.ProcessState.String(), "signal:") {
			t.Logf("attempt %d: child killed by %v", attempt, exit.ProcessState)
			return
		}
		t.Fatalf("attempt %d: child failed without a crash signature (%v):\n%s", attempt, err, tailText(text))
	}
	t.Skipf("the unlocked cache did not crash in %d attempts (timing-dependent; not a failure)", attempts)
}

// hammerUnlocked runs rounds until the process dies or a time budget ends.
func hammerUnlocked(t *testing.T) {
	rounds, replaced := hammer(t, Unlocked, 10*time.Second, 1<<30)
	t.Logf("NO-CRASH after %d rounds (%d models replaced while in use)", rounds, replaced)
}

// The same hammering against the fixed caches, in this process: every
// round loads the model once and nothing is replaced or released.
func TestFixedCachesSurviveHammer(t *testing.T) {
	want := 5
	if raceEnabled { // the race detector makes inference ~20x slower
		want = 2
	}
	for _, p := range []Policy{Locked, LockFree} {
		rounds, replaced := hammer(t, p, 30*time.Second, want)
		if rounds != want || replaced != 0 {
			t.Errorf("%s: %d rounds, %d replaced; want %d rounds, none replaced", p, rounds, replaced, want)
		}
	}
}

// hammer runs rounds of: a fresh cache, goroutines released together that
// all Get the same key and then predict with the model they got. It returns
// the rounds run and the models replaced.
func hammer(t *testing.T, p Policy, budget time.Duration, maxRounds int) (rounds int, replaced uint64) {
	const (
		goroutines = 8
		predicts   = 400
	)
	data := fdeeptest.MLP([]int{18, 256, 256, 21}, 11)
	key := FileKey{Path: "synthetic.tn.model", Key: "tunanet"}
	load := func() (*fdeep.Model, error) { return fdeep.Load(data, key.Path, fdeep.Options{}) }
	deadline := time.Now().Add(budget)
	for rounds < maxRounds && time.Now().Before(deadline) {
		rounds++
		c, err := New[FileKey, *fdeep.Model](p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				m, err := c.Get(key, load)
				if err != nil {
					t.Error(err)
					return
				}
				in, out := make([]float32, 18), [][]float32{make([]float32, 21)}
				for i := 0; i < predicts; i++ {
					in[i%18] = float32(i)
					if err := m.PredictInto(out, in); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		s := c.Stats()
		replaced += s.Replaced
		if p != Unlocked && s.Loads != 1 {
			t.Errorf("%s round %d: %d loads, want 1", p, rounds, s.Loads)
		}
	}
	return rounds, replaced
}

func lastLine(text, marker string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, marker) {
			return strings.TrimSpace(line)
		}
	}
	return "(no summary line)"
}

func tailText(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}
