package cuda

import (
	"log/slog"
	"os"
	"sync"

	"miotool/internal/hip"
)

// EnvCubin set to "off" makes the backend ignore the precompiled cubins
// kernel sources carry and build as it would without them (NVRTC, else
// the precompiled PTX): how the first launch is timed both ways on one
// machine with one binary.
const EnvCubin = "MIOTOOL_CUBIN"

// ModuleLoad loads src's precompiled cubin for the device's exact
// architecture when src carries one (hip.MatchingCubins has checked it
// against the source text): the kernels load as they are, with no runtime
// compiler and nothing for the driver to JIT. Otherwise, or when the driver
// refuses that cubin (noted once per source), src is built as gpulib does:
// NVRTC's CUBIN for the device, else the precompiled PTX.
func (d *device) ModuleLoad(src *hip.KernelSource) (hip.Module, error) {
	if src != nil && d.useCubins {
		arch := d.Props().Arch
		if image := src.Cubins[arch]; len(image) > 0 {
			m, err := d.Device.ModuleLoadImage(src.Name, image, "as its precompiled cubin for "+arch)
			if err == nil {
				return m, nil
			}
			noteCubinRefused(src.Name, arch, err)
		}
	}
	return d.Device.ModuleLoad(src)
}

var cubinRefusals sync.Map // kernel source name -> struct{}

// noteCubinRefused logs, once per kernel source and process, that the
// driver would not load its cubin.
func noteCubinRefused(name, arch string, err error) {
	if _, seen := cubinRefusals.LoadOrStore(name, struct{}{}); seen {
		return
	}
	slog.Warn(backendName+": the driver refused the precompiled cubin; building the kernels instead",
		"source", name, "arch", arch, "error", err)
}

// cubinsWanted reads EnvCubin when a device opens.
func cubinsWanted() bool { return os.Getenv(EnvCubin) != "off" }
