// Package completion is `miotool completion`, the shell completion scripts.
package completion

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
)

// NewCmdCompletion builds `miotool completion bash|zsh|fish`.
func NewCmdCompletion(f *cli.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `completion prints the script that makes a shell complete miotool's commands,
flags and flag values. Load it in the current shell, or install it where the
shell looks for completions.`,
		Example: `  # bash, for this shell only
  source <(miotool completion bash)

  # bash, for every new shell (bash-completion installed)
  miotool completion bash > ~/.local/share/bash-completion/completions/miotool

  # zsh: a directory on $fpath
  miotool completion zsh > "${fpath[1]}/_miotool"

  # fish
  miotool completion fish > ~/.config/fish/completions/miotool.fish`,
		Args:                  cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs:             []string{"bash", "zsh", "fish"},
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeCompletion(cmd.Root(), args[0], f.IOStreams.Out)
		},
	}
}

func writeCompletion(root *cobra.Command, shell string, w io.Writer) error {
	switch shell {
	case "bash":
		return root.GenBashCompletionV2(w, true)
	case "zsh":
		return root.GenZshCompletion(w)
	case "fish":
		return root.GenFishCompletion(w, true)
	}
	return fmt.Errorf("no completion for shell %q (want bash, zsh or fish)", shell)
}
