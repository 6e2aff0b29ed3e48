package cli

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"miotool/internal/buildinfo"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/runenv"
)

// GlobalOptions are the root command's flags, after configuration.
type GlobalOptions struct {
	Backend    hip.BackendName // auto, sim, cuda or hip
	Device     int             // device ordinal
	Format     report.Format
	ConfigFile string // --config as given; Factory.ConfigUsed is the file read
	Verbose    bool
	NoProgress bool
}

// Factory carries what commands need from the outside world. Everything
// that touches the process (streams, environment, directories, clock,
// devices) is a field, so tests can replace it.
type Factory struct {
	IOStreams *IOStreams
	Build     buildinfo.Info
	// Global is filled by the root command's flags and the configuration
	// before any command runs.
	Global GlobalOptions
	// Context is cancelled on interrupt.
	Context context.Context
	// Args are the command-line arguments (without the program name).
	Args []string
	// ConfigUsed is the configuration file that was read; "" for none.
	ConfigUsed string
	// valueOrigins says, per flag name, where a value that did not come
	// from the command line came from: "runs: -4 in miotool.yaml line 3".
	valueOrigins map[string]string
	// interrupts is what Main knows of the signal that stops the run, for
	// the runner; nil outside Main.
	interrupts *interruptState

	// OpenDevice selects and opens a backend (hip.Select).
	OpenDevice func(backend string, opts hip.OpenOptions) (hip.Device, hip.Selection, error)
	// Backends lists the linked-in backends (hip.Backends).
	Backends func() []hip.Registration
	// LookupEnv reads the environment: the runtime variables
	// (GPU_MAX_HW_QUEUES, MIOPEN_*), MIOTOOL_CONFIG and the MIOTOOL_* flag
	// values.
	LookupEnv     func(string) (string, bool)
	Getwd         func() (string, error)
	UserConfigDir func() (string, error)
	Now           func() time.Time
	// NumCPU is the number of usable CPU cores (runtime.NumCPU), which
	// bounds report --cpu-load.
	NumCPU func() int
}

// NewFactory returns a Factory wired to the real process.
func NewFactory(ios *IOStreams, build buildinfo.Info) *Factory {
	return &Factory{
		IOStreams:     ios,
		Build:         build,
		Context:       context.Background(),
		OpenDevice:    hip.Select,
		Backends:      hip.Backends,
		LookupEnv:     os.LookupEnv,
		Getwd:         os.Getwd,
		UserConfigDir: os.UserConfigDir,
		Now:           time.Now,
		NumCPU:        runtime.NumCPU,
	}
}

// CommandLine is the command as typed, for results: "miotool rules --dialect cuda".
func (f *Factory) CommandLine() string {
	return report.JoinCommandLine(append([]string{"miotool"}, f.Args...))
}

// RuntimeEnv resolves the runtime variables through the factory.
func (f *Factory) RuntimeEnv() runenv.Env {
	return runenv.Read(f.LookupEnv, f.UserConfigDir)
}

// Verbosef prints a line to stderr when --verbose is on.
func (f *Factory) Verbosef(format string, args ...any) {
	if f.Global.Verbose {
		fmt.Fprintf(f.IOStreams.ErrOut, "miotool: "+format+"\n", args...)
	}
}

// Progress returns a reporter that draws a progress bar (count/total,
// elapsed, ETA) on stderr, or a no-op when stderr is not a terminal or
// --no-progress is set. Call the returned done func to clear the line.
func (f *Factory) Progress(label string) (update func(done, total int), done func()) {
	b := f.ProgressBar(label)
	if b == nil {
		return func(int, int) {}, func() {}
	}
	return b.Update, b.Done
}
