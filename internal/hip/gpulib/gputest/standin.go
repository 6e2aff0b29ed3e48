package gputest

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"miotool/internal/dl"
)

// standinHeader is the C the stand-ins share (standin.h); the build puts
// it on their include path.
//
//go:embed standin.h
var standinHeader []byte

// StandIn is one C stand-in for a runtime library.
type StandIn struct {
	Source string // relative to the package folder, e.g. testdata/mockcuda.c
	// Path is where it is built, relative to the build folder: the folder
	// layout and soname the backend searches for (lib/libamdhip64.so.7).
	Path string
	// Controls are the stand-in's own functions (mock_*) the tests call;
	// Build binds them from the very file the backend opens, which dlopen
	// shares with it.
	Controls []dl.Symbol
}

// StandIns builds a package's stand-ins with gcc, once per test binary,
// into a temporary folder. Tests that need them call Require, which skips
// where there is no C compiler; TestMain calls Remove.
type StandIns struct {
	Libs []StandIn

	once sync.Once
	dir  string
	skip error // why the stand-ins cannot be built here
	err  error // why building them failed
}

// Require builds the stand-ins on first use. It skips t where gcc or the
// sources are missing and fails it where a build fails.
func (s *StandIns) Require(t testing.TB) {
	t.Helper()
	s.once.Do(s.build)
	if s.skip != nil {
		t.Skipf("stand-in libraries not built: %v", s.skip)
	}
	if s.err != nil {
		t.Fatalf("stand-in libraries: %v", s.err)
	}
}

func (s *StandIns) build() {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		s.skip = err
		return
	}
	for _, l := range s.Libs {
		if _, err := os.Stat(l.Source); err != nil {
			s.skip = fmt.Errorf("run the tests from the package folder: %w", err)
			return
		}
	}
	if s.dir, s.err = os.MkdirTemp("", "miotool-standin-"); s.err != nil {
		return
	}
	if s.err = os.WriteFile(filepath.Join(s.dir, "standin.h"), standinHeader, 0o644); s.err != nil {
		return
	}
	for _, l := range s.Libs {
		if s.err = s.buildOne(gcc, l); s.err != nil {
			return
		}
	}
}

func (s *StandIns) buildOne(gcc string, l StandIn) error {
	out := filepath.Join(s.dir, l.Path)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	msg, err := exec.Command(gcc, "-shared", "-fPIC", "-O1", "-Wall", "-I", s.dir, "-o", out, l.Source, "-lpthread").CombinedOutput()
	if err != nil {
		return errors.New("building " + l.Source + ": " + err.Error() + "\n" + string(msg))
	}
	if len(l.Controls) == 0 {
		return nil
	}
	h, err := dl.OpenPath(out, dl.DlopenMode)
	if err != nil {
		return err
	}
	return dl.Bind(dl.Lookup(h), "stand-in "+filepath.Base(out), l.Controls)
}

// Path is where stand-in i was built.
func (s *StandIns) Path(i int) string { return filepath.Join(s.dir, s.Libs[i].Path) }

// Dir is the build folder.
func (s *StandIns) Dir() string { return s.dir }

// Spec finds stand-in i, and only it, under the report label name.
func (s *StandIns) Spec(i int, name string) dl.SearchSpec {
	p := s.Path(i)
	return dl.SearchSpec{Name: name, Sonames: []string{filepath.Base(p)}, Dirs: []string{filepath.Dir(p)}, SkipLoaderPath: true}
}

// Remove deletes the build folder.
func (s *StandIns) Remove() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
