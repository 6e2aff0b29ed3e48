// Command gen-ptx writes the PTX that the CUDA backend loads where NVRTC is
// not installed: every kernel source of miotool (internal/conv's kernels.cu,
// internal/scenario/stress's stress_kernels.cu) compiled by NVRTC for a virtual
// architecture, with the SHA-256 of the source in its first line so that a
// test can tell when the committed PTX no longer matches the source. Run it
// on a machine with NVRTC (scripts/gen-ptx.sh).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"miotool/internal/conv"
	"miotool/internal/hip"
	"miotool/internal/hip/cuda"
	"miotool/internal/scenario/stress"
)

// target is one kernel source and where its PTX goes, relative to the
// module root.
type target struct {
	src  *hip.KernelSource
	path string
}

func main() {
	arch := flag.String("arch", conv.PTXArch, "virtual architecture to compile for")
	root := flag.String("root", ".", "module root the PTX files are written under")
	flag.Parse()
	ver, _ := cuda.NVRTCVersion()
	for _, t := range []target{
		{conv.Source(), "internal/conv/kernels.ptx"},
		{stress.Source(), "internal/scenario/stress/stress_kernels.ptx"},
	} {
		if err := write(t, *root, *arch, ver); err != nil {
			fmt.Fprintln(os.Stderr, "gen-ptx:", err)
			os.Exit(1)
		}
	}
}

func write(t target, root, arch, ver string) error {
	ptx, err := cuda.CompilePTX(t.src, arch)
	if err != nil {
		return fmt.Errorf("%s: %w", t.src.Name, err)
	}
	file := strings.TrimSuffix(filepath.Base(t.path), ".ptx") + ".cu"
	header := hip.PTXHeader(file, hip.SourceSHA256(t.src.Text), ver, arch)
	out := filepath.Join(root, t.path)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(out, []byte(header+"\n"+ptx), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d bytes, NVRTC %s, %s)\n", out, len(ptx), ver, arch)
	return nil
}
