package guard

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// sleeperEnv makes this test binary, re-executed, a child that sleeps.
const sleeperEnv = "SELFTEST_SLEEPER"

func TestMain(m *testing.M) {
	if os.Getenv(sleeperEnv) == "1" {
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestClamp(t *testing.T) {
	for _, tt := range []struct{ x, want int }{{-5, 0}, {0, 0}, {3, 3}, {10, 10}, {11, 10}} {
		if got := Clamp(tt.x, 0, 10); got != tt.want {
			t.Errorf("Clamp(%d, 0, 10) = %d, want %d", tt.x, got, tt.want)
		}
	}
}

func TestSum(t *testing.T) {
	if got := Sum([]int{1, 2, 3}); got != 6 {
		t.Fatalf("Sum = %d, want 6", got)
	}
}

// TestChild starts a child and, as every test that starts one must, kills
// it in t.Cleanup by the process it holds.
func TestChild(t *testing.T) {
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), sleeperEnv+"=1")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	if child.Process.Pid <= 0 {
		t.Fatalf("pid %d", child.Process.Pid)
	}
}
