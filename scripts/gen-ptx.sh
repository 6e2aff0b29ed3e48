#!/usr/bin/env bash
# gen-ptx.sh: regenerate internal/conv/kernels.ptx, the precompiled
# fallback the CUDA backend loads where NVRTC is not installed.
#
#   scripts/gen-ptx.sh build        # needs Go: bin/gen-ptx, static
#   scripts/gen-ptx.sh run [OUT]    # needs NVRTC (a CUDA toolkit or its runtime libraries)
#
# The first line of the file records the SHA-256 of kernels.cu; the conv
# package's tests fail when the two disagree, and the package ignores a
# stale PTX, so a change to kernels.cu needs this script run again.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
build) CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -o bin/gen-ptx ./tools/gen-ptx ;;
run) bin/gen-ptx -o "${2:-internal/conv/kernels.ptx}" ;;
*) echo "usage: $0 build | run [OUT]" >&2; exit 2 ;;
esac
