package fdeep

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"miotool/internal/aiheur/fdeep/fdeeptest"
)

const releasedChildEnv = "MIOTOOL_FDEEP_TEST_PREDICT_AFTER_RELEASE"

// Predict on a released model reads unmapped memory: the process must die
// with the Go runtime's fault, which is the use-after-free the pre-fix
// cache reproduces. The read happens in a child process.
func TestPredictAfterReleaseFaults(t *testing.T) {
	if os.Getenv(releasedChildEnv) == "1" {
		m, err := Load(fdeeptest.MLP([]int{16, 64, 4}, 3), "released.model", Options{})
		if err != nil {
			t.Fatal(err)
		}
		m.Release()
		_, _ = m.Predict(make([]float32, 16))
		t.Log("PREDICT-AFTER-RELEASE-SURVIVED")
		return
	}
	if !WeightsUnmapOnRelease() {
		t.Skip("weights are not mapped on this platform; Release cannot make reads fault")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestPredictAfterReleaseFaults$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), releasedChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	text := string(out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child did not fail (err %v); output:\n%s", err, tail(text))
	}
	if !strings.Contains(text, "unexpected fault address") {
		t.Fatalf("child failed without the runtime's fault report (%v); output:\n%s", err, tail(text))
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}
