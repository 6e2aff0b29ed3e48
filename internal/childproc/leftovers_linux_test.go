package childproc

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestOwnChildrenListsEveryChild holds the children files' look to the
// whole scan of /proc it replaces: children started from several threads
// and an orphan this process adopted as subreaper are all listed, and
// nothing else.
func TestOwnChildrenListsEveryChild(t *testing.T) {
	becomeSubreaper()
	var (
		mu   sync.Mutex
		want []int
		cmds []*exec.Cmd
		wg   sync.WaitGroup
	)
	t.Cleanup(func() {
		for _, pid := range want {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
		for _, pid := range want {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, 0, nil) // the adopted orphan
		}
	})
	// Three threads, each held until all have started their child: each
	// child's parent is a thread of its own.
	gate := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c := exec.Command("sleep", "60")
			err := c.Start()
			mu.Lock()
			if err == nil {
				want, cmds = append(want, c.Process.Pid), append(cmds, c)
			}
			mu.Unlock()
			wg.Done()
			<-gate
		}()
	}
	wg.Wait()
	close(gate)
	if len(want) != 3 {
		t.Fatalf("started %d of 3 children", len(want))
	}
	// An orphan: its parent shell exits at once and it comes back here.
	out, err := exec.Command("sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("the shell printed %q", out)
	}
	want = append(want, orphan)

	got, ok := ownChildren()
	if !ok {
		t.Skip("this kernel has no /proc/PID/task/TID/children")
	}
	var pids []int
	for _, p := range got {
		pids = append(pids, p.pid)
	}
	var scanned []int
	for _, p := range childrenOfByScan(os.Getpid()) {
		scanned = append(scanned, p.pid)
	}
	slices.Sort(pids)
	slices.Sort(scanned)
	for _, pid := range want {
		if !slices.Contains(pids, pid) {
			t.Errorf("child %d is not listed: the children files gave %v", pid, pids)
		}
	}
	if !slices.Equal(pids, scanned) {
		t.Errorf("the children files list %v, the scan of every process %v", pids, scanned)
	}
}
