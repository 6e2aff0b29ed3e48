package amd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/testutil"
)

// The toolchain tests hold miotool's AMD side to a real HIP compiler,
// headers and runtime instead of the stand-ins alone: Debian's ROCm 5.2
// packages (apt-get install hipcc libamdhip64-5; .ci/run installs them
// where it can), or a ROCm install under $ROCM_PATH or /opt/rocm. Each
// skips, naming what is missing, where its part is not installed.

// installHint says how a developer gets the toolchain.
const installHint = "Debian/Ubuntu: apt-get install hipcc libamdhip64-5"

// rocmRoots are where a ROCm install may be, besides the system folders.
func rocmRoots() []string {
	var roots []string
	if r := os.Getenv(EnvROCmPath); r != "" {
		roots = append(roots, r)
	}
	return append(roots, "/opt/rocm")
}

// requireHIPCC returns the HIP compiler driver, or skips t.
func requireHIPCC(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("hipcc"); err == nil {
		return p
	}
	var tried []string
	for _, r := range rocmRoots() {
		p := filepath.Join(r, "bin", "hipcc")
		if isFile(p) {
			return p
		}
		tried = append(tried, p)
	}
	t.Skipf("hipcc is neither on PATH nor at %s (%s)", strings.Join(tried, ", "), installHint)
	return ""
}

// requireHIPHeaders returns the folder holding hip/hip_runtime_api.h, or
// skips t.
func requireHIPHeaders(t *testing.T) string {
	t.Helper()
	var dirs []string
	for _, r := range rocmRoots() {
		dirs = append(dirs, filepath.Join(r, "include"))
	}
	for _, d := range append(dirs, "/usr/include") {
		if isFile(filepath.Join(d, "hip", "hip_runtime_api.h")) && isFile(filepath.Join(d, "hip", "hiprtc.h")) {
			return d
		}
	}
	t.Skipf("hip/hip_runtime_api.h and hip/hiprtc.h are in none of %s (%s)", strings.Join(append(dirs, "/usr/include"), ", "), installHint)
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// kernelSources lists every CUDA/HIP kernel source the module ships (*.cu
// outside testdata and hidden folders), relative to the module root.
func kernelSources(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".cu") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no *.cu kernel source under %s", root)
	}
	return out
}

// kernelArchs are the AMD targets every kernel source must build for:
// CDNA1, CDNA2, CDNA3 (gfx940, the MI300 line's first target this
// compiler knows) and RDNA2.
var kernelArchs = []string{"gfx908", "gfx90a", "gfx940", "gfx1030"}

// hipccArgs builds src for one target as hiprtc does (device code only,
// -O3), with hip_runtime.h standing in for what hiprtc predefines
// (__launch_bounds__ is a hiprtc built-in, not a compiler keyword), and
// every warning an error.
func hipccArgs(arch, src, out string) []string {
	return []string{"--offload-arch=" + arch, "--cuda-device-only", "-O3", "-Wall", "-Werror",
		"-include", "hip/hip_runtime.h", "-c", src, "-o", out}
}

// hipccBuild is one compile's outcome.
type hipccBuild struct {
	err    error
	output string // the compiler's messages
	object []byte // the code object it wrote
}

// hipccBuilds keeps each (compiler, target, source text) compile of this
// test binary: a rerun (-count) of the same text needs no second compile,
// and each takes seconds.
var hipccBuilds sync.Map // string -> func() hipccBuild

func buildWithHIPCC(hipcc, arch, src string) hipccBuild {
	text, err := os.ReadFile(src)
	if err != nil {
		return hipccBuild{err: err}
	}
	key := strings.Join([]string{hipcc, arch, hip.SourceSHA256(string(text))}, "\x00")
	once, _ := hipccBuilds.LoadOrStore(key, sync.OnceValue(func() hipccBuild {
		dir, err := os.MkdirTemp("", "miotool-hipcc-")
		if err != nil {
			return hipccBuild{err: err}
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "code.o")
		msg, err := exec.Command(hipcc, hipccArgs(arch, src, out)...).CombinedOutput()
		b := hipccBuild{err: err, output: strings.TrimSpace(string(msg))}
		if err == nil {
			b.object, b.err = os.ReadFile(out)
		}
		return b
	}))
	return once.(func() hipccBuild)()
}

// isCodeObject says whether data is an AMD GPU code object or a clang
// offload bundle of them, the two forms hipModuleLoadData takes.
func isCodeObject(data []byte) bool {
	return bytes.HasPrefix(data, []byte("__CLANG_OFFLOAD_BUNDLE__")) || bytes.HasPrefix(data, []byte("\x7fELF"))
}

// TestKernelSourcesBuildForAMD compiles every kernel source miotool ships
// for each AMD target with the real HIP compiler and no warning allowed,
// so that code hiprtc would refuse, or warn about, is caught before an AMD
// user meets it. With -short only gfx90a is built.
func TestKernelSourcesBuildForAMD(t *testing.T) {
	hipcc := requireHIPCC(t)
	root := testutil.ModuleRoot(t)
	sources := kernelSources(t, root)
	archs := kernelArchs
	if testing.Short() {
		archs = archs[1:2]
	}
	t.Logf("%s; sources %q", hipcc, sources)
	for _, src := range sources {
		for _, arch := range archs {
			t.Run(src+"/"+arch, func(t *testing.T) {
				t.Parallel()
				b := buildWithHIPCC(hipcc, arch, filepath.Join(root, src))
				if b.err != nil {
					requireTarget(t, hipcc, arch)
					t.Fatalf("hipcc %s: %v\n%s", strings.Join(hipccArgs(arch, src, "…"), " "), b.err, b.output)
				}
				if b.output != "" {
					t.Errorf("the compiler had something to say:\n%s", b.output)
				}
				if !isCodeObject(b.object) {
					t.Errorf("the output (%d bytes) is not a code object", len(b.object))
				}
			})
		}
	}
}

// requireTarget skips t where the compiler cannot build even an empty
// source for arch (no device libraries for it, or a target it does not
// know): that is the install's limit, not the kernel's fault.
func requireTarget(t *testing.T, hipcc, arch string) {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "empty.hip")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if b := buildWithHIPCC(hipcc, arch, empty); b.err != nil {
		t.Skipf("%s cannot build for %s at all here: %v\n%s", hipcc, arch, b.err, b.output)
	}
}

// TestHIPCCWarningsAreErrors checks the flags the kernel test relies on: a
// warning fails the build.
func TestHIPCCWarningsAreErrors(t *testing.T) {
	hipcc := requireHIPCC(t)
	src := filepath.Join(t.TempDir(), "warns.cu")
	text := "extern \"C\" __global__ void __launch_bounds__(64) k(float* p) { int unused; p[0] = 1.0f; }\n"
	if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	b := buildWithHIPCC(hipcc, kernelArchs[1], src)
	if b.err == nil || !strings.Contains(b.output, "-Werror") || !strings.Contains(b.output, "unused") {
		t.Fatalf("a source with an unused variable: %v\n%s", b.err, b.output)
	}
}

// TestStandInDeclarationsMatchRealHeaders compiles testdata/hipapi_check.c
// against the installed HIP headers (Debian's 5.2, or a ROCm install) and
// against the HIP 6.3 reference headers beside the module: the stand-ins'
// declaration of every function miotool binds, marked by the version that
// first declared it so, the R0600 layout the backend reads (HIP 6 and
// later), the status codes it names and the capture modes, states and
// device attributes it passes must be the header's. Wrong declarations,
// marks and offsets must fail.
func TestStandInDeclarationsMatchRealHeaders(t *testing.T) {
	for _, h := range []struct {
		name  string
		flags func(t *testing.T) []string
		major int // 0: whatever is installed
	}{
		{"installed", installedHIPFlags, 0},
		{"reference-6.3", func(t *testing.T) []string { return testutil.HIPReferenceIncludes(t) }, testutil.HIPReferenceMajor},
	} {
		t.Run(h.name, func(t *testing.T) {
			gcc, err := exec.LookPath("gcc")
			if err != nil {
				t.Skip("gcc is not on PATH")
			}
			flags := h.flags(t)
			codes := filepath.Join(t.TempDir(), "codes.h")
			if err := os.WriteFile(codes, []byte(hipNumbersAsserts()), 0o644); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"-std=gnu11", "-fsyntax-only", "-Wall", "-Werror", fmt.Sprintf("-DMIOTOOL_HIP_CODES=%q", codes)}, flags...)
			check := func(layout map[string]int, extra ...string) (string, error) {
				a := append([]string(nil), args...)
				for _, name := range []string{"MIOTOOL_GCN_ARCH_NAME_OFFSET", "MIOTOOL_GCN_ARCH_NAME_LEN", "MIOTOOL_PROPS_SIZE", "MIOTOOL_PROPS_BUFFER"} {
					a = append(a, fmt.Sprintf("-D%s=%d", name, layout[name]))
				}
				out, err := exec.Command(gcc, append(append(a, extra...), "testdata/hipapi_check.c")...).CombinedOutput()
				return string(out), err
			}
			major, err := hipHeaderMajor(gcc, flags)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("HIP %d headers, flags %q", major, flags)
			if h.major != 0 && major != h.major {
				t.Fatalf("the headers say HIP %d, want %d", major, h.major)
			}
			if out, err := check(backendLayout()); err != nil {
				t.Fatalf("the stand-ins or the backend disagree with the real headers: %v\n%s", err, out)
			}

			// The check can fail: a wrong declaration, a mark too new for
			// the header, and (HIP 6 and later) each layout constant off.
			mustFail := []mustFailCheck{
				{what: "a wrong declaration", define: "-DMIOTOOL_MUST_FAIL", want: "hipStreamQuery: the stand-in declares another type than the real header"},
			}
			if major < 7 {
				mustFail = append(mustFail, mustFailCheck{what: "a HIP7 mark on a declaration older headers share", define: "-DMIOTOOL_MUST_FAIL_MARK",
					want: "hipStreamSynchronize: this header already declares it as the stand-ins do"})
			}
			if major >= 6 {
				for name, want := range map[string]string{
					"MIOTOOL_GCN_ARCH_NAME_OFFSET": "the backend reads gcnArchName at another offset",
					"MIOTOOL_GCN_ARCH_NAME_LEN":    "the backend reads another length of gcnArchName",
					"MIOTOOL_PROPS_SIZE":           "hipDeviceProp_tR0600 is not the size the backend knows",
				} {
					off := backendLayout()
					off[name]++
					mustFail = append(mustFail, mustFailCheck{what: name + " one off", layout: off, want: want})
				}
			}
			for _, f := range mustFail {
				layout := f.layout
				if layout == nil {
					layout = backendLayout()
				}
				var extra []string
				if f.define != "" {
					extra = append(extra, f.define)
				}
				out, err := check(layout, extra...)
				if err == nil || !strings.Contains(out, f.want) {
					t.Errorf("%s passed the check, or failed without %q: %v\n%s", f.what, f.want, err, out)
				}
			}
		})
	}
}

// mustFailCheck is a wrong input hipapi_check.c must refuse: a layout
// other than the backend's, or a define that adds a wrong check, and the
// message the refusal must carry.
type mustFailCheck struct {
	what   string
	layout map[string]int
	define string
	want   string
}

// installedHIPFlags are the flags that compile against the installed HIP
// headers; t is skipped where there are none.
func installedHIPFlags(t *testing.T) []string {
	include := requireHIPHeaders(t)
	flags := []string{"-D__HIP_PLATFORM_AMD__"}
	if include != "/usr/include" {
		flags = append(flags, "-isystem", include)
	}
	return flags
}

// backendLayout is how the backend reads hipDeviceProp_tR0600, by the
// names hipapi_check.c gives the numbers.
func backendLayout() map[string]int {
	return map[string]int{
		"MIOTOOL_GCN_ARCH_NAME_OFFSET": propsGCNArchNameOffset,
		"MIOTOOL_GCN_ARCH_NAME_LEN":    propsGCNArchNameLen,
		"MIOTOOL_PROPS_SIZE":           propsStructSize,
		"MIOTOOL_PROPS_BUFFER":         propsBufferSize,
	}
}

// hipHeaderMajor is HIP_VERSION_MAJOR of the headers flags select, as the
// preprocessor sees it.
func hipHeaderMajor(gcc string, flags []string) (int, error) {
	cmd := exec.Command(gcc, append(append([]string{"-E", "-P", "-x", "c"}, flags...), "-")...)
	cmd.Stdin = strings.NewReader("#include <hip/hip_version.h>\nmiotool_hip_major HIP_VERSION_MAJOR\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("reading hip_version.h: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`miotool_hip_major (\d+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("hip_version.h gives no HIP_VERSION_MAJOR:\n%s", out)
	}
	var major int
	fmt.Sscan(string(m[1]), &major)
	return major, nil
}

// notInHIPHeaders are codes hip names that hipError_t has no enumerator
// for: 800 is CUDA's CUDA_ERROR_NOT_PERMITTED, which HIP never returns
// (hipify lists it as unsupported); hip names it the HIP way all the same.
var notInHIPHeaders = map[hip.Code]bool{hip.ErrNotPermitted: true}

// hipNumbersAsserts states, as C assertions, that the status codes hip
// names, the capture modes and states it passes by number and the device
// attributes the backend reads have HIP's values.
func hipNumbersAsserts() string {
	var b strings.Builder
	for c := hip.Success; c <= hip.ErrUnknown; c++ {
		if c.Known() && !notInHIPHeaders[c] {
			fmt.Fprintf(&b, "_Static_assert(%s == %d, %q);\n", c.Name(hip.DialectHIP), int(c), c.Name(hip.DialectHIP))
		}
	}
	modes := map[hip.CaptureMode]string{hip.CaptureModeGlobal: "Global", hip.CaptureModeThreadLocal: "ThreadLocal", hip.CaptureModeRelaxed: "Relaxed"}
	for _, m := range hip.CaptureModes {
		fmt.Fprintf(&b, "_Static_assert(hipStreamCaptureMode%s == %d, \"capture mode %s\");\n", modes[m], int(m), m)
	}
	for s, name := range map[hip.CaptureStatus]string{hip.CaptureStatusNone: "None", hip.CaptureStatusActive: "Active", hip.CaptureStatusInvalidated: "Invalidated"} {
		fmt.Fprintf(&b, "_Static_assert(hipStreamCaptureStatus%s == %d, \"capture status %s\");\n", name, int(s), name)
	}
	for _, a := range []struct {
		name  string
		value int
	}{{"ClockRate", attrClockRate}, {"MultiprocessorCount", attrMultiprocessors}, {"WarpSize", attrWarpSize}} {
		fmt.Fprintf(&b, "_Static_assert(hipDeviceAttribute%s == %d, \"device attribute %s\");\n", a.name, a.value, a.name)
	}
	return b.String()
}

// TestRealHIP5Runtime loads the real libamdhip64.so.5 through the backend's
// own loader: every symbol of the binding table that HIP 5 has resolves,
// the ones it lacks are named, its device discovery fails through the
// backend's error mapping with the runtime's own code and name where there
// is no AMD device, and Open's error says the runtime is too old.
func TestRealHIP5Runtime(t *testing.T) {
	p, err := probeRuntime(legacyRuntimeSearch())
	if err != nil {
		t.Skipf("no HIP 5 runtime here (%s): %v", installHint, err)
	}
	t.Logf("%s: HIP %s, lacks %q, device discovery: %v", p.rt.Lib.Loaded, formatHIPVersion(p.version), p.missing, p.discovery)
	if p.major() != 5 {
		t.Fatalf("libamdhip64.so.5 says it is HIP %s", formatHIPVersion(p.version))
	}
	var l runtimeLib
	if want := []string{"hipGetDevicePropertiesR0600", "hipLaunchHostFunc"}; !reflect.DeepEqual(p.missing, want) {
		t.Fatalf("of the %d symbols bound, HIP 5 lacks %q; want exactly %q", len(l.symbols()), p.missing, want)
	}

	if _, err := os.Stat("/dev/kfd"); err == nil {
		t.Logf("an AMD kernel driver is present: device discovery gave %v", p.discovery)
	} else {
		var he *hip.Error
		if !errors.As(p.discovery, &he) || he.Dialect != hip.DialectHIP || (he.Op != "Init" && he.Op != "DeviceGetCount") || he.Code == hip.Success {
			t.Fatalf("without /dev/kfd device discovery gave %#v, want a HIP-dialect *hip.Error from hipInit or hipGetDeviceCount", p.discovery)
		}
		// The name is the runtime's own for the code it returned.
		name := dl.GoString(dl.CallPtr(p.rt.api.getErrorName, uintptr(he.Code)))
		if name == "" || name == "hipErrorUnknown" || !strings.Contains(he.Error(), fmt.Sprintf("%s (%d)", name, int(he.Code))) {
			t.Fatalf("device discovery %q does not carry the runtime's name %q for code %d", he, name, int(he.Code))
		}
	}

	// hiprtc of HIP 5 is inside the runtime library (its hiprtcVersion
	// answers 9.0 in 5.2, a number of its own).
	rtc := loadHIPRTC(dl.SearchSpec{Name: "libhiprtc", Sonames: []string{filepath.Base(p.rt.Lib.Loaded)}, Dirs: []string{filepath.Dir(p.rt.Lib.Loaded)}, SkipLoaderPath: true})
	if !rtc.Available() {
		t.Errorf("hiprtc in %s: %v", p.rt.Lib.Loaded, rtc.Err)
	}

	_, err = openRuntime(emptySearch(t), legacyRuntimeSearch())
	var ue *hip.UnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("openRuntime with only HIP 5: %T %v", err, err)
	}
	for _, want := range []string{fmt.Sprintf("ROCm 5.%d (HIP 5.", p.version/100000%100), p.rt.Lib.Loaded, "is too old", "HIP 6.0 or newer",
		"hipGetDevicePropertiesR0600", "hipLaunchHostFunc"} {
		if !strings.Contains(ue.Reason, want) {
			t.Errorf("reason %q lacks %q", ue.Reason, want)
		}
	}
	if lib := ue.Libraries[0]; lib.Loaded != p.rt.Lib.Loaded || !strings.HasPrefix(lib.Version, "5.") {
		t.Errorf("library record %+v", lib)
	}
	if p.discovery != nil && !strings.HasSuffix(ue.Reason, p.discovery.Error()) {
		t.Errorf("reason %q does not end with the device discovery's %q", ue.Reason, p.discovery)
	}
}
