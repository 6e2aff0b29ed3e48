package report

import (
	"path/filepath"
	"strconv"
	"strings"

	"miotool/internal/hip"
	"miotool/internal/suite"
)

// flagValue is a global flag of this report run that every check of the
// suite gets unless it sets the flag itself.
type flagValue struct {
	name  string // without dashes
	value string
}

// passedOn are the global flags every check gets: the backend and device
// when given (--device 0 with --devices), and the config file report read.
func (o *ReportOptions) passedOn() []flagValue {
	var out []flagValue
	if g := o.Global; g.Backend != "" && g.Backend != hip.BackendAuto {
		out = append(out, flagValue{"backend", string(g.Backend)})
	}
	switch {
	case len(o.devices) > 0:
		// Pinned to one device, a check sees it alone, as device 0.
		out = append(out, flagValue{"device", "0"})
	case o.Global.Device != 0:
		out = append(out, flagValue{"device", strconv.Itoa(o.Global.Device)})
	}
	if o.ConfigUsed != "" {
		// Checks may run in another directory (the suite's workdir).
		if abs, err := filepath.Abs(o.ConfigUsed); err == nil {
			out = append(out, flagValue{"config", abs})
		}
	}
	return out
}

// checkArgs are a check's own arguments and the passed-on flags it does
// not set itself, before any "--" (after it, a trace check's program has
// its own arguments).
func checkArgs(own []string, passOn []flagValue) []string {
	var add []string
	for _, fl := range passOn {
		if !setsFlag(own, fl.name) {
			add = append(add, "--"+fl.name, fl.value)
		}
	}
	return suite.BeforeDash(own, add...)
}

// setsFlag reports whether args set --name, before any "--".
func setsFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}
