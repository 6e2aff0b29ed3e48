package report

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A result's JSON exit_code is the run's own exit status: the verdict's,
// or Exit where the verdict does not say it (SIGTERM, a configuration
// error), and it reads back the same.
func TestJSONExitCodeIsTheRunsOwn(t *testing.T) {
	for _, tt := range []struct {
		verdict Verdict
		exit    int
		want    int
	}{
		{Pass, 0, 0},
		{Interrupted, 0, 130},
		{Interrupted, 143, 143},
		{Error, 2, 2},
	} {
		r := New("doctor", "miotool doctor", time.Time{})
		r.Finish(tt.verdict, "summary", time.Time{})
		r.Exit = tt.exit
		var b bytes.Buffer
		if err := WriteJSON(&b, r); err != nil {
			t.Fatal(err)
		}
		if want := `"exit_code": ` + strconv.Itoa(tt.want) + ","; !strings.Contains(b.String(), want) {
			t.Errorf("%s exit %d: JSON lacks %s:\n%s", tt.verdict, tt.exit, want, b.String())
		}
		back, err := ReadJSON(&b)
		if err != nil {
			t.Fatal(err)
		}
		if back.ExitCode() != tt.want {
			t.Errorf("%s exit %d: read back as exit %d, want %d", tt.verdict, tt.exit, back.ExitCode(), tt.want)
		}
	}
}
