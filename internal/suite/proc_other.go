//go:build !unix

package suite

import (
	"fmt"
	"os"
	"os/exec"
)

func startOwnGroup(*exec.Cmd) {}

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}

func exitText(st *os.ProcessState) string { return fmt.Sprintf("exit status %d", st.ExitCode()) }
