//go:build unix

package suite

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// startOwnGroup makes cmd the leader of a new process group, so that
// killGroup reaches the processes it starts too.
func startOwnGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills cmd's process group.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return cmd.Process.Kill()
	}
	return nil
}

// exitText says how a process ended: "exit status 2" or "killed by signal
// SIGSEGV (segmentation fault)".
func exitText(st *os.ProcessState) string {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %s (%v)", signalName(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exit status %d", st.ExitCode())
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGILL: "SIGILL",
	syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV", syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT",
	syscall.SIGQUIT: "SIGQUIT", syscall.SIGTRAP: "SIGTRAP", syscall.SIGPIPE: "SIGPIPE",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}
