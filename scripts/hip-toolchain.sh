#!/usr/bin/env bash
# hip-toolchain.sh: install the real HIP compiler and runtime the AMD
# toolchain tests (internal/hip/amd/toolchain_test.go) use: Debian's ROCm
# 5.2 packages hipcc (clang with the AMDGPU target, the HIP headers, the
# device libraries) and libamdhip64-5 (the HIP 5 runtime, libamdhip64.so.5).
# They need no GPU.
#
#   scripts/hip-toolchain.sh
#
# It says what it did and exits 0 whatever happens: where apt-get is absent,
# the user is neither root nor allowed password-less sudo, or apt-get fails,
# the tests skip, naming what is missing. Fetching the package lists and
# the packages takes at most MIOTOOL_APT_TIMEOUT seconds in all (default
# 240), so a dead mirror costs minutes, not hours; unpacking, local and
# quick, is never cut off (that would leave dpkg half-done).
# MIOTOOL_SKIP_HIP_TOOLCHAIN=1 skips it all.
set -uo pipefail

packages=(hipcc libamdhip64-5)
limit=${MIOTOOL_APT_TIMEOUT:-240}

say() { echo "hip-toolchain: $*"; }

if [[ -n "${MIOTOOL_SKIP_HIP_TOOLCHAIN:-}" ]]; then
	say "skipped (MIOTOOL_SKIP_HIP_TOOLCHAIN is set); the AMD toolchain tests skip where it is missing"
	exit 0
fi

installed() {
	[[ "$(dpkg-query -W -f='${Status}\n' "${packages[@]}" 2>/dev/null | grep -c '^install ok installed$')" == "${#packages[@]}" ]]
}

if command -v dpkg-query >/dev/null 2>&1 && installed; then
	say "${packages[*]} already installed"
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	say "apt-get is not available: not installing ${packages[*]}; the AMD toolchain tests skip (or install hipcc and libamdhip64 5.x, or ROCm, by other means)"
	exit 0
fi

as_root=()
if [[ "$(id -u)" != 0 ]]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		as_root=(sudo -n)
	else
		say "not root and no password-less sudo: not installing ${packages[*]}; the AMD toolchain tests skip"
		exit 0
	fi
fi

have_timeout=false
command -v timeout >/dev/null 2>&1 && have_timeout=true
deadline=$((SECONDS + limit))

log="$(mktemp)"
trap 'rm -f "$log"' EXIT

# apt_get runs apt-get as root; bounded_apt_get also within what is left
# of the time limit.
apt_get() {
	"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=30 "$@" >>"$log" 2>&1
}
bounded_apt_get() {
	local left=$((deadline - SECONDS))
	((left > 0)) || return 124
	if $have_timeout; then
		timeout "$left" "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=30 "$@" >>"$log" 2>&1
	else
		apt_get "$@"
	fi
}

fail() {
	say "warning: $1; the AMD toolchain tests skip"
	if [[ -s "$log" ]]; then
		echo "  the last lines of apt-get's output:"
		tail -n 5 "$log" | sed 's/^/    /'
	fi
	exit 0
}

say "installing ${packages[*]} with apt-get (downloads limited to ${limit}s)"
# A fresh machine often has no package lists: fetch them only when the
# packages cannot be found without.
if ! bounded_apt_get --no-install-recommends --download-only install "${packages[@]}"; then
	bounded_apt_get update || fail "apt-get update failed or ran out of the ${limit}s"
	bounded_apt_get --no-install-recommends --download-only install "${packages[@]}" ||
		fail "downloading ${packages[*]} failed or ran out of the ${limit}s (are they in this distribution's lists?)"
fi
apt_get --no-install-recommends install "${packages[@]}" || fail "installing ${packages[*]} failed"
say "installed ${packages[*]}: $(command -v hipcc), $(ldconfig -p 2>/dev/null | grep -m1 -o '/[^ ]*libamdhip64\.so\.5$' || echo libamdhip64.so.5)"
