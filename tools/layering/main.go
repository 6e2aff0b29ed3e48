// Command layering checks that the module's imports go one way, down the
// rooms docs/architecture.md draws: the binary, the command tree, the
// commands, what commands share, the plumbing every command uses, the suite
// runner, the result model, and below them the mechanisms. A package never
// imports one in a room above its own, and a command never imports another
// command (what two commands share lives in a package of its own). Test
// files count too, apart from test kits, which any test may use.
//
//	go run ./tools/layering [PACKAGES]    (default: ./...)
//
// It names each import that climbs, one line per offence, and exits 1 when
// there is any.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		args = []string{"./..."}
	}
	pkgs, err := list(args)
	if err != nil {
		fmt.Fprintf(stderr, "layering: %v\n", err)
		return 2
	}
	offences := check(pkgs)
	for _, o := range offences {
		fmt.Fprintln(stdout, o)
	}
	if len(offences) > 0 {
		fmt.Fprintf(stderr, "layering: %d imports climb a room or cross from one command to another (docs/architecture.md)\n", len(offences))
		return 1
	}
	return 0
}

// pkg is what go list says of a package that the check needs.
type pkg struct {
	ImportPath   string
	Module       *struct{ Path string }
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func list(args []string) ([]pkg, error) {
	cmd := exec.Command("go", append([]string{"list", "-e", "-json=ImportPath,Module,Imports,TestImports,XTestImports"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 || pkgs[0].Module == nil {
		return nil, errors.New("no packages of a module")
	}
	return pkgs, nil
}

// rooms are the module's rooms, top first, each a list of path prefixes
// below the module path; a package is in the room of its longest matching
// prefix. Everything under internal/ that no room names is a mechanism.
var rooms = []struct {
	name     string
	prefixes []string
}{
	{"the binary and developer tools", []string{"cmd/", "tools/"}},
	{"the command tree", []string{"internal/cmd/root"}},
	{"a command", []string{"internal/cmd/"}},
	{"what commands share", []string{"internal/cmd/libtarget", "internal/cmd/matrix", "internal/cmd/cmdtest"}},
	{"the plumbing of every command", []string{"internal/cli"}},
	{"the suite runner", []string{"internal/suite"}},
	{"the result model", []string{"internal/report"}},
	{"a mechanism", []string{"internal/"}},
}

// testKits may be imported by any package's tests: they exist for tests.
var testKits = []string{"internal/cmd/cmdtest", "internal/testutil"}

// room is the index of path's room (module-relative) and whether it is a
// command, -1 for a path outside the module's rooms.
func room(rel string) int {
	best, bestLen := -1, -1
	for i, r := range rooms {
		for _, p := range r.prefixes {
			match := rel == strings.TrimSuffix(p, "/") || strings.HasPrefix(rel, p) ||
				(!strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p+"/"))
			if match && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best
}

// command is the command a path belongs to ("capture" for
// internal/cmd/capture/...), "" when it is not in a command's room.
func command(rel string) string {
	if room(rel) != 2 {
		return ""
	}
	rest := strings.TrimPrefix(rel, "internal/cmd/")
	name, _, _ := strings.Cut(rest, "/")
	return name
}

func isTestKit(rel string) bool {
	for _, k := range testKits {
		if rel == k || strings.HasPrefix(rel, k+"/") {
			return true
		}
	}
	return false
}

// check returns the offences of pkgs, sorted.
func check(pkgs []pkg) []string {
	var offences []string
	for _, p := range pkgs {
		module := p.Module.Path + "/"
		from := strings.TrimPrefix(p.ImportPath, module)
		for _, imps := range []struct {
			list []string
			test bool
		}{{p.Imports, false}, {p.TestImports, true}, {p.XTestImports, true}} {
			for _, imp := range imps.list {
				if !strings.HasPrefix(imp, module) || imp == p.ImportPath {
					continue
				}
				to := strings.TrimPrefix(imp, module)
				if imps.test && isTestKit(to) {
					continue
				}
				if why := climbs(from, to); why != "" {
					kind := "imports"
					if imps.test {
						kind = "tests import"
					}
					offences = append(offences, fmt.Sprintf("%s %s %s: %s", from, kind, to, why))
				}
			}
		}
	}
	sort.Strings(offences)
	return offences
}

// climbs says why from may not import to, "" when it may.
func climbs(from, to string) string {
	rf, rt := room(from), room(to)
	if rf < 0 || rt < 0 {
		return ""
	}
	switch {
	case rt < rf:
		return fmt.Sprintf("%s imports %s, a room above it", rooms[rf].name, rooms[rt].name)
	case rf == 2 && rt == 2 && command(from) != command(to):
		return "a command imports another command; move what they share to a package of its own"
	}
	return ""
}
