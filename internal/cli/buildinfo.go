package cli

import (
	"runtime"
	"runtime/debug"
)

// BuildInfo identifies the binary.
type BuildInfo struct {
	Version   string // release version, or "dev"
	Commit    string // VCS revision, or "unknown"
	Modified  bool   // built from a tree with uncommitted changes
	GoVersion string // e.g. go1.26.8
	Platform  string // GOOS/GOARCH
}

// ResolveBuildInfo combines the values linked in with
// -ldflags "-X main.version=... -X main.commit=..." with what the Go
// toolchain recorded in the binary, which fills whatever was not linked in.
func ResolveBuildInfo(version, commit string) BuildInfo {
	info, ok := debug.ReadBuildInfo()
	return resolveBuildInfo(version, commit, info, ok)
}

func resolveBuildInfo(version, commit string, info *debug.BuildInfo, ok bool) BuildInfo {
	b := BuildInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
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
