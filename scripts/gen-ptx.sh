#!/usr/bin/env bash
# gen-ptx.sh: regenerate the precompiled PTX the CUDA backend loads where
# NVRTC is not installed: internal/conv/kernels.ptx and
# internal/scenario/stress/stress_kernels.ptx.
#
#   scripts/gen-ptx.sh build        # needs Go: bin/gen-ptx, static
#   scripts/gen-ptx.sh run [ROOT]   # needs NVRTC (a CUDA toolkit or its runtime libraries)
#
# ROOT (default: this checkout) is where the files are written, under their
# paths in the module. The first line of each file records the SHA-256 of
# its .cu source; the packages' tests fail when the two disagree, and the
# packages ignore a stale PTX, so a change to a .cu file needs this script
# run again.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
build) CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -o bin/gen-ptx ./tools/gen-ptx ;;
run) bin/gen-ptx -root "${2:-.}" ;;
*) echo "usage: $0 build | run [ROOT]" >&2; exit 2 ;;
esac
