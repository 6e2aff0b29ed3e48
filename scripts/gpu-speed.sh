#!/usr/bin/env bash
# gpu-speed.sh: the speed measurements of miotool on the GPU machine, as
# functions scripts/gpu-check.sh can source, or as commands:
#
#   scripts/gpu-speed.sh gen_cubin OUTDIR      # needs nvcc: the sm_90 cubins and sidecars, flat in OUTDIR, to commit
#   scripts/gpu-speed.sh first_launch OUTDIR   # the first capture with an empty JIT cache: cubin, NVRTC, PTX
#   scripts/gpu-speed.sh reclaim_speed OUTDIR  # the reclaim hops run by run, and the cold worker/poller pair
#   scripts/gpu-speed.sh sim_cost OUTDIR       # a simulated stress run's CPU against this host's copy bandwidth
#   scripts/gpu-speed.sh build_before REV      # needs Go: BIN/miotool-before from commit REV, for sim_cost
#
# BIN (default bin) is the folder of the binaries scripts/gpu-check.sh
# build makes (miotool, bench.test). Each measurement writes OUTDIR/NAME.md,
# a Markdown section of its own ("## ..."), made from miotool's and the
# benchmarks' output by this script, and prints it. Where to run each and
# what it should show is in the comment above its function.

# gen_cubin OUTDIR: compiles the kernel sources for sm_90 with nvcc
# (scripts/gen-cubin.sh) and copies the cubins and their sidecars into
# OUTDIR, flat: kernels.* belong in internal/conv, stress_kernels.* in
# internal/scenario/stress. The sidecars record the nvcc command line and
# version and the hashes the packages' tests check.
gen_cubin() {
	local dir=$1 tmp f
	mkdir -p "$dir"
	tmp=$(mktemp -d)
	scripts/gen-cubin.sh sm_90 "$tmp" || { rm -rf "$tmp"; return 1; }
	for f in "$tmp"/internal/conv/kernels.sm_90.cubin* "$tmp"/internal/scenario/stress/stress_kernels.sm_90.cubin*; do
		cp "$f" "$dir/"
	done
	rm -rf "$tmp"
	{
		echo
		echo "## Cubins for sm_90"
		echo
		echo "Made by \`scripts/gpu-speed.sh gen_cubin\` (scripts/gen-cubin.sh). To commit them:"
		echo
		echo '```'
		echo "cp $dir/kernels.sm_90.cubin $dir/kernels.sm_90.cubin.txt internal/conv/"
		echo "cp $dir/stress_kernels.sm_90.cubin $dir/stress_kernels.sm_90.cubin.txt internal/scenario/stress/"
		echo '```'
		for f in "$dir"/*.cubin.txt; do
			echo
			echo '```'
			cat "$f"
			echo '```'
		done
	} | tee "$dir/gen-cubin.md"
}

# first_launch OUTDIR: the wall time of one `miotool --backend cuda
# capture` in a process of its own, as on a machine that never ran it:
# every run gets an empty CUDA JIT cache (CUDA_CACHE_PATH). Three ways of
# loading the kernels, FIRST_RUNS (default 5) runs each, turn about:
# cubin (the committed sm_90 cubins, the default), nvrtc (MIOTOOL_CUBIN=off:
# NVRTC compiles every kernel source in every process) and ptx
# (MIOTOOL_CUBIN=off MIOTOOL_NVRTC=off: the driver JIT-compiles the
# committed PTX). Expect cubin fastest and ptx slowest, by about the 3 s
# the JIT took on a fresh H200 machine. A binary built before the cubins
# were committed has none: its cubin row then measures the NVRTC path, and
# the section says so. DROP_CACHES=1 also empties the page cache before
# each run (root only), as a freshly booted machine has it.
first_launch() {
	local dir=$1 bin=${BIN:-bin} runs=${FIRST_RUNS:-5} r i k cfg
	mkdir -p "$dir"
	local raw=$dir/first-launch-raw.txt
	: >"$raw"
	local configs=(cubin nvrtc ptx)
	for ((r = 1; r <= runs; r++)); do
		for ((i = 0; i < 3; i++)); do
			k=$(((i + r) % 3))
			cfg=${configs[$k]}
			local env=() cache t0 t1 rc
			case $cfg in
			nvrtc) env=(MIOTOOL_CUBIN=off) ;;
			ptx) env=(MIOTOOL_CUBIN=off MIOTOOL_NVRTC=off) ;;
			esac
			cache=$(mktemp -d)
			if [ "${DROP_CACHES:-0}" = 1 ]; then
				sync
				echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || echo "[first_launch] cannot drop the page cache (not root?)" >&2
			fi
			t0=$(date +%s%N)
			env "${env[@]}" CUDA_CACHE_PATH="$cache" "$bin/miotool" --backend cuda --no-progress capture \
				>"$dir/first-launch-$cfg-$r.txt" 2>&1
			rc=$?
			t1=$(date +%s%N)
			rm -rf "$cache"
			echo "$cfg $r $(((t1 - t0) / 1000000)) $rc" >>"$raw"
			echo "[first_launch] round $r: $cfg $(((t1 - t0) / 1000000)) ms, exit $rc" >&2
		done
	done
	local embedded
	embedded=$(grep -c "miotool cubin sidecar" "$bin/miotool" 2>/dev/null || true)
	{
		echo
		echo "## First launch with an empty JIT cache: cubin, NVRTC, PTX (medians of $runs runs each)"
		echo
		echo '```'
		echo "\$ CUDA_CACHE_PATH=\$(mktemp -d) bin/miotool --backend cuda --no-progress capture    # cubin"
		echo "\$ MIOTOOL_CUBIN=off CUDA_CACHE_PATH=\$(mktemp -d) bin/miotool --backend cuda --no-progress capture    # nvrtc"
		echo "\$ MIOTOOL_CUBIN=off MIOTOOL_NVRTC=off CUDA_CACHE_PATH=\$(mktemp -d) bin/miotool --backend cuda --no-progress capture    # ptx"
		echo '```'
		echo
		echo "_$(date -u +%Y-%m-%dT%H:%M:%SZ), $("$bin/miotool" version 2>/dev/null | head -1), $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -1)$([ "${DROP_CACHES:-0}" = 1 ] && echo ', page cache dropped before each run')_"
		echo
		if [ "${embedded:-0}" = 0 ]; then
			echo "This binary embeds no cubin: its cubin row is the NVRTC path again."
			echo
		fi
		python3 - "$raw" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    cfg, _, ms, rc = line.split()
    runs.setdefault(cfg, []).append((int(ms), int(rc)))
print("| kernels loaded as | runs | wall ms, median | min - max | failed runs |")
print("| --- | --- | --- | --- | --- |")
what = {"cubin": "cubin (sm_90, committed)", "nvrtc": "NVRTC at run time (MIOTOOL_CUBIN=off)",
        "ptx": "PTX, driver JIT (MIOTOOL_CUBIN=off MIOTOOL_NVRTC=off)"}
for cfg in ("cubin", "nvrtc", "ptx"):
    rs = runs.get(cfg, [])
    ms = [m for m, rc in rs if rc == 0]
    bad = sum(1 for _, rc in rs if rc != 0)
    if ms:
        print(f"| {what[cfg]} | {len(rs)} | {statistics.median(ms):.0f} | {min(ms)} - {max(ms)} | {bad} |")
    else:
        print(f"| {what[cfg]} | {len(rs)} | - | - | {bad} |")
PY
	} | tee "$dir/first-launch.md"
}

# reclaim_speed OUTDIR: BenchmarkHops HOPS_RUNS (10) times (a line per
# run, so that a run unlike the others shows) and BenchmarkColdReclaim
# COLD_RUNS (5) times on the GPU (BACKEND, default cuda), and
# BenchmarkPollerCPU 3 times. What each should show on the H200:
# Hops/poller free-start p50 <= 6 µs in every run, with woken before 0 (the
# poller awake before the kernel ended) and ns-per-poll p50 about 1.5 µs
# (a query and the 1 µs gap); a run slower than that with ns-per-poll in
# the tens of µs had its queries blocking in the driver (the table shows
# both run by run); poller-beside-callback the same figures beside the
# benchmark's host function, whose callback p50 (60-80 µs) is the worker's
# floor; poller-isolated free-start a few µs where its woken is below 0,
# about woken + 10 µs where the wake of the sleeping poller came after the
# kernel's end (most runs: that wake costs 30-75 µs on the VM, the kernel
# had ~27 µs left), so a median of 10-30 µs; poller-isolated-announced
# free-start about 4-6 µs in every run, woken below 0 (the announced
# Abandon found the poller spinning); ColdReclaim/overrun-50us
# ratio-worker/poller about 3-9 and ratio-worker/announced about 15-25;
# overrun-2ms both ratios above 1 (the poller's polls are a sixteenth of
# the drain's age apart plus a timed wake, ~150 µs at 2 ms, so its
# free-start p50 lies somewhere in 10-160 µs, the same in every run as the
# benchmark fixes the phase, against the worker's ~200 µs); PollerCPU
# pct-thread-idle 0 and pct-thread-draining a few percent.
reclaim_speed() {
	local dir=$1 bin=${BIN:-bin} backend=${BACKEND:-cuda} hops=${HOPS_RUNS:-10} cold=${COLD_RUNS:-5}
	mkdir -p "$dir"
	local raw=$dir/reclaim-speed-raw.txt
	MIOTOOL_BENCH_BACKEND=$backend "$bin/bench.test" -test.run '^$' -test.bench '^BenchmarkHops$' \
		-test.count "$hops" -test.benchtime 300x >"$raw" 2>>"$dir/reclaim-speed.log"
	MIOTOOL_BENCH_BACKEND=$backend "$bin/bench.test" -test.run '^$' -test.bench '^BenchmarkColdReclaim$' \
		-test.count "$cold" -test.benchtime 200x >>"$raw" 2>>"$dir/reclaim-speed.log"
	MIOTOOL_BENCH_BACKEND=$backend "$bin/bench.test" -test.run '^$' -test.bench '^BenchmarkPollerCPU$' \
		-test.count 3 -test.benchtime 5x >>"$raw" 2>>"$dir/reclaim-speed.log"
	{
		echo
		echo "## The poller run by run, and reclaim after an idle period (Hops x$hops, ColdReclaim x$cold)"
		echo
		echo '```'
		echo "\$ MIOTOOL_BENCH_BACKEND=$backend bin/bench.test -test.bench '^BenchmarkHops\$' -test.count $hops -test.benchtime 300x"
		echo "\$ MIOTOOL_BENCH_BACKEND=$backend bin/bench.test -test.bench '^BenchmarkColdReclaim\$' -test.count $cold -test.benchtime 200x"
		echo "\$ MIOTOOL_BENCH_BACKEND=$backend bin/bench.test -test.bench '^BenchmarkPollerCPU\$' -test.count 3 -test.benchtime 5x"
		echo '```'
		echo
		echo "Hops in µs from the kernel's own last write: abandon is the Abandon call (negative: before"
		echo "the kernel ended), woken the reclaim thread's last wake, then callback, awake, free-start,"
		echo "freed; polls and ns-per-poll are the poller's queries for each reclaim and their mean period."
		echo "The isolated variants and ColdReclaim launch each evaluation after a pause in which the"
		echo "reclaim threads and the driver's callback thread went to sleep (announced: the Abandon's"
		echo "time was told the tracker at the slot's start, as find does); ColdReclaim runs the worker,"
		echo "the poller and the announced poller turn about, the kernel running 50 µs or 2 ms past its"
		echo "Abandon, and each ratio is the worker's median free-start over a poller's in the same run."
		echo
		grep -E '^(goos|goarch|cpu):' "$raw" | awk '!seen[$0]++' | sed 's/^/    /'
		echo
		echo "free-start p50, woken p50 (µs) and the poller's ns-per-poll p50 of every run:"
		echo
		echo "| benchmark | free-start p50, run by run | woken p50, run by run | ns-per-poll p50, run by run |"
		echo "| --- | --- | --- | --- |"
		awk '/^BenchmarkHops\// {
			fs = ""; wk = ""; pp = "-"
			for (i = 1; i < NF; i++) {
				if ($(i+1) == "us-free-start-p50") fs = $i
				if ($(i+1) == "us-woken-p50") wk = $i
				if ($(i+1) == "ns-per-poll-p50") pp = $i
			}
			if (!($1 in order)) { order[$1] = ++n; names[n] = $1 }
			f[$1] = f[$1] (f[$1] == "" ? "" : ", ") fs; w[$1] = w[$1] (w[$1] == "" ? "" : ", ") wk
			q[$1] = q[$1] (q[$1] == "" ? "" : ", ") pp
		}
		END { for (i = 1; i <= n; i++) printf "| %s | %s | %s | %s |\n", names[i], f[names[i]], w[names[i]], q[names[i]] }' "$raw"
		echo
		python3 scripts/benchmedians.py "$raw"
	} | tee "$dir/reclaim-speed.md"
}

# sim_cost OUTDIR: what one simulated stress run costs on this host's CPU,
# against its copy bandwidth, as scripts/sim-stress.sh measure takes it:
# bin/miotool, and bin/miotool-before where build_before made one, SIM_ROUNDS
# (default 5) rounds, on two cores (taskset -c 0,1) where the host has more,
# as the simulator's stress results were taken on 2-core machines.
sim_cost() {
	local dir=$1 bin=${BIN:-bin} labels=() pin=() commit
	mkdir -p "$dir"
	commit=$("$bin/miotool" version 2>/dev/null | grep -oE '[0-9a-f]{12}' | head -1)
	[ -x "$bin/miotool-before" ] && labels+=("before=$bin/miotool-before")
	labels+=("${commit:-this}=$bin/miotool")
	if [ "$(nproc)" -gt 2 ] && command -v taskset >/dev/null; then
		pin=(taskset -c 0,1)
	fi
	local cpu
	cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
	ROUNDS=${SIM_ROUNDS:-5} "${pin[@]}" scripts/sim-stress.sh measure "$dir/sim-cost" "$bin/bench.test" "${labels[@]}" >&2
	{
		echo
		echo "## A simulated stress run on this host's CPU, against its copy bandwidth"
		echo
		echo '```'
		echo "\$ ${pin[*]} scripts/sim-stress.sh measure OUTDIR bin/bench.test ${labels[*]}"
		echo '```'
		echo
		echo "_$(date -u +%Y-%m-%dT%H:%M:%SZ), ${cpu:-unknown CPU}, $("${pin[@]}" nproc) of $(nproc) cores, ${SIM_ROUNDS:-5} rounds_"
		echo
		echo "Each round: the copy bandwidth (every core of the set copying at once), then one fresh"
		echo "\`miotool --backend sim stress-threads\` of one run (2 threads x 1000 iterations x 3 trials) of"
		echo "each binary. The last column, CPU-s times one core's copy GB/s, compares machines."
		echo
		cat "$dir/sim-cost/measure.txt"
	} | tee "$dir/sim-cost.md"
}

# build_before REV: BIN/miotool-before, the binary of commit REV (static,
# as gpu-check.sh build makes them), for sim_cost's before and after. Runs
# where Go is (the machine that builds, not the GPU machine).
build_before() {
	local rev=$1 bin=${BIN:-bin} tmp
	tmp=$(mktemp -d)
	git archive "$rev" | tar -x -C "$tmp" &&
		(cd "$tmp" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath \
			-ldflags "-X main.commit=$(git rev-parse --short=12 "$rev")" -o "$tmp/miotool" ./cmd/miotool) &&
		mkdir -p "$bin" && mv "$tmp/miotool" "$bin/miotool-before"
	local rc=$?
	rm -rf "$tmp"
	[ $rc -eq 0 ] && echo "built $bin/miotool-before ($rev)"
	return $rc
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -uo pipefail
	cd "$(dirname "$0")/.."
	case ${1:-} in
	gen_cubin | first_launch | reclaim_speed | sim_cost)
		[ $# -eq 2 ] || { echo "usage: $0 $1 OUTDIR" >&2; exit 2; }
		"$1" "$2"
		;;
	build_before)
		[ $# -eq 2 ] || { echo "usage: $0 build_before REV" >&2; exit 2; }
		build_before "$2"
		;;
	*)
		echo "usage: $0 gen_cubin OUTDIR | first_launch OUTDIR | reclaim_speed OUTDIR | sim_cost OUTDIR | build_before REV" >&2
		exit 2
		;;
	esac
fi
