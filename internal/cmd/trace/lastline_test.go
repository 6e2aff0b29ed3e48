//go:build linux

package trace

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"miotool/internal/trace"
)

// A script reads the JSON result from stdout whatever the program printed:
// it is the last line, one line long, and starts a line of its own even
// after a last line the program left open. On a regular file, where the
// last byte can be read back, no empty line is added after a complete one.
func TestTheResultIsTheLastLine(t *testing.T) {
	b := newBinary(t)
	k := b.kit
	for _, tt := range []struct {
		name, prog string
	}{
		{"a last line left open", "printf 'no newline at the end'"},
		{"complete lines", "echo one; echo two"},
		{"nothing", "true"},
	} {
		t.Run(tt.name+" on a pipe", func(t *testing.T) {
			// The capture first, then what the case prints last.
			r := b.run(t, "", nil, "trace", "--format", "json", "--", "sh", "-c", k.HIPProg+" echo </dev/null; "+tt.prog)
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			var doc struct {
				Verdict  string `json:"verdict"`
				ExitCode int    `json:"exit_code"`
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &doc); err != nil || doc.Verdict != "PASS" || doc.ExitCode != r.code {
				t.Errorf("the last line is not the result (%v, %+v, exit %d):\n%s", err, doc, r.code, r.stdout)
			}
		})
	}
	t.Run("on a regular file", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out.txt")
		cmd := exec.Command("sh", "-c", `"$0" trace -- sh -c 'echo complete' > "$1"`, b.bin, out)
		cmd.Env = b.env
		if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != 4 {
			t.Fatal(err)
		}
		data, err := os.ReadFile(out)
		if err != nil || !strings.HasPrefix(string(data), "complete\ntrace: ") {
			t.Errorf("%v: %q", err, data)
		}
	})
}

// --save-records keeps what the observer sent and the run's facts, in the
// form the golden tests replay: the replay judges it as the run did.
func TestSavedRecordsReplayAsTheRun(t *testing.T) {
	b := newBinary(t)
	saved := filepath.Join(t.TempDir(), "run.records")
	r := b.run(t, "", nil, "trace", "--save-records", saved, "--", b.kit.HIPProg, "sync-other-thread")
	live, _, _ := strings.Cut(strings.TrimPrefix(strings.SplitN(r.stdout, "\ntrace: ", 2)[1], ""), "\n")
	rules, err := trace.BuiltinRules()
	if err != nil {
		t.Fatal(err)
	}
	replayed, _, _ := strings.Cut(string(goldenResult(t, saved, rules)), "\n")
	if r.code != 1 || "trace: "+live != replayed {
		t.Errorf("exit %d; the live headline\n  trace: %s\nthe replayed one\n  %s", r.code, live, replayed)
	}
}
