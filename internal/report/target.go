package report

import (
	"fmt"
	"strings"
)

// A check's command may pin what it runs on: --backend (cuda, hip, sim)
// and --dialect (the runtime whose rules and names apply: cuda, hip). A
// run made on something else, a --dialect cuda check merged from a HIP
// host, compared other things than the check asks for: it is flagged
// (its check is an ERROR that says what ran where), never counted as met.

// pinned is the value of --name (or --name=value) in command before any
// "--", "" when it does not set it.
func pinned(command, name string) string {
	words, err := SplitCommandLine(command)
	if err != nil {
		return ""
	}
	value := ""
	for i, w := range words {
		if w == "--" {
			break
		}
		if v, ok := strings.CutPrefix(w, "--"+name+"="); ok {
			value = v
		} else if w == "--"+name && i+1 < len(words) {
			value = words[i+1]
		}
	}
	return value
}

// runDialect is the dialect a run's device spoke: its backend's, or for
// the simulator the rules it was told to follow, which its device's name
// carries ("miotool simulated device (hip rules)"); "" when the run does
// not say.
func runDialect(r SuiteRun) string {
	switch r.Backend {
	case "cuda", "hip":
		return r.Backend
	case "sim":
		for _, d := range []string{"cuda", "hip"} {
			if strings.Contains(r.Device.Name, "("+d+" rules)") || strings.Contains(r.Device.Description, "("+d+" rules)") {
				return d
			}
		}
	}
	return ""
}

// mismatch says how a run that gave a verdict ran on another backend or
// dialect than its check's command asks for, "" when it did not (or does
// not say what it ran on).
func (c *SuiteCheck) mismatch(r SuiteRun) string {
	if r.Verdict != Pass && r.Verdict != Fail {
		return "" // no verdict about the check's subject: nothing compared
	}
	where := r.Backend
	if r.Device.Name != "" {
		where += ", " + r.Device.Short()
	}
	if r.Host != "" {
		where += ", on " + r.Host
	}
	if b := pinned(c.Command, "backend"); b != "" && b != "auto" && r.Backend != "" && r.Backend != b {
		return fmt.Sprintf("run %d ran on backend %s; the check asks for --backend %s: not compared", r.Iteration, where, b)
	}
	if d := pinned(c.Command, "dialect"); d != "" {
		if rd := runDialect(r); rd != "" && rd != d {
			return fmt.Sprintf("run %d ran in the %s dialect (%s); the check asks for --dialect %s: not compared", r.Iteration, rd, where, d)
		}
	}
	return ""
}
