// Package runenv reads the variables that MIOpen and the GPU runtimes
// read (GPU_MAX_HW_QUEUES, MIOPEN_NAIVE_TIMEOUT, MIOPEN_USER_DB_PATH,
// MIOPEN_FIND_MODE), where miotool implements the same mechanism: their
// effective values, and where each came from.
package runenv

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"miotool/internal/finddb"
	"miotool/internal/hip"
)

// Names of the variables that MIOpen and the GPU runtimes read. miotool
// honours them under their own names where it implements the same mechanism.
const (
	EnvNaiveTimeout = "MIOPEN_NAIVE_TIMEOUT"
	EnvUserDBPath   = "MIOPEN_USER_DB_PATH"
	EnvFindMode     = "MIOPEN_FIND_MODE"
)

// Own are the MIOTOOL_* variables miotool reads besides those that set
// its flags (MIOTOOL_<KEY>, see the root command's help) and
// MIOTOOL_CONFIG: the CUDA backend's switches, and what trace and repeat
// set for the program they run, which may be miotool itself. A MIOTOOL_* variable that
// is none of these gets a warning that it changes nothing.
var Own = []string{
	"MIOTOOL_CUBIN",           // off: no precompiled cubins (internal/hip/cuda)
	"MIOTOOL_NVRTC",           // off: no NVRTC (internal/hip/cuda)
	"MIOTOOL_TRACE_SOCKET",    // where a traced program's observer sends its records (internal/trace)
	"MIOTOOL_TRACE_CUPTI",     // a libcupti for a traced program's observer (internal/trace)
	"MIOTOOL_REPEAT_RUN",      // a run's number, set by repeat for the program it runs (internal/repeat)
	"MIOTOOL_CRASH_SOCKET",    // where the observer's crash handler sends its record (internal/trace)
	"MIOTOOL_CRASH_RUN",       // the run a crash record belongs to (internal/trace)
	"MIOTOOL_TRACE_INJECTION", // the program's own CUDA injection library, which the observer chains to (internal/trace)
	"MIOTOOL_TRACE_PYTHON",    // how the observer reads Python stacks; for its tests (internal/trace)
}

// DefaultNaiveTimeoutPercent bounds a naive solver's evaluation at this
// percentage of the best time found so far.
const DefaultNaiveTimeoutPercent = 300

// FindMode is MIOpen's find mode.
type FindMode int

// MIOpen's find modes (miopenConvolutionFindMode_t); 4 is reserved.
const (
	FindModeNormal        FindMode = 1
	FindModeFast          FindMode = 2
	FindModeHybrid        FindMode = 3
	FindModeDynamicHybrid FindMode = 5
)

// DefaultFindMode is the mode miotool's find runs in when
// MIOPEN_FIND_MODE is unset: NORMAL, which benchmarks every applicable
// solver even when the find-db has a record (find is there to measure).
// MIOpen's own default is MIOpenDefaultFindMode, which takes a record.
const DefaultFindMode = FindModeNormal

// MIOpenDefaultFindMode is MIOpen's default when MIOPEN_FIND_MODE is unset.
const MIOpenDefaultFindMode = FindModeDynamicHybrid

// findModeMeaning says what find does in each mode.
var findModeMeaning = map[FindMode]string{
	FindModeNormal:        "benchmarks every applicable solver, even when the find-db has a record",
	FindModeFast:          "takes a find-db record, else the immediate-mode heuristic's first solver, run once and not benchmarked",
	FindModeHybrid:        "takes a find-db record, else benchmarks",
	FindModeDynamicHybrid: "takes a find-db record, else benchmarks",
}

var findModeNames = map[FindMode]string{
	FindModeNormal:        "NORMAL",
	FindModeFast:          "FAST",
	FindModeHybrid:        "HYBRID",
	FindModeDynamicHybrid: "DYNAMIC_HYBRID",
}

func (m FindMode) String() string {
	if n, ok := findModeNames[m]; ok {
		return fmt.Sprintf("%s (%d)", n, int(m))
	}
	return fmt.Sprintf("find-mode(%d)", int(m))
}

// ParseFindMode accepts MIOpen's names (any case) or numbers.
func ParseFindMode(s string) (FindMode, error) {
	v := strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(v); err == nil {
		if _, ok := findModeNames[FindMode(n)]; ok {
			return FindMode(n), nil
		}
		return 0, fmt.Errorf("%s=%q is not a find mode (NORMAL, FAST, HYBRID or DYNAMIC_HYBRID, in any case, or 1, 2, 3 or 5)", EnvFindMode, s)
	}
	for m, n := range findModeNames {
		if n == v {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%s=%q is not a find mode (NORMAL, FAST, HYBRID or DYNAMIC_HYBRID, in any case, or 1, 2, 3 or 5)", EnvFindMode, s)
}

// Source says where a setting's value came from.
type Source string

// Sources of a runtime setting.
const (
	FromEnv     Source = "env"
	FromDefault Source = "default"
	// FromEnvInvalid is a value in the environment that cannot be used; the
	// commands that read the variable refuse to run.
	FromEnvInvalid Source = "env (invalid)"
)

// Setting is one runtime variable as the tool will use it.
type Setting struct {
	Name   string
	Value  string // the effective value, as shown to people
	Source Source // env, or default (also when the env value was ignored)
	Raw    string // the environment's text, when set
	Note   string // why a value was ignored or refused, or what the value means
	// Err is set when the environment's value cannot be used (Source
	// FromEnvInvalid); Value is then the environment's text.
	Err error
}

// Env holds the effective runtime variables.
type Env struct {
	HWQueues            int // GPU_MAX_HW_QUEUES, the per-device hardware-queue cap
	NaiveTimeoutPercent int // MIOPEN_NAIVE_TIMEOUT; 0 switches the time bound off
	UserDBPath          string
	FindMode            FindMode
	// Settings describes each variable, in a fixed order, for doctor.
	Settings []Setting
}

// Read resolves the runtime variables from lookup (normally
// os.LookupEnv). The user find-db defaults to <user config dir>/miotool/db
// rather than MIOpen's own directory, so that miotool never writes into a
// real MIOpen installation's database unless asked to.
func Read(lookup func(string) (string, bool), userConfigDir func() (string, error)) Env {
	var env Env

	raw, set := lookup(hip.EnvHWQueues)
	q, warn := hip.ParseHWQueues(raw, set)
	env.HWQueues = q
	env.Settings = append(env.Settings, setting(hip.EnvHWQueues, strconv.Itoa(q), raw, set, warn,
		"hardware queues per device; busy streams past the cap share a queue"))

	env.NaiveTimeoutPercent = DefaultNaiveTimeoutPercent
	raw, set = lookup(EnvNaiveTimeout)
	if n, err := parseNaiveTimeout(raw); set && err != nil {
		env.Settings = append(env.Settings, invalidSetting(EnvNaiveTimeout, raw, err))
	} else {
		if set {
			env.NaiveTimeoutPercent = n
		}
		meaning := fmt.Sprintf("naive solvers are abandoned after %d%% of the best time", env.NaiveTimeoutPercent)
		if env.NaiveTimeoutPercent == 0 {
			meaning = "0: the time bound on naive solvers is off"
		}
		env.Settings = append(env.Settings, setting(EnvNaiveTimeout, strconv.Itoa(env.NaiveTimeoutPercent), raw, set, "", meaning))
	}

	raw, set = lookup(EnvUserDBPath)
	warn = ""
	if set && strings.TrimSpace(raw) != "" {
		env.UserDBPath = expandHome(strings.TrimSpace(raw), lookup)
	} else {
		if set {
			warn = fmt.Sprintf("%s is empty; using the default", EnvUserDBPath)
			set = false
		}
		if dir, err := userConfigDir(); err == nil {
			env.UserDBPath = filepath.Join(dir, "miotool", "db")
		} else {
			warn = strings.TrimPrefix(warn+"; ", "; ") + "no user config directory (" + err.Error() + "); the find-db is kept in memory only"
		}
	}
	shown := env.UserDBPath
	if shown == "" {
		shown = "none"
	}
	env.Settings = append(env.Settings, setting(EnvUserDBPath, shown, raw, set, warn, "where find results are written"))

	env.FindMode = DefaultFindMode
	raw, set = lookup(EnvFindMode)
	if m, err := ParseFindMode(raw); set && err != nil {
		env.Settings = append(env.Settings, invalidSetting(EnvFindMode, raw, err))
	} else {
		note := fmt.Sprintf("unset: find %s (MIOpen's own default is %s, which %s)",
			findModeMeaning[DefaultFindMode], MIOpenDefaultFindMode, findModeMeaning[MIOpenDefaultFindMode])
		if set {
			env.FindMode = m
			note = "find " + findModeMeaning[m]
		}
		env.Settings = append(env.Settings, setting(EnvFindMode, env.FindMode.String(), raw, set, "", note))
	}
	return env
}

// parseNaiveTimeout reads MIOPEN_NAIVE_TIMEOUT: a whole percentage, 0 or more.
func parseNaiveTimeout(raw string) (int, error) {
	const want = "want a whole percentage, 0 or more; 0 switches the bound off"
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("%s=%q is too large (%s)", EnvNaiveTimeout, raw, want)
	case err != nil:
		return 0, fmt.Errorf("%s=%q is not a whole number (%s)", EnvNaiveTimeout, raw, want)
	case n < 0:
		return 0, fmt.Errorf("%s=%d is negative (%s)", EnvNaiveTimeout, n, want)
	}
	return n, nil
}

// Err is the error of every variable whose value cannot be used, nil when
// there is none. The commands that read these variables refuse to run
// rather than run with a value the user did not ask for.
func (e Env) Err() error {
	var errs []error
	for _, s := range e.Settings {
		if s.Err != nil {
			errs = append(errs, s.Err)
		}
	}
	return errors.Join(errs...)
}

// UserDBErr is the error find refuses MIOPEN_USER_DB_PATH with (exit 2):
// a path that can never be a folder, as finddb.CheckDir tells. Nil for a
// folder, a path that does not exist yet (find creates it) or none. Only
// find reads the find-db, so only find refuses it; Err does not name it.
func (e Env) UserDBErr() error {
	if e.UserDBPath == "" {
		return nil
	}
	if err := finddb.CheckDir(e.UserDBPath); errors.Is(err, finddb.ErrNotAFolder) {
		return fmt.Errorf("%s=%w", EnvUserDBPath, err)
	}
	return nil
}

// invalidSetting describes a variable set to a value that cannot be used:
// the value shown is the environment's own, marked as an error, so that
// doctor shows what the commands refuse rather than a default they do not
// use.
func invalidSetting(name, raw string, err error) Setting {
	return Setting{Name: name, Value: raw, Source: FromEnvInvalid, Raw: raw, Note: "error: " + err.Error(), Err: err}
}

// setting builds the description of one variable. A value that was set but
// ignored counts as the default, and the warning replaces the note.
func setting(name, value, raw string, set bool, warn, note string) Setting {
	s := Setting{Name: name, Value: value, Source: FromDefault, Note: note}
	if set {
		s.Raw = raw
		if warn == "" {
			s.Source = FromEnv
		}
	}
	if warn != "" {
		s.Note = "warning: " + warn
	}
	return s
}

// expandHome expands a leading "~" as MIOpen does, from HOME.
func expandHome(p string, lookup func(string) (string, bool)) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, ok := lookup("HOME")
	if !ok || home == "" {
		return p
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~"))
}
