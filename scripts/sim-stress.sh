#!/usr/bin/env bash
# sim-stress.sh: stress-threads (ROCM-27477) on the simulated device, every
# model-cache policy, and the results file built from miotool's own output.
#
#   scripts/sim-stress.sh run OUTDIR [POLICY...]   # runs each policy, RUNS runs, 2 at a time
#   scripts/sim-stress.sh cost OUTDIR              # what one run costs, and where (needs Go)
#   scripts/sim-stress.sh compare OUTDIR BASE      # one run's cost at commit BASE and in this tree, turn about (needs Go)
#   scripts/sim-stress.sh measure OUTDIR BENCH LABEL=BIN...  # the same with built binaries (BENCH: bin/bench.test)
#   scripts/sim-stress.sh stamp OUTDIR POLICY      # records this machine and BIN's version for an output made by BIN
#   scripts/sim-stress.sh assemble OUTDIR [FILE]   # OUTDIR's outputs into docs/results/simulator.md
#
# POLICY is unlocked, locked or lockfree (default: all three); RUNS defaults
# to 200, the number the pre-fix cache must crash in on a 2-core machine.
# A simulated run is CPU-bound (about 3 s of CPU), so 200 runs take
# about 10 CPU-minutes per policy. BIN (default
# bin/miotool) is the binary; build it with scripts/gpu-check.sh build.
# STRESS_ARGS adds flags to every stress-threads command (e.g. to try the
# script quickly with "--iters 20 --trials 1"); they show in the output.
#
# What a run costs is its CPU time, and the simulator streams its buffers
# through memory, so that time depends on the machine's memory bandwidth as
# much as on its cores. cost, compare and measure therefore print beside
# the CPU seconds the machine's own copy bandwidth, measured in the same
# loop (internal/bench's BenchmarkCopyBandwidth, every core copying at
# once), and their product: the gigabytes one core copies in the CPU time
# one run takes, a figure machines with different memory can compare.
# ROUNDS (default 5) is how many times measure and compare run each binary,
# alternating.
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

# bandwidth BENCH: the copy bandwidth, "GB/s GB/s-per-core", from the
# bench test binary BENCH.
bandwidth() {
	"$1" -test.run '^$' -test.bench '^BenchmarkCopyBandwidth$' -test.benchtime 150x 2>/dev/null |
		awk '/^BenchmarkCopyBandwidth/ { for (i = 1; i < NF; i++) { if ($(i+1) == "GB/s") t = $i; if ($(i+1) == "GB/s-per-core") c = $i }; print t, c }'
}

# runcpu BIN: the CPU seconds (user + system) of one stress-threads command
# of one run (the defaults): its fresh run process and the parent that only
# starts it and reads its lines (some tens of ms of the total), or "failed".
# The run process is not started alone: stress-threads' child mode is its
# own hand-off to the runs it starts, not a flag.
runcpu() {
	local out rc
	TIMEFORMAT='%U %S'
	out=$({ time "$1" --backend sim --no-progress stress-threads --runs 1 --threads 2 --iters 1000 --trials 3 \
		--cache locked >/dev/null 2>&1; } 2>&1)
	rc=$?
	if [ $rc -ne 0 ]; then
		echo failed
		return
	fi
	awk '{printf "%.2f\n", $1 + $2}' <<<"$out"
}

# measure OUTDIR BENCH LABEL=BIN...: ROUNDS rounds, each measuring the copy
# bandwidth and then one fresh run of every BIN, in an order that turns
# about each round; OUTDIR/measure-raw.txt gets a line per run, and
# OUTDIR/measure.txt the medians.
measure() {
	local dir=$1 bench=$2
	shift 2
	local rounds=${ROUNDS:-5} r bw labels=("$@") i n=$#
	mkdir -p "$dir"
	: >"$dir/measure-raw.txt"
	for ((r = 1; r <= rounds; r++)); do
		bw=$(bandwidth "$bench")
		for ((i = 0; i < n; i++)); do
			local k lb
			k=$(((r % 2 == 1) ? i : n - 1 - i))
			lb=${labels[$k]}
			echo "$r ${lb%%=*} $(runcpu "${lb#*=}") $bw" >>"$dir/measure-raw.txt"
		done
		echo "[measure] round $r of $rounds: copy $bw GB/s (total, per core)"
	done
	python3 - "$dir/measure-raw.txt" "$@" >"$dir/measure.txt" <<'PY'
import statistics, sys
raw, labels = sys.argv[1], [a.split("=", 1)[0] for a in sys.argv[2:]]
runs = {}
for line in open(raw):
    r, label, cpu, total, core = line.split()
    runs.setdefault(label, []).append((cpu, float(total), float(core)))
def med(xs):
    return statistics.median(xs) if xs else float("nan")
print("| binary | runs | CPU-s per run, median (min - max) | copy GB/s, all cores (per core) | CPU-s x copy GB/s per core |")
print("| --- | --- | --- | --- | --- |")
meds = {}
for label in labels:
    rs = runs.get(label, [])
    ok = [(float(c), t, k) for c, t, k in rs if c != "failed"]
    failed = len(rs) - len(ok)
    cpu = [c for c, _, _ in ok]
    meds[label] = med(cpu)
    note = f", {failed} failed" if failed else ""
    if not cpu:
        print(f"| {label} | {len(rs)}{note} | - | - | - |")
        continue
    print(f"| {label} | {len(rs)}{note} | {med(cpu):.2f} ({min(cpu):.2f} - {max(cpu):.2f}) | "
          f"{med([t for _, t, _ in ok]):.2f} ({med([k for _, _, k in ok]):.2f}) | {med([c * k for c, _, k in ok]):.1f} GB |")
if len(labels) == 2 and all(meds[l] == meds[l] for l in labels):
    a, b = labels
    print()
    print(f"{b} takes {meds[b] / meds[a]:.2f} times the CPU of {a} (ratio of medians).")
PY
	echo "[measure] written to $dir/measure.txt"
}

# compare OUTDIR BASE: measure the binary of commit BASE against this tree's.
compare() {
	local dir=$1 base=$2 tmp head
	tmp=$(mktemp -d)
	mkdir -p "$tmp/base" "$dir"
	git archive "$base" | tar -x -C "$tmp/base" || return 1
	(cd "$tmp/base" && CGO_ENABLED=0 go build -o "$tmp/miotool-base" ./cmd/miotool) || return 1
	CGO_ENABLED=0 go build -o "$tmp/miotool-head" ./cmd/miotool || return 1
	CGO_ENABLED=0 go test -c -o "$tmp/bench.test" ./internal/bench || return 1
	base=$(git rev-parse --short=12 "$base")
	head=$(git rev-parse --short=12 HEAD)
	git diff --quiet HEAD -- . 2>/dev/null || head="$head+changes"
	local cpu
	cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
	echo "_$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) CPU cores (${cpu:-unknown CPU}), ${ROUNDS:-5} rounds: commit $base (before) against this tree at $head (after)_" >"$dir/measure.stamp"
	measure "$dir" "$tmp/bench.test" "$base=$tmp/miotool-base" "$head=$tmp/miotool-head"
	rm -rf "$tmp"
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
	local bin=$BIN
	if [ ! -x "$bin" ]; then
		bin=$dir/miotool
		CGO_ENABLED=0 go build -o "$bin" ./cmd/miotool || return 1
	fi
	{
		echo
		echo "CPU seconds (user + system) of one stress-threads command of one run (the defaults; its run process and the parent), 5 runs:"
		local i
		for i in 1 2 3 4 5; do
			echo "  $(runcpu "$bin")"
		done
	} >>"$dir/cost.txt"
	CGO_ENABLED=0 go test -c -o "$dir/bench.test" ./internal/bench &&
		echo "copy bandwidth, all cores at once (GB/s, and per core): $(bandwidth "$dir/bench.test")" >>"$dir/cost.txt"
	echo >>"$dir/cost.txt"
	go tool pprof -top -nodecount=12 "$dir/stress.test" "$dir/stress.prof" 2>/dev/null |
		sed -n '/^Showing\|flat%/,$p' >>"$dir/cost.txt"
	echo "[cost] written to $dir/cost.txt"
}

assemble() {
	local dir=$1 file=${2:-docs/results/simulator.md}
	mkdir -p "$(dirname "$file")"
	local new
	new=$(mktemp)
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
		if [ -s "$dir/measure.txt" ]; then
			echo
			echo "## One run's CPU against the machine's copy bandwidth"
			echo
			echo "\`scripts/sim-stress.sh compare\` (or \`measure\`): in each round, the copy bandwidth"
			echo "(internal/bench's BenchmarkCopyBandwidth, every core copying at once), then one fresh"
			echo "stress-threads command of one run of each binary (its run process and the parent; the PyTorch test's defaults:"
			echo "2 threads x 1000 iterations x 3 trials on 2048x2048), the binaries' order turning about"
			echo "each round. The last column is the CPU time times one core's copy bandwidth: the GB one"
			echo "core copies in the CPU time of one run, for comparing machines whose memory differs."
			echo
			cat "$dir/measure.stamp" 2>/dev/null
			echo
			cat "$dir/measure.txt"
		fi
	} >"$new"
	# A section this OUTDIR has no output for keeps its text from the file.
	python3 - "$new" "$file" >"$new.merged" <<'PY'
import os, sys
new, old = sys.argv[1], sys.argv[2]
def sections(path):
    head, out, cur = [], {}, None
    for line in open(path).read().split("\n"):
        if line.startswith("## "):
            cur = line
            out[cur] = []
        elif cur is None:
            head.append(line)
        else:
            out[cur].append(line)
    return head, out
head, fresh = sections(new)
kept = sections(old)[1] if os.path.exists(old) else {}
# The file's sections stay in their order, new ones come after them.
order = list(kept) + [k for k in fresh if k not in kept]
body = "\n".join(head).rstrip("\n")
for k in order:
    text = fresh.get(k, kept.get(k))
    body += "\n\n" + k + "\n\n" + "\n".join(text).strip("\n")
print(body)
PY
	mv "$new.merged" "$file"
	rm -f "$new"
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
compare)
	[ $# -eq 3 ] || { echo "usage: $0 compare OUTDIR BASE" >&2; exit 2; }
	compare "$2" "$3"
	;;
measure)
	[ $# -ge 4 ] || { echo "usage: $0 measure OUTDIR BENCH LABEL=BIN..." >&2; exit 2; }
	measure "$2" "$3" "${@:4}"
	;;
assemble)
	[ $# -ge 2 ] || { echo "usage: $0 assemble OUTDIR [FILE]" >&2; exit 2; }
	assemble "$2" "${3:-}"
	;;
*)
	echo "usage: $0 run OUTDIR [POLICY...] | cost OUTDIR | compare OUTDIR BASE | measure OUTDIR BENCH LABEL=BIN... | stamp OUTDIR POLICY | assemble OUTDIR [FILE]" >&2
	exit 2
	;;
esac
