package trace

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
)

// ObserverWire is the record format this package reads: the observer's
// MT_WIRE (observer/observer.h). A library that writes another is refused
// before a run.
const ObserverWire = "2"

// observerSection is the ELF section the observer's marker is in: an
// allocated section, which strip keeps.
const observerSection = ".miotool_observer"

// ObserverIdentity is what an observer library says of itself.
type ObserverIdentity struct {
	// Wire is the record format it writes.
	Wire string
	// Source is the SHA-256 of the source it was built from ("unknown"
	// for a build by hand).
	Source string
}

// ObserverError says why a file cannot serve as the observer, before a
// program runs with it.
type ObserverError struct {
	Path   string
	Reason string
}

func (e *ObserverError) Error() string { return fmt.Sprintf("trace observer %s: %s", e.Path, e.Reason) }

// elfMachines are the ELF machines of the architectures miotool builds
// for.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "386": elf.EM_386, "ppc64le": elf.EM_PPC64,
	"riscv64": elf.EM_RISCV, "s390x": elf.EM_S390, "loong64": elf.EM_LOONGARCH,
}

// ReadObserverIdentity reads the marker of an observer library, after
// checking that the file is an ELF shared library for this machine: an
// *ObserverError says what it is instead.
func ReadObserverIdentity(path string) (ObserverIdentity, error) {
	fail := func(format string, args ...any) (ObserverIdentity, error) {
		return ObserverIdentity{}, &ObserverError{Path: path, Reason: fmt.Sprintf(format, args...)}
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return fail("%v", unwrapPath(err))
	case st.IsDir():
		return fail("is a directory, not the observer library (%s)", ObserverLibrary)
	case !st.Mode().IsRegular():
		return fail("not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return fail("%v", unwrapPath(err))
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || !bytes.Equal(magic, []byte(elf.ELFMAG)) {
		return fail("not an ELF file (%d bytes): not a shared library, not the observer", st.Size())
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return fail("a truncated or damaged ELF file: %v", err)
	}
	if want, ok := elfMachines[runtime.GOARCH]; ok && (ef.Machine != want || ef.Class != elf.ELFCLASS64 && want != elf.EM_386) {
		return fail("an ELF file for %s (%s), not for this machine (%s)", strings.TrimPrefix(ef.Machine.String(), "EM_"),
			ef.Class, strings.TrimPrefix(want.String(), "EM_"))
	}
	if ef.Type != elf.ET_DYN {
		return fail("an ELF %s, not a shared library", strings.ToLower(strings.TrimPrefix(ef.Type.String(), "ET_")))
	}
	sec := ef.Section(observerSection)
	if sec == nil {
		return fail("a shared library, but not miotool's trace observer (it has no %s section)", observerSection)
	}
	data, err := sec.Data()
	if err != nil {
		return fail("a truncated or damaged observer: its %s section: %v", observerSection, err)
	}
	id, ok := parseObserverMarker(string(bytes.TrimRight(data, "\x00")))
	if !ok {
		return fail("a damaged observer: its marker reads %q", data)
	}
	return id, nil
}

// parseObserverMarker reads "miotool-observer wire=W source=S".
func parseObserverMarker(s string) (ObserverIdentity, bool) {
	f := strings.Fields(s)
	if len(f) != 3 || f[0] != "miotool-observer" || !strings.HasPrefix(f[1], "wire=") || !strings.HasPrefix(f[2], "source=") {
		return ObserverIdentity{}, false
	}
	return ObserverIdentity{Wire: strings.TrimPrefix(f[1], "wire="), Source: strings.TrimPrefix(f[2], "source=")}, true
}

// CheckObserver checks, before a run, that path is miotool's observer
// library, for this machine, writing the records this miotool reads: an
// *ObserverError says exactly what it is otherwise (not there, not an ELF
// file, for another machine, not a shared library, not the observer,
// truncated, of another version).
func CheckObserver(path string) error {
	id, err := ReadObserverIdentity(path)
	if err != nil {
		return err
	}
	if id.Wire != ObserverWire {
		return &ObserverError{Path: path, Reason: fmt.Sprintf("miotool's observer of another version (record format %s; "+
			"this miotool reads %s): build it again, or leave --observer out for miotool's own", id.Wire, ObserverWire)}
	}
	return nil
}

// checkBuilt is CheckObserver for a library built from the source whose
// ID is source.
func checkBuilt(path, source string) error {
	if err := CheckObserver(path); err != nil {
		return err
	}
	if id, _ := ReadObserverIdentity(path); id.Source != source {
		return &ObserverError{Path: path, Reason: "built from another source than this miotool's"}
	}
	return nil
}

// cachedObserver is a library of this source in the cache, whichever
// compiler built it (the newest when there are several); "" when none
// passes the check.
func cachedObserver(cache, source string) string {
	libs, _ := filepath.Glob(filepath.Join(cache, "*", ObserverLibrary))
	best, newest := "", int64(0)
	for _, lib := range libs {
		st, err := os.Stat(lib)
		if err != nil || checkBuilt(lib, source) != nil {
			continue
		}
		if t := st.ModTime().UnixNano(); best == "" || t > newest {
			best, newest = lib, t
		}
	}
	return best
}

// isObserver says whether path is a miotool observer library, of any
// version.
func isObserver(path string) bool {
	_, err := ReadObserverIdentity(path)
	return err == nil
}

// ---- what the observer can load into ----

// ProgramProblemKind says why the observer cannot load into a program.
type ProgramProblemKind string

const (
	// ProgramSetID: a set-user-ID or set-group-ID program (or one with
	// file capabilities) that runs with other credentials: the dynamic
	// loader ignores LD_PRELOAD in it, and the observer never loads.
	ProgramSetID ProgramProblemKind = "setid"
	// ProgramStatic: a statically linked program has no dynamic loader;
	// only the dynamically linked programs it starts are observed.
	ProgramStatic ProgramProblemKind = "static"
)

// ProgramProblem is why the observer cannot load into a program, said
// before it runs.
type ProgramProblem struct {
	Program string // the file looked at: the program, or the interpreter its #! line names
	Kind    ProgramProblemKind
	// Refuse says that a trace of it would observe nothing it does: a
	// set-ID program. A statically linked program may start programs
	// that are observed (a trace of a trace), so it is explained, not
	// refused.
	Refuse bool
	Reason string
}

func (p *ProgramProblem) Error() string { return p.Reason }

// CheckProgram says, before a run, why the observer could not load into
// the program at path (resolved as LookProgram resolves it), with env the
// program's environment (its PATH finds a #! line's "env NAME"); nil when
// nothing stops it or the file is of a kind it does not know. A script's
// interpreter is what runs, so it is the one looked at.
func CheckProgram(path string, env []string) *ProgramProblem {
	for depth := 0; depth < 4; depth++ {
		interp, ok := scriptInterpreter(path, lookupEnv(env, "PATH"))
		if !ok {
			break
		}
		if interp == "" {
			return nil
		}
		path = interp
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if p := setIDProblem(path, st); p != nil {
		return p
	}
	ef, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer ef.Close()
	if slices.ContainsFunc(ef.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
		return nil
	}
	if ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return nil
	}
	return &ProgramProblem{Program: path, Kind: ProgramStatic, Reason: fmt.Sprintf("%s is statically linked: the observer "+
		"loads through the dynamic loader, which it has not, so only the dynamically linked programs it starts are observed", path)}
}

// scriptInterpreter reads a #! line: the interpreter's path (ok), "" when
// it cannot be found, not ok when the file is no script.
func scriptInterpreter(path, pathEnv string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := io.ReadFull(f, buf)
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	if !bytes.HasPrefix(line, []byte("#!")) {
		return "", false
	}
	words := strings.Fields(string(line[2:]))
	if len(words) == 0 {
		return "", true
	}
	interp := words[0]
	if filepath.Base(interp) == "env" {
		for _, w := range words[1:] {
			if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
				continue
			}
			return lookPath(w, pathEnv), true
		}
		return "", true
	}
	return interp, true
}

// setIDProblem: the loader runs a program in secure mode when it gains
// credentials: a set-user-ID file of another owner, a set-group-ID file
// of a group this process is not in, or file capabilities.
func setIDProblem(path string, st os.FileInfo) *ProgramProblem {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	refuse := func(what string) *ProgramProblem {
		return &ProgramProblem{Program: path, Kind: ProgramSetID, Refuse: true, Reason: fmt.Sprintf("%s is %s: the dynamic "+
			"loader ignores LD_PRELOAD in a program that gains credentials, so the observer cannot load into it "+
			"(trace a copy without the bit, or run miotool as that user)", path, what)}
	}
	if st.Mode()&os.ModeSetuid != 0 && int(sys.Uid) != os.Geteuid() {
		return refuse(fmt.Sprintf("set-user-ID (owner uid %d)", sys.Uid))
	}
	if st.Mode()&os.ModeSetgid != 0 && int(sys.Gid) != os.Getegid() {
		groups, _ := os.Getgroups()
		if !slices.Contains(groups, int(sys.Gid)) {
			return refuse(fmt.Sprintf("set-group-ID (group gid %d)", sys.Gid))
		}
	}
	if n, err := syscall.Getxattr(path, "security.capability", nil); err == nil && n > 0 {
		return refuse("given file capabilities")
	}
	return nil
}

// ---- the program's environment ----

// Environment variables the observer reads besides EnvSocket and EnvCUPTI.
const (
	// EnvInjection is the program's own CUDA_INJECTION64_PATH, which the
	// observer loads and initializes after itself.
	EnvInjection = "MIOTOOL_TRACE_INJECTION"
	// EnvPython limits reading Python stacks: "held" (only threads that
	// hold the GIL) or "off".
	EnvPython = "MIOTOOL_TRACE_PYTHON"
)

// ObserverEnv is env with what the program needs to run under the
// observer at observer (an absolute path without spaces or colons),
// reporting to the socket at socket:
//   - LD_PRELOAD: the observer first, then the program's own entries in
//     their order (another miotool observer's, an outer trace's, left out:
//     this one reports to both);
//   - CUDA_INJECTION64_PATH: the observer. The program's own value, unless
//     it is a miotool observer, moves to MIOTOOL_TRACE_INJECTION, and the
//     observer loads that library and calls its InitializeInjection after
//     its own: never dropped;
//   - MIOTOOL_TRACE_SOCKET: socket, then an outer trace's sockets, so that
//     a trace of a trace (miotool trace -- miotool trace -- prog) observes
//     the same program in both.
//
// An error is a path the variables cannot carry.
func ObserverEnv(env []string, observer, socket string) ([]string, error) {
	if strings.ContainsAny(observer, " :") || observer == "" {
		return nil, fmt.Errorf("trace observer %q: LD_PRELOAD cannot name a path with a space or a colon (give a link to it)", observer)
	}
	if strings.Contains(socket, ":") || socket == "" {
		return nil, fmt.Errorf("trace socket %q: its path must not hold a colon", socket)
	}
	sockets := []string{socket}
	for _, s := range strings.Split(lookupEnv(env, EnvSocket), ":") {
		if s != "" && !slices.Contains(sockets, s) {
			sockets = append(sockets, s)
		}
	}
	if len(sockets) > maxTraceSockets {
		return nil, errors.New("traces nested more than 4 deep: the observer reports to 4 at most")
	}
	out := env
	if own := lookupEnv(env, "CUDA_INJECTION64_PATH"); own != "" && own != observer && !isObserver(own) {
		out = setEnv(out, EnvInjection, own)
	}
	out = setEnv(out, "CUDA_INJECTION64_PATH", observer)
	out = setEnv(out, EnvSocket, strings.Join(sockets, ":"))
	preload := []string{observer}
	for _, p := range strings.FieldsFunc(lookupEnv(env, "LD_PRELOAD"), func(r rune) bool { return r == ':' || r == ' ' }) {
		if p == observer || (strings.Contains(p, "/") && isObserver(p)) {
			continue
		}
		preload = append(preload, p)
	}
	return setEnv(out, "LD_PRELOAD", strings.Join(preload, ":")), nil
}

// maxTraceSockets is how many sockets the observer sends to
// (MT_MAX_SOCKETS).
const maxTraceSockets = 4
