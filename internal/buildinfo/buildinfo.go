// Package buildinfo identifies the binary: its version, commit and Go
// version, from what was linked in and what the toolchain recorded.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info identifies the binary.
type Info struct {
	Version   string // release version, or "dev"
	Commit    string // VCS revision, or "unknown"
	Modified  bool   // built from a tree with uncommitted changes
	GoVersion string // e.g. go1.26.8
	Platform  string // GOOS/GOARCH
}

// Resolve combines the values linked in with
// -ldflags "-X main.version=... -X main.commit=..." with what the Go
// toolchain recorded in the binary, which fills whatever was not linked in.
func Resolve(version, commit string) Info {
	info, ok := debug.ReadBuildInfo()
	return resolve(version, commit, info, ok)
}

func resolve(version, commit string, info *debug.BuildInfo, ok bool) Info {
	b := Info{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if ok && info != nil {
		if info.GoVersion != "" {
			b.GoVersion = info.GoVersion
		}
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		// The modified mark belongs to the recorded revision, so it is used
		// only when that revision is.
		if b.Commit == "" {
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					b.Commit = s.Value
				case "vcs.modified":
					b.Modified = s.Value == "true"
				}
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}
