package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "true"}}}
	tagged := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}}
	cases := []struct {
		name            string
		version, commit string
		info            *debug.BuildInfo
		want            Info
	}{
		{"linked in", "1.2.0", "feed", vcs, Info{Version: "1.2.0", Commit: "feed", GoVersion: "go1.26.8"}},
		{"vcs fallback", "", "", vcs, Info{Version: "dev", Commit: "0123abc", Modified: true, GoVersion: "go1.26.8"}},
		{"module version", "", "", tagged, Info{Version: "v1.4.0", Commit: "unknown", GoVersion: "go1.26.8"}},
		{"nothing", "", "", nil, Info{Version: "dev", Commit: "unknown"}},
	}
	for _, c := range cases {
		got := resolve(c.version, c.commit, c.info, c.info != nil)
		if c.want.GoVersion == "" {
			c.want.GoVersion = got.GoVersion // the running toolchain's
		}
		c.want.Platform = got.Platform
		if got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}
