package tracetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Limit bounds every wait of the trace tests: wide for a loaded machine.
const Limit = 60 * time.Second

// stat is what /proc/PID/stat says of a live process (zombies are dead).
type stat struct {
	pid, pgrp int
	comm      string
}

func readStat(path string) (stat, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return stat{}, false // it ended while we looked
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
		return stat{}, false
	}
	pid, _ := strconv.Atoi(strings.Fields(s[:i])[0])
	pgrp, err := strconv.Atoi(f[2])
	return stat{pid: pid, pgrp: pgrp, comm: strings.TrimSpace(s[:i+1])}, err == nil
}

// Live lists the live processes of group pgid, as "PID (comm)".
func Live(t testing.TB, pgid int) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, path := range stats {
		if st, ok := readStat(path); ok && st.pgrp == pgid {
			out = append(out, st.comm)
		}
	}
	return out
}

// GroupOf is the process group of a live process.
func GroupOf(pid int) (int, bool) {
	st, ok := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	return st.pgrp, ok
}

// WantGone fails t unless, within Limit, no process of group pgid is
// alive: a killed process takes a moment to finish dying.
func WantGone(t testing.TB, pgid int) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc to look for processes in: %v", err)
	}
	deadline := time.Now().Add(Limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		l := Live(t, pgid)
		if len(l) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d still running after %v: %v", pgid, Limit, l)
		}
		<-tick.C
	}
}

// KillOnCleanup kills, when t ends, what is left of process group pgid
// and of the processes pids (descendants a test learned of, which may
// have left the group): a test that fails, or a guard that a regression
// broke, leaves nothing running. Only processes still in the group are
// signalled, so that a number the system has given to another process
// since is never hit.
func KillOnCleanup(t testing.TB, pgid int, pids ...int) {
	t.Helper()
	t.Cleanup(func() {
		if len(Live(t, pgid)) > 0 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		for _, pid := range pids {
			if group, ok := GroupOf(pid); ok && group == pgid {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// WaitForPID reads the process id a program writes to path, one line,
// within Limit.
func WaitForPID(t testing.TB, path string) int {
	t.Helper()
	deadline := time.Now().Add(Limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatalf("%s holds %q", path, data)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process id in %s within %v", path, Limit)
		}
		<-tick.C
	}
}

// WantNoSocketFolder fails t unless, within Limit, no events socket
// folder of a trace (miotool-trace-*) is left in dir.
func WantNoSocketFolder(t testing.TB, dir string) {
	t.Helper()
	deadline := time.Now().Add(Limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		left, err := filepath.Glob(filepath.Join(dir, "miotool-trace-*"))
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind after %v: %v", Limit, left)
		}
		<-tick.C
	}
}

// WantPIDGone fails t unless, within Limit, process pid is gone (or a
// zombie, which runs nothing): a descendant that left the program's
// group, which WantGone cannot see.
func WantPIDGone(t testing.TB, pid int) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc to look for processes in: %v", err)
	}
	deadline := time.Now().Add(Limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		st, ok := readStat(fmt.Sprintf("/proc/%d/stat", pid))
		if !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still running after %v", st.comm, Limit)
		}
		<-tick.C
	}
}
