package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

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
			return cli.ToolError(writeCompletion(cmd.Root(), args[0], f.IOStreams.Out))
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

// manDate is the date printed in the man pages' footer. It is fixed, not
// today's, so that regenerating pages from an unchanged command tree gives
// the same files (scripts/gen-man.sh and its check in .ci/run rely on that);
// bump it when the pages change in substance.
var manDate = time.Date(2026, time.December, 1, 0, 0, 0, 0, time.UTC)

// NewCmdGenMan builds the hidden `miotool gen-man DIR` that
// scripts/gen-man.sh runs to write one man page per command into DIR.
func NewCmdGenMan(f *cli.Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "gen-man DIR",
		Short:   "Write the man pages of every command into DIR",
		Example: "  miotool gen-man man/",
		Hidden:  true,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return cli.ToolError(err)
			}
			return cli.ToolError(GenManPages(cmd.Root(), args[0]))
		},
	}
}

// GenManPages writes a man page (section 1) for root and every visible
// command below it into dir. It changes root's help texts for the
// generator (see prepareForMan), so give it a tree built for the purpose.
func GenManPages(root *cobra.Command, dir string) error {
	prepareForMan(root, map[*pflag.Flag]bool{})
	date := manDate
	return doc.GenManTree(root, &doc.GenManHeader{
		Title:   "MIOTOOL",
		Section: "1",
		Source:  "miotool",
		Manual:  "miotool manual",
		Date:    &date,
	}, dir)
}

// prepareForMan readies the tree for the generator, which reads help text
// as Markdown: placeholders such as <user config dir> would be taken for
// HTML tags and vanish, so their "<" is escaped (outside indented code
// blocks). It also leaves out the generator's footer, which would carry the
// generation date.
func prepareForMan(c *cobra.Command, seen map[*pflag.Flag]bool) {
	c.DisableAutoGenTag = true
	c.Use = escapeAngles(c.Use)
	c.Short = escapeAngles(c.Short)
	c.Long = escapeAngles(c.Long)
	escapeFlag := func(fl *pflag.Flag) {
		if !seen[fl] {
			seen[fl] = true
			fl.Usage = escapeAngles(fl.Usage)
		}
	}
	c.LocalFlags().VisitAll(escapeFlag)
	c.PersistentFlags().VisitAll(escapeFlag)
	for _, sub := range c.Commands() {
		prepareForMan(sub, seen)
	}
}

// escapeAngles writes "<" as "\<" except in lines indented as code.
func escapeAngles(s string) string {
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			continue
		}
		lines[i] = strings.ReplaceAll(line, "<", `\<`)
	}
	return strings.Join(lines, "\n")
}
