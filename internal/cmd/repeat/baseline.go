package repeat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"miotool/internal/buildinfo"
	"miotool/internal/report"
	"miotool/internal/stats"
)

// baseline is an earlier result of the unfixed build's runs.
type baseline struct {
	// Count is its failures among its finished runs.
	Count stats.Count
	// Label is its build's name, Row the cells of its row in its runs
	// table (the seed's words: "220 runs", "3 crashes — ...").
	Label string
	Row   []string
	// Program is what it ran; Version the miotool that ran it.
	Program []string
	Version string
	RunID   string
	Host    string
	// Flags say what differs from this run, or what to know of it, each a
	// sentence; the comparison still stands.
	Flags []string
}

// readBaseline reads path as the result of a repeat of the unfixed build
// and checks it against this run: a result of another command, of a
// comparison of two builds, with no finished run, or of another program
// (another executable name, once a leading env and its assignments are
// set aside) is refused; one of another miotool version, of the same
// program given otherwise, a shard's or an interrupted one is flagged.
func readBaseline(path string, program []string, build buildinfo.Info) (*baseline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, err
	}
	r, err := report.ReadJSON(strings.NewReader(string(data)))
	if err != nil {
		return nil, fmt.Errorf("not a miotool result (%v): give the JSON result of miotool repeat (--format json or --export-json) of the unfixed build", err)
	}
	if r.Check != "repeat" {
		return nil, fmt.Errorf("a result of miotool %s, not of miotool repeat: give the result of the unfixed build's runs", r.Check)
	}
	set, ok := setupOf(r)
	if !ok {
		return nil, errors.New("a repeat result without its setup table: it cannot be compared with")
	}
	if against := set[settingAgainst]; against != "" {
		return nil, fmt.Errorf("a comparison of two builds itself (--against %s): give the result of the unfixed build's runs alone", against)
	}
	runs, okRuns := r.Counter(counterRuns)
	passed, okPassed := r.Counter(counterPassed)
	switch {
	case !okRuns || !okPassed || passed > runs || passed < 0:
		return nil, errors.New("a repeat result without its counts of runs and passes")
	case runs == 0:
		return nil, errors.New("no run of the unfixed build finished: there is nothing to compare with")
	}
	b := &baseline{Count: stats.Count{K: int(runs - passed), N: int(runs)}, Label: set[settingLabel],
		Version: set[settingVersion], RunID: r.RunID, Host: r.Host}
	if b.Label == "" || b.Label == soloLabel || b.Label == fixedLabel {
		b.Label = unfixedLabel
	}
	if b.Program, err = report.SplitCommandLine(set[settingProgram]); err != nil || len(b.Program) == 0 {
		return nil, fmt.Errorf("its program %q cannot be read", set[settingProgram])
	}
	if mine, theirs := programName(program), programName(b.Program); mine != theirs {
		return nil, fmt.Errorf("it ran another program, %s (`%s`), where this run runs %s: a baseline is the same test on the unfixed build",
			theirs, report.JoinCommandLine(b.Program), mine)
	}
	b.Flags = flags(b, r, set, program, build, runs)
	if rows := runsRows(r); len(rows) > 0 {
		b.Row = rows[len(rows)-1]
	}
	return b, nil
}

// flags are what to know of baseline b beside this run: another command
// line for the same program, another miotool, a shard's runs, an
// interrupted run or one some of whose runs could not start.
func flags(b *baseline, r *report.Result, set map[string]string, program []string, build buildinfo.Info, runs int64) []string {
	var out []string
	if !slices.Equal(program, b.Program) {
		out = append(out, fmt.Sprintf("the baseline ran `%s`, this run `%s`", report.JoinCommandLine(b.Program), report.JoinCommandLine(program)))
	}
	if mine := versionText(build); b.Version != mine {
		out = append(out, fmt.Sprintf("the baseline was run by miotool %s, this run by %s: how runs are told apart may differ", orUnknown(b.Version), mine))
	}
	if sh := set[settingShard]; sh != "" {
		out = append(out, fmt.Sprintf("the baseline is shard %s: it holds that shard's runs only", sh))
	}
	switch r.Verdict {
	case report.Interrupted:
		out = append(out, fmt.Sprintf("the baseline was interrupted: its counts are its %d finished runs", runs))
	case report.Error:
		out = append(out, "some of the baseline's runs could not start: its counts are those that finished")
	}
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// programName is the executable's file name a command line runs, past a
// leading env with its options and assignments: `env LD_LIBRARY_PATH=/x
// python3 t.py` runs python3, as `/usr/bin/python3 t.py` does.
func programName(words []string) string {
	i := 0
	if len(words) > 0 && filepath.Base(words[0]) == "env" {
		i = 1
		for i < len(words) && (strings.HasPrefix(words[i], "-") || strings.Contains(words[i], "=")) {
			i++
		}
	}
	if i >= len(words) {
		return ""
	}
	return filepath.Base(words[i])
}

// setupOf is the settings of a repeat result's setup table.
func setupOf(r *report.Result) (map[string]string, bool) {
	for _, t := range r.Tables {
		if t.Title != setupTitle {
			continue
		}
		set := map[string]string{}
		for _, row := range t.Rows {
			if len(row.Cells) >= 2 {
				set[row.Cells[0]] = row.Cells[1]
			}
		}
		return set, true
	}
	return nil, false
}

// runsRows are the rows of a repeat result's runs table.
func runsRows(r *report.Result) [][]string {
	for _, t := range r.Tables {
		if strings.HasPrefix(t.Title, runsTitle) {
			var out [][]string
			for _, row := range t.Rows {
				out = append(out, row.Cells)
			}
			return out
		}
	}
	return nil
}
