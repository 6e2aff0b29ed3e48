#!/usr/bin/env bash
# sim-stress.sh: stress-threads (ROCM-27477) on the simulated device, every
# model-cache policy, and the results file built from miotool's own output.
#
#   scripts/sim-stress.sh run OUTDIR [POLICY...]   # runs each policy, RUNS runs, 2 at a time
#   scripts/sim-stress.sh cost OUTDIR              # what one run costs, and where (needs Go)
#   scripts/sim-stress.sh stamp OUTDIR POLICY      # records this machine and BIN's version for an output made by BIN
#   scripts/sim-stress.sh assemble OUTDIR [FILE]   # OUTDIR/stress-*.txt into docs/results/simulator.md
#
# POLICY is unlocked, locked or lockfree (default: all three); RUNS defaults
# to 200, the number the pre-fix cache must crash in on a 2-core machine.
# A simulated run is CPU-bound (about 3 s of CPU), so 200 runs take
# about 10 CPU-minutes per policy. BIN (default
# bin/miotool) is the binary; build it with scripts/gpu-check.sh build.
# STRESS_ARGS adds flags to every stress-threads command (e.g. to try the
# script quickly with "--iters 20 --trials 1"); they show in the output.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/miotool}
RUNS=${RUNS:-200}

stamp() {
	local dir=$1 policy=$2 cpu
	cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
	echo "_On $(hostname), $(nproc) CPU cores (${cpu:-unknown CPU}); $("$BIN" version --format markdown 2>/dev/null)_" >"$dir/stress-$policy.stamp"
}

run() {
	local dir=$1
	shift
	local policies=${*:-unlocked locked lockfree}
	mkdir -p "$dir"
	for p in $policies; do
		case $p in unlocked | locked | lockfree) ;; *)
			echo "unknown policy $p" >&2
			return 2
			;;
		esac
		stamp "$dir" "$p"
		echo "[$p] $RUNS runs, 2 at a time, from $(date -u +%H:%M:%SZ)"
		"$BIN" --backend sim --no-progress -v stress-threads --cache="$p" --runs "$RUNS" --jobs 2 ${STRESS_ARGS:-} \
			>"$dir/stress-$p.txt" 2>"$dir/stress-$p.log"
		echo "[$p] exit $? at $(date -u +%H:%M:%SZ)"
	done
}

# cost: the CPU time of one whole run (the PyTorch defaults) and of its
# fixed part, from the stress package's benchmark, and where the CPU goes,
# from its profile.
cost() {
	local dir=$1
	mkdir -p "$dir"
	echo "_$(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown), $(nproc) CPU cores_" >"$dir/cost.stamp"
	(cd internal/scenario/stress && go test -run '^$' -bench 'StressRun/sim' -benchtime 3x -count 3 \
		-cpuprofile "$dir/stress.prof" -o "$dir/stress.test") >"$dir/cost.txt" 2>&1
	# A fresh process pays what the benchmark's reused heap does not: the
	# start, the model and the first touch of every buffer. Five runs of the
	# child process a run starts, alone, with bash's CPU accounting.
	{
		echo
		echo "CPU seconds (user + system) of one fresh run process (stress-threads --child with the defaults), 5 runs:"
		local i
		for i in 1 2 3 4 5; do
			TIMEFORMAT='%U %S'
			{ time "$BIN" --backend sim --no-progress stress-threads --child --threads 2 --iters 1000 --trials 3 \
				--cache locked >/dev/null 2>&1; } 2>&1 | awk '{printf "  %.2f\n", $1 + $2}'
		done
	} >>"$dir/cost.txt"
	echo >>"$dir/cost.txt"
	go tool pprof -top -nodecount=12 "$dir/stress.test" "$dir/stress.prof" 2>/dev/null |
		sed -n '/^Showing\|flat%/,$p' >>"$dir/cost.txt"
	echo "[cost] written to $dir/cost.txt"
}

assemble() {
	local dir=$1 file=${2:-docs/results/simulator.md}
	mkdir -p "$(dirname "$file")"
	{
		echo "# miotool stress-threads on the simulated device"
		echo
		echo "Written by \`scripts/sim-stress.sh\` from miotool's own output: the"
		echo "model-cache race of ROCM-27477 on a machine without a GPU, one section"
		echo "per cache policy; each output names its command, setup and timing."
		for p in unlocked locked lockfree; do
			[ -s "$dir/stress-$p.txt" ] || continue
			echo
			echo "## --cache=$p"
			echo
			cat "$dir/stress-$p.stamp" 2>/dev/null || echo "_machine and version not recorded_"
			echo
			echo '```'
			cat "$dir/stress-$p.txt"
			echo '```'
		done
		if [ -s "$dir/cost.txt" ]; then
			echo
			echo "## What a run costs, and where"
			echo
			echo "\`scripts/sim-stress.sh cost\`: \`go test -bench 'StressRun/sim' -benchtime 3x -count 3\` in"
			echo "internal/scenario/stress (cpu-s/run: the CPU of all cores for one run; defaults are the"
			echo "PyTorch test's, fixed is one iteration of one trial), then the top of its CPU profile."
			echo
			cat "$dir/cost.stamp" 2>/dev/null
			echo
			echo '```'
			cat "$dir/cost.txt"
			echo '```'
		fi
	} >"$file"
	echo "wrote $file"
}

case ${1:-} in
run)
	[ $# -ge 2 ] || { echo "usage: $0 run OUTDIR [POLICY...]" >&2; exit 2; }
	dir=$2
	shift 2
	run "$dir" "$@"
	;;
stamp)
	[ $# -eq 3 ] || { echo "usage: $0 stamp OUTDIR POLICY" >&2; exit 2; }
	stamp "$2" "$3"
	;;
cost)
	[ $# -eq 2 ] || { echo "usage: $0 cost OUTDIR" >&2; exit 2; }
	cost "$2"
	;;
assemble)
	[ $# -ge 2 ] || { echo "usage: $0 assemble OUTDIR [FILE]" >&2; exit 2; }
	assemble "$2" "${3:-}"
	;;
*)
	echo "usage: $0 run OUTDIR [POLICY...] | cost OUTDIR | stamp OUTDIR POLICY | assemble OUTDIR [FILE]" >&2
	exit 2
	;;
esac
