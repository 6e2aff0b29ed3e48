// Package genman is the hidden `miotool gen-man`, which writes the man
// pages of the command tree.
package genman

import (
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"miotool/internal/cli"
)

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
				return err
			}
			return GenManPages(cmd.Root(), args[0])
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
