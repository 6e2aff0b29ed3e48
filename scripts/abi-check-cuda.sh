#!/usr/bin/env bash
# abi-check-cuda.sh: hold miotool's cuDNN binding and its stand-in library
# to the real cuDNN 9 headers (and the CUDA driver's cuda.h, where it is
# there) on a machine that has them; CI's machines have no CUDA headers.
#
#   scripts/abi-check-cuda.sh [CHECK.c ...]
#
# It compiles internal/dnn/cudnn/testdata/cudnn_check.c with gcc (the
# binding's function types, the numbers it passes, the struct it mirrors,
# all against cudnn.h) and proves the check can fail: a wrong declaration
# must not compile. Each CHECK.c given is compiled too, with
# -I/usr/local/cuda/include and CUPTI's include folder ($CUPTI_INCLUDE,
# /usr/local/cuda/extras/CUPTI/include or the nvidia.cuda_cupti wheel's),
# for checks of other bindings (such as the trace observer's CUPTI calls);
# one that has a MIOTOOL_MUST_FAIL case must fail to compile with it.
#
# cudnn.h is looked for in $CUDNN_INCLUDE, then in PyTorch's cuDNN wheel
# (python3 -c 'import nvidia.cudnn'), then under site-packages/nvidia/cudnn,
# then /usr/include and /usr/local/cuda/include; the CUDA runtime headers
# it includes in $CUDA_INCLUDE, /usr/local/cuda/include, then the
# nvidia.cuda_runtime wheel.
#
# Prints one line to paste into the results: "abi-check-cuda: PASS ...",
# "abi-check-cuda: FAIL ..." (the compiler's messages before it) or
# "abi-check-cuda: SKIP ..." (no gcc or no cudnn.h); exits 0, 1 or 4.
set -uo pipefail
cd "$(dirname "$0")/.."

say() { echo "abi-check-cuda: $*"; }

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;; esac
for f in "$@"; do
	if [ ! -f "$f" ]; then
		echo "abi-check-cuda: $f is not a file" >&2
		exit 2
	fi
done

if ! command -v gcc >/dev/null 2>&1; then
	say "SKIP: gcc is not on PATH"
	exit 4
fi

# wheel_include PACKAGE: the include folder of an nvidia.PACKAGE wheel.
wheel_include() {
	local dir
	if command -v python3 >/dev/null 2>&1; then
		dir=$(python3 -c "import nvidia.$1, os; print(os.path.dirname(nvidia.$1.__file__))" 2>/dev/null) &&
			[ -d "$dir/include" ] && { echo "$dir/include"; return; }
		dir=$(python3 -c "import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))" 2>/dev/null) &&
			[ -d "$dir/nvidia/$1/include" ] && { echo "$dir/nvidia/$1/include"; return; }
	fi
	for dir in /usr/lib/python3*/site-packages /usr/local/lib/python3*/{site,dist}-packages \
		"$HOME"/.local/lib/python3*/site-packages /opt/conda/lib/python3*/site-packages; do
		[ -d "$dir/nvidia/$1/include" ] && { echo "$dir/nvidia/$1/include"; return; }
	done
}

# first_with FILE DIR...: the first DIR that holds FILE.
first_with() {
	local file=$1 dir
	shift
	for dir in "$@"; do
		[ -n "$dir" ] && [ -f "$dir/$file" ] && { echo "$dir"; return; }
	done
}

cudnn=$(first_with cudnn.h "${CUDNN_INCLUDE:-}" "$(wheel_include cudnn)" /usr/include /usr/local/cuda/include)
if [ -z "$cudnn" ]; then
	say "SKIP: no cudnn.h (set CUDNN_INCLUDE, or install PyTorch's nvidia-cudnn wheel)"
	exit 4
fi
cuda=$(first_with cuda_runtime_api.h "${CUDA_INCLUDE:-}" /usr/local/cuda/include "$(wheel_include cuda_runtime)" "$cudnn")
if [ -z "$cuda" ]; then
	say "SKIP: cudnn.h is in $cudnn, but no cuda_runtime_api.h for it (set CUDA_INCLUDE)"
	exit 4
fi
includes=(-isystem "$cudnn")
[ "$cuda" != "$cudnn" ] && includes+=(-isystem "$cuda")
# cuda.h is the driver's: the driver checks run where it is found.
driver=$(first_with cuda.h "$cuda" /usr/local/cuda/include "$cudnn")
[ -n "$driver" ] && [ "$driver" != "$cuda" ] && [ "$driver" != "$cudnn" ] && includes+=(-isystem "$driver")

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

version=$(printf '#include <cudnn_version.h>\nmiotool_cudnn CUDNN_MAJOR.CUDNN_MINOR.CUDNN_PATCHLEVEL\n' |
	gcc -E -P -x c "${includes[@]}" - 2>/dev/null | sed -n 's/^miotool_cudnn //p' | tr -d ' ')
about="cuDNN ${version:-?} headers in $cudnn${driver:+, cuda.h in $driver}"
[ -z "$driver" ] && about="$about, no cuda.h (driver calls not checked)"

flags=(-std=gnu11 -Wall -Werror -c)
check=internal/dnn/cudnn/testdata/cudnn_check.c
if ! gcc "${flags[@]}" "${includes[@]}" -o "$scratch/check.o" "$check" 2>"$scratch/check.log"; then
	cat "$scratch/check.log"
	say "FAIL: the cuDNN binding or its stand-in disagrees with the $about (messages above)"
	exit 1
fi
if gcc "${flags[@]}" "${includes[@]}" -DMIOTOOL_MUST_FAIL -o "$scratch/fail.o" "$check" 2>"$scratch/fail.log" ||
	! grep -q "cudnnCreate: the stand-in declares another type than the real header" "$scratch/fail.log"; then
	cat "$scratch/fail.log"
	say "FAIL: a wrong declaration of cudnnCreate passed $check, so the check proves nothing"
	exit 1
fi
bound="$(grep -c '^MIOTOOL_BOUND(' internal/dnn/cudnn/testdata/cudnn_binding.h) cuDNN functions"
[ -n "$driver" ] && bound="$bound and $(grep -c '^MIOTOOL_BOUND_DRIVER(' internal/dnn/cudnn/testdata/cudnn_binding.h) driver functions"
numbers=$(grep -c -E '^MIOTOOL_(NUMBER|STATUS_NAME)' internal/dnn/cudnn/testdata/cudnn_binding.h)

# Extra check files, for other bindings of CUDA libraries.
extra_includes=(-I/usr/local/cuda/include)
for d in "${CUPTI_INCLUDE:-}" /usr/local/cuda/extras/CUPTI/include "$(wheel_include cuda_cupti)" "$cuda" "$cudnn"; do
	[ -n "$d" ] && [ -d "$d" ] && [[ " ${extra_includes[*]} " != *" -I$d "* ]] && extra_includes+=(-I"$d")
done
extras=()
for f in "$@"; do
	if ! gcc "${flags[@]}" "${extra_includes[@]}" -o "$scratch/extra.o" "$f" 2>"$scratch/extra.log"; then
		cat "$scratch/extra.log"
		say "FAIL: $f does not compile against the CUDA headers (${extra_includes[*]}); cuDNN check passed ($about)"
		exit 1
	fi
	# A check file with a deliberately wrong case must fail with it.
	if grep -q MIOTOOL_MUST_FAIL "$f"; then
		if gcc "${flags[@]}" "${extra_includes[@]}" -DMIOTOOL_MUST_FAIL -o "$scratch/extra.o" "$f" 2>"$scratch/extra.log"; then
			say "FAIL: $f compiled with -DMIOTOOL_MUST_FAIL, so it proves nothing; cuDNN check passed ($about)"
			exit 1
		fi
		extras+=("$(basename "$f") (and its wrong case failed)")
	else
		extras+=("$(basename "$f")")
	fi
done

say "PASS: $bound, $numbers numbers and the perf struct's layout agree with the $about; a wrong declaration fails${extras:+; also compiled: ${extras[*]}}"
