package hip

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func TestMatchingPTX(t *testing.T) {
	const text = "extern \"C\" __global__ void k() {}\n"
	good := PTXHeader("k.cu", SourceSHA256(text), "13.0", "compute_75") + "\n.version 9.0\n"
	for _, tt := range []struct {
		name, file, text, ptx string
		want                  bool
	}{
		{"matches", "k.cu", text, good, true},
		{"source changed", "k.cu", text + "// edit\n", good, false},
		{"other file", "other.cu", text, good, false},
		{"placeholder", "k.cu", text, "// miotool: k.cu not generated yet\n", false},
		{"empty", "k.cu", text, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := MatchingPTX(tt.file, tt.text, tt.ptx); (got != "") != tt.want || (tt.want && got != tt.ptx) {
				t.Fatalf("MatchingPTX = %q, want match %v", got, tt.want)
			}
		})
	}
}

// sidecar is what scripts/gen-cubin.sh writes for a cubin of image made
// from text.
func sidecar(file, text, name, arch string, image []byte) string {
	return CubinSidecarHeader + "\n" +
		"arch: " + arch + "\n" +
		"source: " + file + " sha256 " + SourceSHA256(text) + "\n" +
		"ptx: k.ptx sha256 0123\n" +
		"cubin: " + name + " sha256 " + SourceSHA256(string(image)) + "\n" +
		"nvcc: Cuda compilation tools, release 13.0, V13.0.88\n" +
		"command: nvcc --cubin -arch=" + arch + " -o " + name + " " + file + "\n"
}

func TestMatchingCubins(t *testing.T) {
	const text = "extern \"C\" __global__ void k() {}\n"
	image := []byte("\x7fELF cubin for sm_90")
	good := sidecar("k.cu", text, "k.sm_90.cubin", "sm_90", image)
	for _, tt := range []struct {
		name    string
		files   fstest.MapFS
		want    []string // archs used
		problem string   // in the one check's Problem; "" for none
	}{
		{"none committed", fstest.MapFS{"k.cu": {Data: []byte(text)}}, nil, ""},
		{"matches", fstest.MapFS{"k.sm_90.cubin": {Data: image}, "k.sm_90.cubin.txt": {Data: []byte(good)}}, []string{"sm_90"}, ""},
		{"source changed", fstest.MapFS{"k.sm_90.cubin": {Data: image},
			"k.sm_90.cubin.txt": {Data: []byte(sidecar("k.cu", text+"// edit\n", "k.sm_90.cubin", "sm_90", image))}}, nil, "records source"},
		{"cubin bytes changed", fstest.MapFS{"k.sm_90.cubin": {Data: append([]byte("x"), image...)}, "k.sm_90.cubin.txt": {Data: []byte(good)}}, nil, "records cubin"},
		{"renamed to another arch", fstest.MapFS{"k.sm_80.cubin": {Data: image}, "k.sm_80.cubin.txt": {Data: []byte(good)}}, nil, "records arch"},
		{"another source's", fstest.MapFS{"k.sm_90.cubin": {Data: image},
			"k.sm_90.cubin.txt": {Data: []byte(sidecar("other.cu", text, "k.sm_90.cubin", "sm_90", image))}}, nil, "records source"},
		{"no sidecar", fstest.MapFS{"k.sm_90.cubin": {Data: image}}, nil, "k.sm_90.cubin.txt"},
		{"not a sidecar", fstest.MapFS{"k.sm_90.cubin": {Data: image}, "k.sm_90.cubin.txt": {Data: []byte("arch: sm_90\n")}}, nil, "does not start with"},
		{"another file's cubin is not this one's", fstest.MapFS{"other_k.sm_90.cubin": {Data: image}, "other_k.sm_90.cubin.txt": {Data: []byte(good)}}, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cubins, checks := MatchingCubins(tt.files, "k.cu", text)
			var got []string
			for arch, img := range cubins {
				got = append(got, arch)
				if !bytes.Equal(img, image) {
					t.Errorf("the %s cubin handed out is not the committed one", arch)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("cubins used for %v, want %v (checks %+v)", got, tt.want, checks)
			}
			switch {
			case tt.problem == "" && slices.ContainsFunc(checks, func(c CubinCheck) bool { return c.Problem != "" }):
				t.Errorf("checks %+v, want no problem", checks)
			case tt.problem != "" && (len(checks) != 1 || !strings.Contains(checks[0].Problem, tt.problem)):
				t.Errorf("checks %+v, want one whose problem mentions %q", checks, tt.problem)
			}
		})
	}
}

// fakeNVCC stands in for nvcc: it answers --version and writes, for
// "-arch=A -o OUT SRC", a file OUT holding A and SRC's text.
const fakeNVCC = `#!/bin/sh
if [ "$1" = --version ]; then
	echo "nvcc: NVIDIA (R) Cuda compiler driver"
	echo "Cuda compilation tools, release 13.0, V13.0.88"
	exit 0
fi
while [ $# -gt 0 ]; do
	case $1 in
	-o) out=$2; shift 2 ;;
	-arch=*) arch=${1#-arch=}; shift ;;
	*.cu) src=$1; shift ;;
	*) shift ;;
	esac
done
printf 'FAKECUBIN %s\n' "$arch" >"$out"
cat "$src" >>"$out"
`

// scripts/gen-cubin.sh writes, for every kernel source, a cubin and a
// sidecar that MatchingCubins takes for that source's text, and records
// the command that ran.
func TestGenCubinWritesWhatMatchingCubinsTakes(t *testing.T) {
	for _, tool := range []string{"bash", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	dir := t.TempDir()
	nvcc := filepath.Join(dir, "nvcc")
	if err := os.WriteFile(nvcc, []byte(fakeNVCC), 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "out")
	cmd := exec.Command("bash", "../../scripts/gen-cubin.sh", "sm_90", root)
	cmd.Env = append(os.Environ(), "NVCC="+nvcc)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen-cubin.sh: %v\n%s", err, out)
	}
	for _, src := range []string{"internal/conv/kernels.cu", "internal/scenario/stress/stress_kernels.cu"} {
		text, err := os.ReadFile(filepath.Join("../..", src))
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Base(src)
		cubins, checks := MatchingCubins(os.DirFS(filepath.Join(root, filepath.Dir(src))), file, string(text))
		if len(checks) != 1 || checks[0].Problem != "" {
			t.Fatalf("%s: checks %+v, want one cubin without a problem", src, checks)
		}
		if want := "FAKECUBIN sm_90\n" + string(text); string(cubins["sm_90"]) != want {
			t.Errorf("%s: the sm_90 cubin handed out is not what nvcc wrote", src)
		}
		side, err := os.ReadFile(filepath.Join(root, filepath.Dir(src), checks[0].File+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(file, ".cu")
		for _, want := range []string{
			"command: nvcc --cubin -arch=sm_90 -o " + base + ".sm_90.cubin " + file + "\n",
			"nvcc: Cuda compilation tools, release 13.0, V13.0.88\n",
			"ptx: " + base + ".ptx sha256 ",
		} {
			if !strings.Contains(string(side), want) {
				t.Errorf("%s's sidecar lacks %q:\n%s", src, want, side)
			}
		}
	}
	// A bad architecture is refused before anything is compiled.
	bad := exec.Command("bash", "../../scripts/gen-cubin.sh", "compute_90", filepath.Join(dir, "bad"))
	bad.Env = append(os.Environ(), "NVCC="+nvcc)
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "not of the form sm_XY") {
		t.Errorf("gen-cubin.sh compute_90: %v, %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad")); !os.IsNotExist(err) {
		t.Errorf("gen-cubin.sh with a bad architecture wrote %s", filepath.Join(dir, "bad"))
	}
}
