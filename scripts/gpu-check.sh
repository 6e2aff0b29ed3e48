#!/usr/bin/env bash
# gpu-check.sh: build miotool and check it on a machine with a GPU.
#
#   scripts/gpu-check.sh build                 # needs Go: static binaries into bin/
#   scripts/gpu-check.sh run OUTDIR [SECTION...]  # needs a GPU: runs the sections, appends to OUTDIR/sections-*.md
#   scripts/gpu-check.sh assemble OUTDIR [FILE]  # joins OUTDIR/sections-*.md into docs/results/<device>.md
#   scripts/gpu-check.sh all                   # build, run every section, assemble
#
# Sections: doctor abi rules rules-added find verify capture replay bench reclaim speed heuristics cudnn
# stress targets trace trace-cost repeat e2e suite (abi: scripts/abi-check-cuda.sh; speed: scripts/gpu-speed.sh;
# trace, trace-cost: scripts/gpu-trace.sh; repeat: scripts/gpu-repeat.sh; e2e: scripts/gpu-e2e.sh;
# suite: scripts/gpu-suite.sh).
# Every table in the results comes from miotool's own output (--format
# markdown) or from scripts/benchmedians.py and scripts/cudnn-compare.py over
# raw benchmark output; nothing is written by hand. The machine needs the
# GPU driver (and, for cudnn and targets, PyTorch with cuDNN); Go only for
# `build`. BACKEND (default cuda) picks the backend.
set -uo pipefail
cd "$(dirname "$0")/.."
BACKEND=${BACKEND:-cuda}
BIN=${BIN:-bin}
ALL_SECTIONS="doctor abi rules rules-added find verify capture replay bench reclaim speed heuristics cudnn stress targets trace trace-cost repeat e2e suite"

build() {
	set -e
	mkdir -p "$BIN"
	local commit
	commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath \
		-ldflags "-X main.commit=$commit" -o "$BIN/miotool" ./cmd/miotool
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -o "$BIN/bench.test" ./internal/bench
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -o "$BIN/cache.test" ./internal/aiheur/cache
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -o "$BIN/builtin.test" ./internal/aiheur/builtin
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -o "$BIN/cuda.test" ./internal/hip/cuda
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -o "$BIN/trace.test" ./internal/trace
	set +e
	echo "built $BIN/miotool and the benchmarks $BIN/bench.test, cache.test, builtin.test, cuda.test ($commit)"
}

# section OUT TITLE COMMAND...: runs a miotool command, appends its markdown.
section() {
	local out=$1 title=$2
	shift 2
	local start=$SECONDS
	{
		echo
		echo "### $title"
		echo
		echo '```'
		echo "$ $*"
		echo '```'
		echo
	} >>"$out"
	"$@" >>"$out" 2>>"$LOG"
	local rc=$?
	echo >>"$out"
	echo "_exit status $rc, $((SECONDS - start)) s_" >>"$out"
	echo "[$title] exit $rc in $((SECONDS - start)) s" | tee -a "$LOG"
}

# sourced OUT SCRIPT FUNCTION DIR: runs FUNCTION from SCRIPT (a script of
# section functions, each writing a "## " Markdown section to its stdout)
# in a subshell, and appends what it printed to OUT.
sourced() {
	local out=$1 script=$2 fn=$3 sub=$4 start=$SECONDS rc
	echo "[$fn] running" | tee -a "$LOG"
	# Each in a shell of its own, bounded, so that one stuck measurement
	# costs its section and not the run.
	BIN=$BIN BACKEND=$BACKEND timeout -k 10 "${SECTION_LIMIT:-300}" \
		bash -c 'source "$1" && "$2" "$3"' sourced "$script" "$fn" "$sub" >>"$out" 2>>"$LOG"
	rc=$?
	[ $rc -eq 124 ] && echo -e "\n_The section above did not finish: stopped after ${SECTION_LIMIT:-300} s._" >>"$out"
	echo "[$fn] exit $rc in $((SECONDS - start)) s" | tee -a "$LOG"
}

run() {
	local dir=$1
	shift
	local sections=${*:-$ALL_SECTIONS}
	mkdir -p "$dir"
	LOG=$dir/gpu-check.log
	local tag
	tag=$(echo "$sections" | tr ' ' '-')
	local out=$dir/sections-$(date -u +%H%M%S)-$tag.md
	local M="$BIN/miotool --backend $BACKEND --no-progress"
	local cores
	cores=$(nproc)
	echo "_Run at $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $cores CPU cores, sections: ${sections}; $("$BIN/miotool" version --format markdown 2>/dev/null)_" >>"$out"
	echo >>"$out"
	for s in $sections; do
		case $s in
		doctor)
			echo "## Device and driver" >>"$out"
			section "$out" "doctor" $M doctor --format markdown
			nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$out" 2>>"$LOG"
			;;
		abi)
			echo -e "\n## The cuDNN binding and the trace observer's CUPTI declarations against the real headers\n" >>"$out"
			echo '```' >>"$out"
			echo "\$ scripts/abi-check-cuda.sh internal/trace/observer/check/cupti_check.c" >>"$out"
			scripts/abi-check-cuda.sh internal/trace/observer/check/cupti_check.c >>"$out" 2>>"$LOG"
			local abirc=$?
			echo '```' >>"$out"
			echo -e "\n_exit status ${abirc}_" >>"$out"
			echo "[abi] exit $abirc" | tee -a "$LOG"
			# The observer's CPython declarations against this machine's own
			# Python headers (the trace's Python frames rely on them).
			local pyinc
			pyinc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
			echo -e "\nThe observer's CPython declarations against this machine's Python headers ($pyinc):\n" >>"$out"
			echo '```' >>"$out"
			echo "\$ gcc -fsyntax-only -I$pyinc internal/trace/observer/check/python_check.c" >>"$out"
			gcc -fsyntax-only -I"$pyinc" internal/trace/observer/check/python_check.c >>"$out" 2>&1
			local pyrc=$?
			echo '```' >>"$out"
			echo -e "\n_exit status ${pyrc}_" >>"$out"
			echo "[abi python] exit $pyrc" | tee -a "$LOG"
			;;
		rules-added)
			# The actions the matrix gained (pinned host memory, host
			# registration, module unload, the legacy stream), measured
			# alone, kept in OUTDIR/rules-added.yaml for tools/rules-fold.
			echo -e "\n## Capture rules: the added actions, measured" >>"$out"
			section "$out" "rules (added actions)" $M rules --action host-alloc,host-free,host-register,host-unregister,module-unload,legacy-stream-launch,legacy-stream-launch-blocking-capture \
				--write-expect "$dir/rules-added.yaml" --format markdown
			;;
		speed)
			sourced "$out" scripts/gpu-speed.sh reclaim_speed "$dir/speed"
			sourced "$out" scripts/gpu-speed.sh first_launch "$dir/speed"
			sourced "$out" scripts/gpu-speed.sh sim_cost "$dir/speed"
			;;
		trace)
			# A dozen paired PyTorch runs of 12-14 s each: more than the
			# default bound.
			SECTION_LIMIT=${SECTION_LIMIT:-480} sourced "$out" scripts/gpu-trace.sh trace_section "$dir/trace"
			;;
		trace-cost)
			# 150 pairs of a 1.2 s loop and 24 of a 0.4 s one.
			SECTION_LIMIT=${SECTION_LIMIT:-540} sourced "$out" scripts/gpu-trace.sh trace_cost_section "$dir/trace-cost"
			;;
		repeat)
			# A hundred PyTorch processes of 9-15 s each, four at a time, and
			# the cache race's few hundred short runs: more than the default bound.
			SECTION_LIMIT=${SECTION_LIMIT:-900} sourced "$out" scripts/gpu-repeat.sh repeat_section "$dir/repeat"
			;;
		e2e)
			sourced "$out" scripts/gpu-e2e.sh stress_e2e "$dir/e2e"
			;;
		suite)
			sourced "$out" scripts/gpu-suite.sh suite_wall "$dir/suite"
			;;
		rules)
			# Every cell of the matrix, the ones configs/rules/h200-cuda.yaml
			# holds compared; all of them kept in OUTDIR/rules-measured.yaml
			# for tools/rules-fold to add the cells the file lacks.
			echo -e "\n## Capture rules: measured against the expectation (every cell)" >>"$out"
			section "$out" "rules" $M rules --expect configs/rules/h200-cuda.yaml --write-expect "$dir/rules-measured.yaml" --format markdown
			;;
		find)
			echo -e "\n## find: naive abandoned on a problem where it runs long" >>"$out"
			section "$out" "find (naive-long-gpu)" $M find --format markdown
			;;
		verify)
			echo -e "\n## Every kernel against the CPU reference (naive timed in full: MIOPEN_NAIVE_TIMEOUT=0)" >>"$out"
			for p in capture-small dilated-strided resnext-grouped resnet50-stem pointwise-256-64 depthwise; do
				section "$out" "find --problem $p" env MIOPEN_NAIVE_TIMEOUT=0 $M find --problem "$p" --samples 3 --format markdown
			done
			echo -e "\n## The committed PTX fallback (NVRTC switched off: MIOTOOL_NVRTC=off)" >>"$out"
			for p in dilated-strided pointwise-256-64; do
				section "$out" "find --problem $p, PTX" env MIOTOOL_NVRTC=off MIOPEN_NAIVE_TIMEOUT=0 $M find --problem "$p" --samples 3 --format markdown
			done
			section "$out" "stress-threads, PTX" env MIOTOOL_NVRTC=off $M stress-threads --cache=locked --runs 4 --jobs 2 --format markdown
			;;
		capture)
			echo -e "\n## capture: #12121 after an abandoned naive evaluation" >>"$out"
			section "$out" "capture matrix x${CAPTURE_REPEAT:-20}" $M capture --mode=all --reclaim=all --repeat "${CAPTURE_REPEAT:-20}" --format markdown
			;;
		replay)
			echo -e "\n## replay-only workload" >>"$out"
			section "$out" "replay x${REPLAY_REPEAT:-5}" $M replay --reclaim=all --repeat "${REPLAY_REPEAT:-5}" --deadline 3s --format markdown
			;;
		bench)
			echo -e "\n## Benchmarks (medians of 10 runs)" >>"$out"
			local raw=$dir/bench-raw.txt
			echo "[bench] running" | tee -a "$LOG"
			MIOTOOL_BENCH_BACKEND=$BACKEND "$BIN/bench.test" -test.run XXX -test.bench 'Abandon|CallbackToScratchFreed|Run' \
				-test.count 10 -test.benchtime 500x >"$raw" 2>>"$LOG"
			MIOTOOL_BENCH_BACKEND=$BACKEND "$BIN/bench.test" -test.run XXX -test.bench 'Conv' \
				-test.count 10 -test.benchtime 30x >>"$raw" 2>>"$LOG"
			{
				echo
				echo '```'
				echo "\$ MIOTOOL_BENCH_BACKEND=$BACKEND bin/bench.test -test.bench 'Abandon|CallbackToScratchFreed|Run' -test.count 10 -test.benchtime 500x"
				echo "\$ MIOTOOL_BENCH_BACKEND=$BACKEND bin/bench.test -test.bench Conv -test.count 10 -test.benchtime 30x"
				echo '```'
				echo
				grep -E '^(goos|goarch|cpu):' "$raw" | sed 's/^/    /'
				echo
				python3 scripts/benchmedians.py "$raw" \
					--ratio=BenchmarkRun/worker-$cores:BenchmarkRun/raw-launch-$cores \
					--ratio=BenchmarkRun/worker-$cores:BenchmarkRun/lazy-$cores \
					--ratio=BenchmarkRun/worker-pinned-$cores:BenchmarkRun/raw-launch-$cores \
					--ratio=BenchmarkRun/lazy-pinned-$cores:BenchmarkRun/raw-launch-$cores \
					--ratio=BenchmarkRun/guarded-pinned-$cores:BenchmarkRun/raw-launch-$cores
			} >>"$out" 2>>"$LOG"
			;;
		reclaim)
			# The hops of each policy from the kernel's end, run by run, are the
			# speed section's (scripts/gpu-speed.sh reclaim_speed).
			echo -e "\n## Reclaim: what Abandon and the launch path cost, paired in one loop (medians of ${RECLAIM_RUNS:-5} runs)" >>"$out"
			local rraw=$dir/reclaim-raw.txt bin
			bin=$(cd "$BIN" && pwd)
			echo "[reclaim] running" | tee -a "$LOG"
			MIOTOOL_BENCH_BACKEND=$BACKEND "$BIN/bench.test" -test.run XXX -test.bench 'Paired' \
				-test.count "${RECLAIM_RUNS:-5}" -test.benchtime 300x >"$rraw" 2>>"$LOG"
			# The hand-off on the host CPU, with the C stand-in driver (built with
			# gcc where there is one): its host functions run on a C thread of
			# their own, as the driver's callback thread does.
			(cd internal/hip/cuda && "$bin/cuda.test" -test.run XXX -test.bench HandoffStandIn \
				-test.count "${RECLAIM_RUNS:-5}" -test.benchtime 300x) >>"$rraw" 2>>"$LOG"
			{
				echo
				echo '```'
				echo "\$ MIOTOOL_BENCH_BACKEND=$BACKEND bin/bench.test -test.bench Paired -test.count ${RECLAIM_RUNS:-5} -test.benchtime 300x"
				echo "\$ (cd internal/hip/cuda && ../../../bin/cuda.test -test.bench HandoffStandIn -test.count ${RECLAIM_RUNS:-5} -test.benchtime 300x)"
				echo '```'
				echo
				echo "Ratios: Abandon / bare host-function enqueue on the same slot, the two alternating in one"
				echo "loop (goal ≤ 1.1); split separates the driver's share of Abandon from the tracker's own."
				echo "HandoffStandIn: callback entry to free start on the CPU (goal ≤ 10 µs)."
				echo
				grep -E '^(goos|goarch|cpu):' "$rraw" | awk '!seen[$0]++' | sed 's/^/    /'
				echo
				python3 scripts/benchmedians.py "$rraw"
			} >>"$out" 2>>"$LOG"
			;;
		heuristics)
			echo -e "\n## Heuristic model cache and inference on the host CPU (medians of 6 runs)" >>"$out"
			local hraw=$dir/heuristics-raw.txt
			echo "[heuristics] running" | tee -a "$LOG"
			"$BIN/cache.test" -test.run XXX -test.bench 'CacheHit|CacheHold' -test.count 6 >"$hraw" 2>>"$LOG"
			"$BIN/builtin.test" -test.run XXX -test.bench ScoresBuiltin -test.count 6 >>"$hraw" 2>>"$LOG"
			local ratios=() g
			for g in 1 2 8 64; do
				ratios+=("--ratio=BenchmarkCacheHit/locked/goroutines=$g-$cores:BenchmarkCacheHit/lockfree/goroutines=$g-$cores")
			done
			{
				echo
				echo '```'
				echo "\$ bin/cache.test -test.bench 'CacheHit|CacheHold' -test.count 6    # a hit of the model cache, ns per Get with g goroutines asking at once"
				echo "\$ bin/builtin.test -test.bench ScoresBuiltin -test.count 6    # one heuristic query: features, inference, ranking"
				echo '```'
				echo
				grep -E '^(goos|goarch|cpu):' "$hraw" | awk '!seen[$0]++' | sed 's/^/    /'
				echo
				python3 scripts/benchmedians.py "$hraw" "${ratios[@]}"
			} >>"$out" 2>>"$LOG"
			;;
		cudnn)
			# Without this run's Conv benchmarks there is nothing to compare:
			# write no section, so that an earlier one in the results file stays.
			if [ -s "$dir/bench-raw.txt" ]; then
				echo -e "\n## Fastest builtin solver against cuDNN (fp32)\n" >>"$out"
				python3 scripts/cudnn-compare.py "$dir/bench-raw.txt" configs/problems.yaml >>"$out" 2>>"$LOG"
				echo "[cudnn] exit $?" | tee -a "$LOG"
			else
				echo "[cudnn] skipped: no Conv benchmark output in $dir (run the bench section first)" | tee -a "$LOG"
			fi
			;;
		stress)
			echo -e "\n## stress-threads (ROCM-27477) on 2 cores (taskset -c 0,1), ${STRESS_RUNS:-200} fresh-process runs per cache policy" >>"$out"
			for c in unlocked locked lockfree; do
				section "$out" "stress-threads --cache=$c" taskset -c 0,1 $M stress-threads --cache=$c \
					--runs "${STRESS_RUNS:-200}" --jobs 2 --format markdown
			done
			echo -e "\n### A fresh-process run's wall time against the PyTorch test body, ${FRESH_RUNS:-10} and ${PYTORCH_RUNS:-5} runs, one at a time\n" >>"$out"
			$M stress-threads --cache=locked --runs "${FRESH_RUNS:-10}" --jobs 1 --format json >"$dir/stress-fresh.json" 2>>"$LOG"
			echo '```' >>"$out"
			echo "\$ $M stress-threads --cache=locked --runs ${FRESH_RUNS:-10} --jobs 1 --format json > stress-fresh.json" >>"$out"
			echo "\$ python3 scripts/pytorch-threads.py --runs ${PYTORCH_RUNS:-5} --miotool-json stress-fresh.json" >>"$out"
			echo '```' >>"$out"
			python3 scripts/pytorch-threads.py --runs "${PYTORCH_RUNS:-5}" --miotool-json "$dir/stress-fresh.json" >>"$out" 2>>"$LOG"
			echo "[stress] pytorch comparison exit $?" | tee -a "$LOG"
			;;
		targets)
			echo -e "\n## Real-library target: cuDNN" >>"$out"
			section "$out" "capture --target=cudnn" $M capture --target=cudnn --mode=all --format markdown
			section "$out" "stress-threads --target=cudnn" $M stress-threads --target=cudnn --runs "${TARGET_RUNS:-10}" --jobs 1 --format markdown
			echo -e "\n### miotool stress-threads --target=cudnn against the PyTorch test body, ${TARGET_RUNS:-10} fresh-process runs each, one at a time\n" >>"$out"
			$M stress-threads --target=cudnn --runs "${TARGET_RUNS:-10}" --jobs 1 --format json >"$dir/target-stress.json" 2>>"$LOG"
			echo '```' >>"$out"
			echo "\$ $M stress-threads --target=cudnn --runs ${TARGET_RUNS:-10} --jobs 1 --format json > target-stress.json" >>"$out"
			echo "\$ python3 scripts/pytorch-threads.py --runs ${TARGET_RUNS:-10} --miotool-json target-stress.json" >>"$out"
			echo '```' >>"$out"
			python3 scripts/pytorch-threads.py --runs "${TARGET_RUNS:-10}" --miotool-json "$dir/target-stress.json" >>"$out" 2>>"$LOG"
			echo "[targets] pytorch comparison exit $?" | tee -a "$LOG"
			;;
		*)
			echo "unknown section $s" >&2
			return 2
			;;
		esac
	done
	echo "wrote $out"
}

assemble() {
	local dir=$1 file=${2:-}
	local name
	# The device the sections ran on, as nvidia-smi named it in the doctor
	# section; this machine's own device only when no section says (the
	# sections are often assembled on another machine than the GPU's).
	name=$(cat "$dir"/sections-*.md 2>/dev/null | grep -m1 -oE '^NVIDIA [A-Za-z0-9 ]+' | sed 's/ *$//')
	[ -n "$name" ] || name=$("$BIN/miotool" --backend "$BACKEND" doctor --format json 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["device"]["name"])' 2>/dev/null)
	if [ -z "$file" ]; then
		[ -n "$name" ] || name=device
		file=docs/results/$(echo "$name" | tr 'A-Z ' 'a-z-').md
	fi
	mkdir -p "$(dirname "$file")"
	# Sections are the "## " blocks of every sections file, in the order
	# they first ran; a section run again later replaces the earlier one in
	# its place, and each keeps the line that says when and where its run was.
	python3 - "$file" "${name:-the GPU}" "$dir"/sections-*.md <<'PY'
import re
import sys
out, name, files = sys.argv[1], sys.argv[2], sys.argv[3:]
blocks = {}


def key(head):
    # "## stress-threads (ROCM-27477) on 2 cores, 100 runs" and the same
    # section with other counts are one section.
    return re.split(r" \(|:|,", head, maxsplit=1)[0]


# The sections of the results file as it stands come first, so that a
# section no new run replaced keeps its place, its run line and its figures.
try:
    prev = open(out).read().split("\n")
except FileNotFoundError:
    prev = []
head, body = None, []
for line in prev + ["## "]:
    if line.startswith("## "):
        if head is not None:
            text = "\n".join(body).strip("\n")
            stamp, _, rest = text.partition("\n\n")
            if not stamp.startswith("_Run at"):
                stamp, rest = "", text
            blocks[key(head)] = (head, stamp, rest.strip("\n"))
        head, body = line, []
    elif head is not None:
        body.append(line)

for f in sorted(files):
    lines = open(f).read().split("\n")
    stamp = lines[0] if lines and lines[0].startswith("_Run at") else ""
    head, body = None, []
    for line in lines[1:] + ["## "]:
        if line.startswith("## "):
            if head is not None:
                text = "\n".join(body).strip("\n")
                # A command whose exit status is missing was still running
                # when the run was stopped at its time limit.
                started = len(re.findall(r"^### .*\n\n```\n\$ [^\n]*\n```$", text, re.M))
                if started > text.count("_exit status"):
                    text += "\n\n_The last command above did not finish: the run was stopped at its time limit._"
                blocks[key(head)] = (head, stamp, text)
            head, body = line, []
        elif head is not None:
            body.append(line)
# Sections whose figures a later section now carries, measured another way.
retired = {
    # The hops from the kernel's end: the speed section's poller table
    # (scripts/gpu-speed.sh reclaim_speed), after the isolated variants
    # stopped counting the benchmark's own pause.
    "## Reclaim latency from the kernel's end",
}
for k in retired:
    blocks.pop(k, None)
with open(out, "w") as w:
    w.write(f"# miotool on {name}\n\n")
    w.write("Written by `scripts/gpu-check.sh` from miotool's own output and benchmark output;\n")
    w.write("each section names the command that produced it and the run it came from.\n")
    for head, stamp, body in blocks.values():
        w.write(f"\n{head}\n\n{stamp}\n\n{body}\n")
PY
	echo "wrote $file"
}

case ${1:-all} in
build) build ;;
run)
	[ $# -ge 2 ] || { echo "usage: $0 run OUTDIR [SECTION...]" >&2; exit 2; }
	dir=$2
	shift 2
	run "$dir" "$@"
	;;
assemble) assemble "$2" "${3:-}" ;;
all)
	build || exit 1
	d=$(mktemp -d)
	run "$d"
	assemble "$d"
	;;
*)
	echo "usage: $0 build | run OUTDIR [SECTION...] | assemble OUTDIR [FILE] | all" >&2
	exit 2
	;;
esac
