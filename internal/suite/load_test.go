package suite

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// suiteWith is a suite file whose only check runs command (a YAML
// value), with extra lines in the check after it.
func suiteWith(command string, extra ...string) string {
	s := "suite: s\nchecks:\n  - name: a\n    command: " + command + "\n    expect: PASS\n"
	for _, e := range extra {
		s += "    " + e + "\n"
	}
	return s
}

// A check must run one of miotool's checks, in this miotool: anything
// else is refused when the file is read, naming the file, the line and
// the command, before anything runs.
func TestCommandsThatAreNotChecksAreRefused(t *testing.T) {
	const path = "suites/s.yaml"
	cases := []struct {
		name, data string
		line       int
		want       []string // each in the message
	}{
		{"a program", suiteWith("ls -l"), 4, []string{"`miotool ls -l`", "ls is not a miotool command", "a check is one of capture, doctor, find"}},
		{"true", suiteWith("true"), 4, []string{"`miotool true`", "true is not a miotool command"}},
		{"version", suiteWith("miotool version"), 4, []string{"version prints no result to check"}},
		{"help", suiteWith("miotool help capture"), 4, []string{"help prints no result to check"}},
		{"completion", suiteWith("miotool completion bash"), 4, []string{"completion prints no result"}},
		{"a misspelt command", suiteWith("miotool captur --mode=global"), 4, []string{"captur is not a miotool command (did you mean capture?)"}},
		{"only flags", suiteWith("miotool --backend sim"), 4, []string{"names no miotool command"}},
		{"another binary", suiteWith("/opt/miotool-1.0/bin/miotool capture --mode=global"), 4,
			[]string{"/opt/miotool-1.0/bin/miotool: suites run this miotool; write `miotool capture --mode=global`"}},
		{"a relative binary", suiteWith("./miotool find"), 4, []string{"suites run this miotool; write `miotool find`"}},
		{"help flag", suiteWith("miotool capture --help"), 4, []string{"--help prints help, not a result"}},
		{"short help flag", suiteWith("miotool rules -h"), 4, []string{"-h prints help"}},
		{"version flag", suiteWith("miotool find --version"), 4, []string{"--version prints help"}},
		{"writes a file", suiteWith("miotool rules --write-expect mine.yaml"), 4, []string{"--write-expect: a check compares, it does not write files"}},
		{"writes a file, with =", suiteWith("miotool rules --write-expect=mine.yaml"), 4, []string{"sets --write-expect"}},
		{"trace without a program", suiteWith("miotool trace --format-less"), 4, []string{"write `miotool trace [flags] -- PROGRAM [ARGS...]`"}},
		{"trace with nothing after --", suiteWith("miotool trace --"), 4, []string{"trace runs the program given after --"}},
		{"repeat without a program", suiteWith("miotool repeat --runs 20"), 4, []string{"write `miotool repeat [flags] -- PROGRAM [ARGS...]`"}},
		{"a repeated program not allowed", suiteWith("miotool repeat --runs 20 -- ./test_conv"), 4,
			[]string{`check "a": runs the program ./test_conv`, "only when you allow it with --allow-programs"}},
		{"a program not allowed", suiteWith("miotool trace -- python3 t.py"), 4,
			[]string{`check "a": runs the program python3 (` + "`python3 t.py`" + `)`, "only when you allow it with --allow-programs"}},
		{"a code-loading variable", suiteWith("miotool find", "env: {LD_PRELOAD: /tmp/x.so}"), 6,
			[]string{`check "a": env: LD_PRELOAD makes every check's process load or run what it names (LD_PRELOAD=/tmp/x.so)`, "--allow-programs"}},
		{"a suite-wide code-loading variable", "suite: s\nenv:\n  A: 1\n  PATH: /tmp/bin\nchecks:\n  - name: a\n    command: find\n    expect: PASS\n", 4,
			[]string{"env: PATH makes every check's process load or run"}},
		{"a listed code-loading variable", suiteWith("miotool find", "env: [\"CUDA_INJECTION64_PATH=/x.so\"]"), 6, []string{"CUDA_INJECTION64_PATH"}},
		{"the user's find-db", suiteWith("miotool find", "env: {MIOPEN_USER_DB_PATH: /home/u/db}"), 6,
			[]string{"a suite does not choose where find writes", "`find-db: user`"}},
		{"a bad find-db", "suite: s\nfind-db: mine\nchecks:\n  - name: a\n    command: find\n    expect: PASS\n", 2, []string{`find-db: "mine": want scratch`}},
		{"a bad exclusive", suiteWith("miotool find", "exclusive: sometimes"), 6, []string{`exclusive: "sometimes": want true`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWith(path, []byte(tc.data), LoadOptions{Flags: miotoolFlags})
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if se.File != path || se.Line != tc.line {
				t.Errorf("at %s:%d, want %s:%d (%v)", se.File, se.Line, path, tc.line, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("err spans lines: %q", err)
			}
		})
	}
}

// miotool's own checks load, with global flags before the command, a
// trace check's program's own flags untouched by the reserved ones, and
// --allow-programs letting programs and code-loading variables in; each
// check is exclusive by its command unless the file says otherwise.
func TestChecksThatLoad(t *testing.T) {
	cases := []struct {
		name, data string
		allow      bool
		args       []string
		program    []string
		exclusive  bool
		programs   []string // File.Programs
	}{
		{"capture", suiteWith("miotool capture --mode=global"), false, []string{"capture", "--mode=global"}, nil, false, nil},
		{"no miotool word", suiteWith("replay --reclaim=worker"), false, []string{"replay", "--reclaim=worker"}, nil, false, nil},
		{"global flags first", suiteWith("miotool --backend sim -v rules --action malloc"), false,
			[]string{"--backend", "sim", "-v", "rules", "--action", "malloc"}, nil, false, nil},
		{"doctor", suiteWith("miotool doctor"), false, []string{"doctor"}, nil, false, nil},
		{"heuristic", suiteWith("miotool heuristic"), false, []string{"heuristic"}, nil, false, nil},
		{"find is exclusive", suiteWith("miotool find"), false, []string{"find"}, nil, true, nil},
		{"stress is exclusive", suiteWith("miotool stress-threads --runs 2"), false, []string{"stress-threads", "--runs", "2"}, nil, true, nil},
		{"find made shareable", suiteWith("miotool find", "exclusive: false"), false, []string{"find"}, nil, false, nil},
		{"capture made exclusive", suiteWith("miotool capture", "exclusive: true"), false, []string{"capture"}, nil, true, nil},
		{"an allowed program", suiteWith("miotool trace --backend cuda -- python3 t.py --format x"), true,
			[]string{"trace", "--backend", "cuda", "--", "python3", "t.py", "--format", "x"}, []string{"python3", "t.py", "--format", "x"}, true,
			[]string{`s.yaml:3: check "a" runs python3 t.py --format x`}},
		{"an allowed program with its observer", suiteWith("miotool trace --observer=/opt/obs.so -- ./train"), true,
			[]string{"trace", "--observer=/opt/obs.so", "--", "./train"}, []string{"./train"}, true,
			[]string{`s.yaml:3: check "a" runs ./train`, `s.yaml:3: check "a" loads the library /opt/obs.so into it`}},
		{"a repeated program, and the unfixed build beside it", suiteWith("miotool repeat --runs 20 --against './old/test_conv --fast' -- ./test_conv --fast"), true,
			[]string{"repeat", "--runs", "20", "--against", "./old/test_conv --fast", "--", "./test_conv", "--fast"}, []string{"./test_conv", "--fast"}, true,
			[]string{`s.yaml:3: check "a" runs ./test_conv --fast`, `s.yaml:3: check "a" also runs ./old/test_conv --fast`}},
		{"an allowed variable", suiteWith("miotool capture", "env: {LD_LIBRARY_PATH: /opt/lib}"), true, []string{"capture"}, nil, false,
			[]string{`s.yaml:3: check "a"'s environment sets LD_LIBRARY_PATH=/opt/lib`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseWith("s.yaml", []byte(tc.data), LoadOptions{Flags: miotoolFlags, AllowPrograms: tc.allow})
			if err != nil {
				t.Fatal(err)
			}
			c := f.Checks[0]
			if !slices.Equal(c.Args, tc.args) || !slices.Equal(c.Program, tc.program) || c.Exclusive != tc.exclusive {
				t.Errorf("args %q program %q exclusive %v; want %q, %q, %v", c.Args, c.Program, c.Exclusive, tc.args, tc.program, tc.exclusive)
			}
			if got := f.Programs(); !slices.Equal(got, tc.programs) {
				t.Errorf("Programs() = %q, want %q", got, tc.programs)
			}
			if f.FindDB != FindDBScratch {
				t.Errorf("find-db %q, want scratch by default", f.FindDB)
			}
		})
	}
	f, err := ParseWith("s.yaml", []byte("suite: s\nfind-db: user\nchecks:\n  - name: a\n    command: find\n    expect: PASS\n"), LoadOptions{Flags: miotoolFlags})
	if err != nil || f.FindDB != FindDBUser {
		t.Errorf("find-db: user gives %q, %v", f.FindDB, err)
	}
}

func TestErrorLineIsTheCauseNotTheHint(t *testing.T) {
	for _, tc := range []struct{ name, stderr, want string }{
		{"usage", "miotool: unknown flag: --bogus\nRun 'miotool doctor --help' for usage.\n", "miotool: unknown flag: --bogus"},
		{"a hint after the error", "miotool: MIOPEN_NAIVE_TIMEOUT=\"2.5\" is not a whole number\nUnset it or give a value miotool can use (see Runtime variables above).\n",
			`miotool: MIOPEN_NAIVE_TIMEOUT="2.5" is not a whole number`},
		{"a warning before the error", "miotool: warning: the lock is held, waiting\nsome line\nmiotool: find: context canceled\nhint\n", "miotool: find: context canceled"},
		{"a warning after the cause", "miotool: find: context canceled\nmiotool: warning: MIOTOOL_FROMAT is not a variable miotool reads (did you mean MIOTOOL_FORMAT?)\n", "miotool: find: context canceled"},
		{"a Go crash", "goroutine 1 [running]:\npanic: runtime error: index out of range\n\ngoroutine 7:\nmain.f()\n\t/x.go:3\n", "panic: runtime error: index out of range"},
		{"a runtime fatal error", "fatal error: concurrent map writes\n\ngoroutine 3:\n", "fatal error: concurrent map writes"},
		{"anything else", "first\nthe last words\n\n", "the last words"},
		{"nothing", "", ""},
	} {
		if got := ErrorLine(tc.stderr); got != tc.want {
			t.Errorf("%s: ErrorLine = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestBeforeDash(t *testing.T) {
	for _, tc := range []struct{ args, flags, want []string }{
		{[]string{"capture", "--mode=global"}, []string{"--format", "json"}, []string{"capture", "--mode=global", "--format", "json"}},
		{[]string{"trace", "--", "python3", "x.py"}, []string{"--format", "json"}, []string{"trace", "--format", "json", "--", "python3", "x.py"}},
		{[]string{"trace", "--", "a", "--", "b"}, []string{"-v"}, []string{"trace", "-v", "--", "a", "--", "b"}},
	} {
		if got := BeforeDash(tc.args, tc.flags...); !slices.Equal(got, tc.want) {
			t.Errorf("BeforeDash(%q, %q) = %q, want %q", tc.args, tc.flags, got, tc.want)
		}
	}
}

// A suite run larger than MaxRuns is refused before anything is planned,
// however large the count (no product overflows, nothing is allocated).
func TestCheckSize(t *testing.T) {
	f := &File{Path: "s.yaml"}
	for range 9 {
		f.Checks = append(f.Checks, Check{Name: "c"})
	}
	f.Checks = append(f.Checks, Check{Name: "skipped", Skip: "no"})
	for _, tc := range []struct {
		repeat, variants int
		want             string // "" for no error
	}{
		{1, 1, ""},
		{MaxRuns / 9, 1, ""},
		{MaxRuns/9 + 1, 1, "would make 10008 runs (9 checks x 1112 x 1 environment), more than the 10000"},
		{1000, 2, "would make 18000 runs"},
		{1000000000, 1, "s.yaml would make 9000000000 runs"},
		{1 << 62, 1 << 30, "would make 44565841414273689896368472064 runs"},
	} {
		err := CheckSize(f, tc.repeat, tc.variants)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckSize(repeat %d, variants %d) = %v, want %q", tc.repeat, tc.variants, err, tc.want)
		}
	}
}

func TestExclusiveFirst(t *testing.T) {
	f := &File{Checks: []Check{{Name: "a"}, {Name: "x", Exclusive: true}, {Name: "b"}, {Name: "y", Exclusive: true}}}
	got := ""
	for _, st := range ExclusiveFirst(f, Plan(f, 2, 2, false, 0)) {
		got += f.Checks[st.Check].Name
	}
	if want := strings.Repeat("xyab", 4); got != want {
		t.Errorf("order %s, want %s", got, want)
	}
}
