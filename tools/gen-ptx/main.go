// Command gen-ptx writes the PTX that the CUDA backend loads where NVRTC is
// not installed: internal/conv's kernels.cu compiled by NVRTC for a virtual
// architecture, with the SHA-256 of the source in its first line so that a
// test can tell when the committed PTX no longer matches the source. Run it
// on a machine with NVRTC (scripts/gen-ptx.sh).
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"

	"miotool/internal/conv"
	"miotool/internal/hip/cuda"
)

func main() {
	arch := flag.String("arch", conv.PTXArch, "virtual architecture to compile for")
	out := flag.String("o", "internal/conv/kernels.ptx", "output file")
	flag.Parse()
	src := conv.Source()
	ptx, err := cuda.CompilePTX(src, *arch)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-ptx:", err)
		os.Exit(1)
	}
	ver, _ := cuda.NVRTCVersion()
	header := conv.PTXHeader(fmt.Sprintf("%x", sha256.Sum256([]byte(src.Text))), ver, *arch)
	if err := os.WriteFile(*out, []byte(header+"\n"+ptx), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen-ptx:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%d bytes, NVRTC %s, %s)\n", *out, len(ptx), ver, *arch)
}
