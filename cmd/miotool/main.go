// Command miotool reproduces, checks and reports GPU library failures
// around find, stream capture, graph replay and threads.
package main

import (
	"os"

	"miotool/internal/buildinfo"
	"miotool/internal/cli"
	"miotool/internal/cmd/root"
)

// Set at link time: go build -ldflags "-X main.version=1.2.0 -X main.commit=$(git rev-parse HEAD)".
// When empty, the version control information Go records in the binary is used.
var (
	version string
	commit  string
)

func main() {
	f := cli.NewFactory(cli.System(), buildinfo.Resolve(version, commit))
	os.Exit(cli.Main(f, os.Args[1:], root.New))
}
