//go:build linux

package childproc

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
)

func TestParseStatReadsPidParentAndGroupPastAnyCommandName(t *testing.T) {
	tests := []struct {
		line string
		want process
		ok   bool
	}{
		{"123 (sleep) S 45 123 45 0 -1", process{pid: 123, ppid: 45, pgrp: 123}, true},
		{"7 (a b) c) Z 1 7 7", process{pid: 7, ppid: 1, pgrp: 7, zombie: true}, true},
		{"9 ((x)) X 2 3 3", process{pid: 9, ppid: 2, pgrp: 3, zombie: true}, true},
		{"10 ()) R 4 5", process{pid: 10, ppid: 4, pgrp: 5}, true},
		// Cut short after the group, as a read into a small buffer is.
		{"11 (python3) S 1 11 11 34816 11 4194304 2", process{pid: 11, ppid: 1, pgrp: 11}, true},
		{"12 (x) S 1", process{}, false},
		{"x (y) S 1 2", process{}, false},
		{"13 y) S 1 2", process{}, false},
		{"", process{}, false},
	}
	for _, tt := range tests {
		got, ok := parseStat([]byte(tt.line))
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// childrenOf finds this process's child and tells its group, and none of
// the child's own children.
func TestChildrenOfFindsTheChildrenAndOnlyThem(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	// The shell starts a grandchild and waits for it; both are in the
	// shell's group, which the test kills at its end, so that neither
	// outlives it whatever it asserted.
	cmd := exec.Command(sh, "-c", "sleep 60 & echo $!; wait")
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	var grandchild int
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	for _, c := range buf[:n] {
		if c >= '0' && c <= '9' {
			grandchild = grandchild*10 + int(c-'0')
		}
	}
	if grandchild == 0 {
		t.Fatalf("the shell did not say its child: %q", buf[:n])
	}

	children := childrenOf(os.Getpid())
	i := slices.IndexFunc(children, func(p process) bool { return p.pid == cmd.Process.Pid })
	if i < 0 {
		t.Fatalf("childrenOf(self) = %+v: no %d", children, cmd.Process.Pid)
	}
	if c := children[i]; c.ppid != os.Getpid() || c.pgrp != cmd.Process.Pid || c.zombie {
		t.Errorf("the child is %+v, want parent %d, group %d, alive", c, os.Getpid(), cmd.Process.Pid)
	}
	for _, c := range children {
		if c.pid == grandchild || c.ppid != os.Getpid() {
			t.Errorf("childrenOf(self) lists %+v, not a child", c)
		}
	}
	if grand := childrenOf(cmd.Process.Pid); !slices.ContainsFunc(grand, func(p process) bool { return p.pid == grandchild }) {
		t.Errorf("childrenOf(%d) = %+v: no %d", cmd.Process.Pid, grand, grandchild)
	}
}

// The look at the end of every run: what a traced command pays once.
func BenchmarkChildrenOf(b *testing.B) {
	self := os.Getpid()
	for b.Loop() {
		childrenOf(self)
	}
}
