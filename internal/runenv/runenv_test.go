package runenv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	cfgDir := func() (string, error) { return "/home/u/.config", nil }
	noDir := func() (string, error) { return "", errors.New("$HOME is not defined") }
	cases := []struct {
		name string
		env  map[string]string
		dir  func() (string, error)
		want Env
		// per variable: source and a fragment of the note
		sources map[string]Source
		notes   map[string]string
		values  map[string]string // the value shown, where it matters
		invalid []string          // the variables Err names
	}{
		{name: "defaults", dir: cfgDir,
			want:    Env{HWQueues: 4, NaiveTimeoutPercent: 300, UserDBPath: "/home/u/.config/miotool/db", FindMode: FindModeNormal},
			sources: map[string]Source{"GPU_MAX_HW_QUEUES": FromDefault, EnvNaiveTimeout: FromDefault, EnvUserDBPath: FromDefault, EnvFindMode: FromDefault}},
		{name: "all set", dir: cfgDir,
			env:     map[string]string{"GPU_MAX_HW_QUEUES": "8", EnvNaiveTimeout: "0", EnvUserDBPath: "~/db", EnvFindMode: "normal", "HOME": "/home/u"},
			want:    Env{HWQueues: 8, NaiveTimeoutPercent: 0, UserDBPath: "/home/u/db", FindMode: FindModeNormal},
			sources: map[string]Source{"GPU_MAX_HW_QUEUES": FromEnv, EnvNaiveTimeout: FromEnv, EnvUserDBPath: FromEnv, EnvFindMode: FromEnv},
			notes:   map[string]string{EnvNaiveTimeout: "is off"}},
		{name: "ignored values", dir: cfgDir,
			env:     map[string]string{"GPU_MAX_HW_QUEUES": "-1", EnvNaiveTimeout: "fast", EnvUserDBPath: "", EnvFindMode: "4"},
			want:    Env{HWQueues: 4, NaiveTimeoutPercent: 300, UserDBPath: "/home/u/.config/miotool/db", FindMode: FindModeNormal},
			sources: map[string]Source{"GPU_MAX_HW_QUEUES": FromDefault, EnvNaiveTimeout: FromEnvInvalid, EnvUserDBPath: FromDefault, EnvFindMode: FromEnvInvalid},
			notes:   map[string]string{"GPU_MAX_HW_QUEUES": "warning: GPU_MAX_HW_QUEUES=-1 is not positive", EnvNaiveTimeout: "error: MIOPEN_NAIVE_TIMEOUT=\"fast\" is not a whole number", EnvUserDBPath: "warning", EnvFindMode: "error: MIOPEN_FIND_MODE=\"4\" is not a find mode"},
			values:  map[string]string{EnvNaiveTimeout: "fast", EnvFindMode: "4"},
			invalid: []string{EnvNaiveTimeout, EnvFindMode}},
		{name: "huge and negative naive timeouts", dir: cfgDir, env: map[string]string{EnvNaiveTimeout: "1e99"},
			want:    Env{HWQueues: 4, NaiveTimeoutPercent: 300, UserDBPath: "/home/u/.config/miotool/db", FindMode: FindModeNormal},
			sources: map[string]Source{EnvNaiveTimeout: FromEnvInvalid}, values: map[string]string{EnvNaiveTimeout: "1e99"},
			invalid: []string{EnvNaiveTimeout}},
		{name: "negative naive timeout", dir: cfgDir, env: map[string]string{EnvNaiveTimeout: "-5"},
			want:    Env{HWQueues: 4, NaiveTimeoutPercent: 300, UserDBPath: "/home/u/.config/miotool/db", FindMode: FindModeNormal},
			sources: map[string]Source{EnvNaiveTimeout: FromEnvInvalid}, notes: map[string]string{EnvNaiveTimeout: "is negative"},
			invalid: []string{EnvNaiveTimeout}},
		{name: "find mode by number", dir: cfgDir, env: map[string]string{EnvFindMode: "3"},
			want: Env{HWQueues: 4, NaiveTimeoutPercent: 300, UserDBPath: "/home/u/.config/miotool/db", FindMode: FindModeHybrid}},
		{name: "no config dir", dir: noDir,
			want:  Env{HWQueues: 4, NaiveTimeoutPercent: 300, UserDBPath: "", FindMode: FindModeNormal},
			notes: map[string]string{EnvUserDBPath: "no user config directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
			got := Read(lookup, c.dir)
			if got.HWQueues != c.want.HWQueues || got.NaiveTimeoutPercent != c.want.NaiveTimeoutPercent ||
				got.UserDBPath != c.want.UserDBPath || got.FindMode != c.want.FindMode {
				t.Errorf("got %+v", got)
			}
			if len(got.Settings) != 4 {
				t.Fatalf("%d settings, want 4", len(got.Settings))
			}
			for _, s := range got.Settings {
				if want, ok := c.sources[s.Name]; ok && s.Source != want {
					t.Errorf("%s source %s, want %s", s.Name, s.Source, want)
				}
				if want, ok := c.notes[s.Name]; ok && !strings.Contains(s.Note, want) {
					t.Errorf("%s note %q lacks %q", s.Name, s.Note, want)
				}
				if want, ok := c.values[s.Name]; ok && s.Value != want {
					t.Errorf("%s shown as %q, want %q", s.Name, s.Value, want)
				}
				// A refused value claims no fallback.
				if s.Err != nil && strings.Contains(s.Note, "using") {
					t.Errorf("%s note %q claims a fallback", s.Name, s.Note)
				}
			}
			err := got.Err()
			if (err != nil) != (len(c.invalid) > 0) {
				t.Fatalf("Err() = %v, want errors naming %v", err, c.invalid)
			}
			for _, name := range c.invalid {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("Err() = %v, lacks %s", err, name)
				}
			}
		})
	}
}

// Unset, MIOPEN_FIND_MODE is find's own default, NORMAL, which re-benchmarks
// a find-db hit; the note says so and names MIOpen's different default.
func TestFindModeDefaultIsFindsOwn(t *testing.T) {
	env := Read(func(string) (string, bool) { return "", false }, func() (string, error) { return "/c", nil })
	if env.FindMode != FindModeNormal {
		t.Errorf("default find mode %v, want NORMAL", env.FindMode)
	}
	for _, s := range env.Settings {
		if s.Name == EnvFindMode && (s.Value != "NORMAL (1)" || !strings.Contains(s.Note, "even when the find-db has a record") || !strings.Contains(s.Note, "DYNAMIC_HYBRID")) {
			t.Errorf("MIOPEN_FIND_MODE shown as %q, note %q", s.Value, s.Note)
		}
	}
}

// MIOPEN_USER_DB_PATH is refused exactly where find refuses it.
func TestUserDBErr(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		bad  bool
	}{
		{"", false},
		{dir, false},
		{filepath.Join(dir, "not-yet", "db"), false},
		{file, true},
		{filepath.Join(file, "db"), true},
	} {
		err := Env{UserDBPath: tt.path}.UserDBErr()
		if (err != nil) != tt.bad || (err != nil && !strings.HasPrefix(err.Error(), EnvUserDBPath+"=")) {
			t.Errorf("%q: %v, want refused %v", tt.path, err, tt.bad)
		}
	}
}
