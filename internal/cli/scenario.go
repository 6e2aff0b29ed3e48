package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/runenv"
)

// Scenario holds what the scenario commands (find, capture, replay,
// stress-threads) share: the outside world from the Factory, the global
// options, the runtime variables and the simulator's dialect.
type Scenario struct {
	IO          *IOStreams
	Global      GlobalOptions
	Context     context.Context
	CommandLine string
	OpenDevice  OpenFunc
	Now         func() time.Time
	Verbosef    func(format string, args ...any)
	Progress    func(label string) (update func(done, total int), done func())
	Env         runenv.Env
	Dialect     hip.Dialect
}

// NewScenario takes the Factory's parts; Complete fills in the rest when the
// command runs.
func NewScenario(f *Factory) Scenario {
	return Scenario{IO: f.IOStreams, OpenDevice: f.OpenDevice, Now: f.Now, Verbosef: f.Verbosef, Progress: f.Progress}
}

// AddDialectFlag adds --dialect (the simulator's rules and naming).
func (s *Scenario) AddDialectFlag(cmd *cobra.Command) {
	cmd.Flags().Var(NewEnumValue(&s.Dialect, hip.DialectCUDA, hip.DialectCUDA, hip.DialectHIP), "dialect",
		"the simulated device's rules and naming: cuda or hip (GPU backends speak their own)")
}

// Complete reads the global options and the runtime variables once the
// command line and the configuration are parsed. A MIOPEN_NAIVE_TIMEOUT or
// MIOPEN_FIND_MODE that cannot be used is a configuration error (exit 2),
// since these commands would otherwise run with a setting the user did not
// ask for; an ignored GPU_MAX_HW_QUEUES keeps HIP's documented fallback,
// and an empty MIOPEN_USER_DB_PATH the default folder, as warnings.
func (s *Scenario) Complete(f *Factory, cmd *cobra.Command) error {
	s.Global = f.Global
	s.Context = cmd.Context()
	if s.Context == nil {
		s.Context = f.Context
	}
	s.CommandLine = f.CommandLine()
	s.Env = f.RuntimeEnv()
	if err := s.Env.Err(); err != nil {
		return &ExitError{Code: ExitUsage, Err: err, Hint: "Unset it or give a value miotool can use; 'miotool doctor' lists the runtime variables."}
	}
	return nil
}

// DeviceRequest asks the runner for the device the global options
// select, opened with the dialect and the runtime variables (Open).
func (s *Scenario) DeviceRequest(check string) DeviceRequest {
	return DeviceRequest{Check: check, Open: func(check string, start time.Time) (hip.Device, *report.Result, func()) {
		dev, r := s.Open(check, start)
		return dev, r, nil
	}}
}

// Open opens the device for check. When it cannot, the returned result is
// the SKIP or ERROR to print and dev is nil.
func (s *Scenario) Open(check string, start time.Time) (hip.Device, *report.Result) {
	dev, sel, err := s.OpenDevice(string(s.Global.Backend), hip.OpenOptions{Ordinal: s.Global.Device, Dialect: s.Dialect, HWQueues: s.Env.HWQueues})
	if err != nil {
		return nil, OpenFailedResult(check, s.CommandLine, start, s.Now(), s.Global.Backend, sel, err)
	}
	s.Verbosef("backend %s (%s) on %s", sel.Chosen, SelectionReason(sel), dev.Props())
	r := StartResult(check, s.CommandLine, start, sel, dev)
	for _, st := range s.Env.Settings {
		if strings.HasPrefix(st.Note, "warning: ") {
			r.Note("%s", strings.TrimPrefix(st.Note, "warning: "))
		}
	}
	return dev, r
}
