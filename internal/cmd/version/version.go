// Package version is `miotool version`.
package version

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"miotool/internal/buildinfo"
	"miotool/internal/cli"
	"miotool/internal/report"
)

// VersionOptions are the inputs of `miotool version`.
type VersionOptions struct {
	IO     *cli.IOStreams
	Build  buildinfo.Info
	Format report.Format
}

// NewCmdVersion builds `miotool version`; runF, when set, replaces the run
// function (tests use it to see the parsed options).
func NewCmdVersion(f *cli.Factory, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: f.IOStreams, Build: f.Build}
	return &cobra.Command{
		Use:   "version",
		Short: "Print miotool's version, commit and Go version",
		Example: `  miotool version
  miotool version --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Complete(f)
			if runF != nil {
				return runF(opts)
			}
			return opts.Run()
		},
	}
}

// versionJSON is the JSON layout of `miotool version --format json`.
type versionJSON struct {
	Schema   string `json:"schema"`
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Complete reads the output format.
func (o *VersionOptions) Complete(f *cli.Factory) { o.Format = f.Global.Format }

// Run prints the version.
func (o *VersionOptions) Run() error {
	b := o.Build
	commit := b.Commit
	if b.Modified {
		commit += " (modified)"
	}
	switch o.Format {
	case report.JSON:
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(versionJSON{Schema: "miotool/version/v1", Version: b.Version, Commit: b.Commit, Modified: b.Modified, Go: b.GoVersion, Platform: b.Platform})
	case report.Markdown:
		_, err := fmt.Fprintf(o.IO.Out, "miotool `%s` (commit `%s`, %s, %s)\n", b.Version, commit, b.GoVersion, b.Platform)
		return err
	}
	_, err := fmt.Fprintf(o.IO.Out, "miotool %s\n  commit: %s\n  go:     %s %s\n", b.Version, commit, b.GoVersion, b.Platform)
	return err
}
