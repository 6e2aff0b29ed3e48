#!/usr/bin/env bash
# gen-hsaco.sh: build AMD GPU code objects of every kernel source the module
# ships (*.cu outside testdata) with hipcc, for each target the compiler can
# build for, as hiprtc would build them (-O3, hip_runtime.h standing in for
# what hiprtc predefines).
#
#   scripts/gen-hsaco.sh OUT [gfxNNN ...]
#
# Writes OUT/<source>-<target>.hsaco (e.g. OUT/kernels-gfx90a.hsaco), ELF
# code objects that hipModuleLoadData takes. The targets default to the CDNA
# and RDNA ones below; a target the compiler cannot build an empty source
# for (unknown to it, or without device libraries) is skipped and named.
# Debian's hipcc (ROCm 5.2, clang 15) builds gfx908, gfx90a, gfx940 and
# gfx1030, not gfx942 or gfx1100. miotool itself builds with hiprtc and does
# not load these files.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 1 ]]; then
	echo "usage: $0 OUT [gfxNNN ...]" >&2
	exit 2
fi
out=$1
shift
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
	targets=(gfx908 gfx90a gfx940 gfx941 gfx942 gfx950 gfx1030 gfx1100 gfx1101 gfx1200 gfx1201)
fi
hipcc=${HIPCC:-$(command -v hipcc || echo "${ROCM_PATH:-/opt/rocm}/bin/hipcc")}
if [[ ! -x "$hipcc" ]]; then
	echo "hipcc not found (set HIPCC, or: apt-get install hipcc)" >&2
	exit 1
fi

mapfile -t sources < <(find . -name '*.cu' -not -path '*/testdata/*' -not -path './.*' | sort)
mkdir -p "$out"
empty="$(mktemp --suffix=.hip)"
trap 'rm -f "$empty"' EXIT

build() { # target source output
	"$hipcc" --offload-arch="$1" --cuda-device-only --no-gpu-bundle-output -O3 \
		-include hip/hip_runtime.h -c "$2" -o "$3"
}

for target in "${targets[@]}"; do
	if ! why=$(build "$target" "$empty" /dev/null 2>&1); then
		echo "skip $target: ${why%%$'\n'*}"
		continue
	fi
	for src in "${sources[@]}"; do
		obj="$out/$(basename "$src" .cu)-$target.hsaco"
		build "$target" "$src" "$obj"
		echo "$obj"
	done
done
