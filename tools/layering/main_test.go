package main

import (
	"strings"
	"testing"
)

func TestClimbs(t *testing.T) {
	for _, tt := range []struct {
		from, to string
		want     string // a word of the reason; "" when allowed
	}{
		{"internal/cmd/capture", "internal/cli", ""},
		{"internal/cmd/capture", "internal/cmd/matrix", ""},
		{"internal/cmd/replay", "internal/cmd/capture", "another command"},
		{"internal/cmd/replay/sub", "internal/cmd/replay", ""},
		{"internal/cmd/root", "internal/cmd/trace", ""},
		{"internal/cmd/trace", "internal/cmd/root", "room above"},
		{"internal/cli", "internal/cmd/matrix", "room above"},
		{"internal/report", "internal/cli", "room above"},
		{"internal/suite", "internal/report", ""},
		{"internal/trace", "internal/report", "room above"},
		{"internal/scenario/capture", "internal/streams", ""},
		{"internal/streams", "internal/cli", "room above"},
		{"cmd/miotool", "internal/cmd/root", ""},
		{"internal/cmd/matrix", "internal/cmd/capture", "room above"},
	} {
		got := climbs(tt.from, tt.to)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s -> %s: %q, want %q", tt.from, tt.to, got, tt.want)
		}
	}
}

func TestCheckSkipsTestKitsInTests(t *testing.T) {
	mod := &struct{ Path string }{"m"}
	pkgs := []pkg{
		{ImportPath: "m/internal/streams", Module: mod, TestImports: []string{"m/internal/testutil", "m/internal/cli"}},
		{ImportPath: "m/internal/cmd/find", Module: mod, XTestImports: []string{"m/internal/cmd/cmdtest", "m/internal/cmd/capture"}},
	}
	got := check(pkgs)
	if len(got) != 2 || !strings.Contains(got[0], "internal/cmd/find tests import internal/cmd/capture") ||
		!strings.Contains(got[1], "internal/streams tests import internal/cli") {
		t.Errorf("offences %q", got)
	}
}
