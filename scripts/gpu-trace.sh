#!/usr/bin/env bash
# gpu-trace.sh: the trace sections of the GPU results, on a machine with an
# NVIDIA GPU, PyTorch and a C compiler, as functions scripts/gpu-check.sh
# sources (its "trace" and "trace-cost" sections), or as a command:
#
#   scripts/gpu-trace.sh OUTDIR          # trace_section
#   scripts/gpu-trace.sh cost OUTDIR     # trace_cost_section
#
# trace_section OUTDIR runs `miotool trace --format markdown` on the
# PyTorch, CuPy and JAX cases of internal/trace/testdata and on miotool's
# own capture scenario (each run's observer records saved to
# OUTDIR/records/NAME.records with --save-records, for the golden tests of
# internal/cmd/trace), runs compute-sanitizer on the failing cases and puts
# what each tool names side by side, and shows the observer's records of
# Python lines and of a crash in a CUDA process (trace_records). It writes
# the section ("## trace ...") to OUTDIR/trace.md and prints it; one line
# per case goes to standard error as it finishes (and to
# OUTDIR/trace-summary.txt), and the commands' standard error to
# OUTDIR/trace.log. Every table is miotool's own Markdown; each case says
# its command, exit status, time and whether it gave the verdict and named
# the calls it should; the traced program's own output is quoted apart.
# trace_cost_section (below) times a launch-bound loop with and without
# the trace.
#
# Every command is bounded by `timeout` (TRACE_CASE_LIMIT, default 180 s,
# beside miotool's own watchdog of 150 s); the trace section takes about
# 5 minutes on the H200 (a PyTorch process starts in 3-5 s, and a run of
# pytorch-threads.py takes 12-14 s). BIN (default bin) holds miotool,
# built by `scripts/gpu-check.sh build`.

# trace_case OUT TITLE EXPECT NAMES... -- COMMAND...: runs a miotool trace
# command, appends its Markdown (the traced program's output quoted before
# it) and whether it gave verdict EXPECT with every name of NAMES in its
# headline, or anywhere in its tables for names that start with "@".
trace_case() {
	local out=$1 title=$2 expect=$3
	shift 3
	local names=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		names+=("$1")
		shift
	done
	shift
	local tmp start rc elapsed
	tmp=$(mktemp -d)
	{
		echo
		echo "### $title"
		echo
		echo '```'
		echo "$ $*"
		echo '```'
		echo
	} >>"$out"
	start=$(date +%s.%N)
	timeout -k 10 "${TRACE_CASE_LIMIT:-180}" "$@" >"$tmp/stdout" 2>"$tmp/stderr" </dev/null
	rc=$?
	TRACE_LAST_ELAPSED=
	elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	TRACE_LAST_ELAPSED=$elapsed
	# miotool's Markdown begins at its heading; what comes before it is the
	# traced program's own output.
	local at
	at=$(grep -n -m1 '^### trace: ' "$tmp/stdout" | cut -d: -f1)
	if [ -n "$at" ] && [ "$at" -gt 1 ]; then
		head -n $((at - 1)) "$tmp/stdout" >"$tmp/program"
	else
		: >"$tmp/program"
	fi
	if [ -s "$tmp/program" ]; then
		{
			local lines
			lines=$(wc -l <"$tmp/program")
			if [ "$lines" -gt 15 ]; then
				echo "The program's own standard output, the last 15 of its $lines lines:"
			else
				echo "The program's own standard output:"
			fi
			echo
			echo '```'
			tail -n 15 "$tmp/program"
			echo '```'
			echo
		} >>"$out"
	fi
	if [ -n "$at" ]; then
		tail -n +"$at" "$tmp/stdout" >"$tmp/md"
		cat "$tmp/md" >>"$out"
	else
		: >"$tmp/md"
		{
			echo "miotool wrote no result; the end of standard error:"
			echo
			echo '```'
			tail -n 15 "$tmp/stderr"
			echo '```'
		} >>"$out"
	fi
	# The verdict and the headline, with Markdown's escapes taken out.
	local verdict headline tables
	verdict=$(sed -n '1s/^### trace: //p' "$tmp/md")
	headline=$(sed -n '3p' "$tmp/md" | sed 's/\\//g')
	tables=$(sed 's/\\//g' "$tmp/md")
	local met=yes missing=""
	[ "$verdict" = "$expect" ] || met=no
	local n
	for n in "${names[@]}"; do
		case $n in
		@*) grep -qF -- "${n#@}" <<<"$tables" || { met=no; missing+=" ${n#@}"; } ;;
		*) grep -qF -- "$n" <<<"$headline" || { met=no; missing+=" $n"; } ;;
		esac
	done
	local want="$expect"
	[ ${#names[@]} -gt 0 ] && want+=" naming ${names[*]//@/}"
	{
		echo
		echo "_exit status $rc, $elapsed s; expected $want: $([ $met = yes ] && echo met || echo "NOT MET${missing:+ (missing:$missing)}")_"
	} >>"$out"
	cat "$tmp/stderr" >>"$TRACE_LOG"
	echo "[trace $title] ${verdict:-no result} (exit $rc, $elapsed s), expected $want: $([ $met = yes ] && echo met || echo "NOT MET$missing"): $headline" |
		tee -a "$TRACE_SUMMARY" >&2
	TRACE_LAST_HEADLINE="${verdict:-no result}: $headline"
	rm -rf "$tmp"
}

# trace_overhead OUT LOOP LAUNCHES PAIRS [TARGET]: a launch-bound loop
# (LOOP LAUNCHES: that many empty kernels on one stream) with and without
# the trace, paired (the order swaps every pair), each run's wall time
# from the shell and the launches' own time as the loop measured it; the
# table and the summary line of scripts/paired-overhead.py, which judges
# the ratio of the medians against TARGET only when its 95% interval is
# on one side of it.
trace_overhead() {
	local out=$1 loop=$2 launches=$3 pairs=$4 target=${5:-}
	local body=("$loop" "$launches")
	local traced=("$BIN/miotool" --no-progress trace --timeout 150s -- "${body[@]}")
	local times tmp i
	tmp=$(mktemp -d)
	times=$tmp/times
	: >"$times"
	# timed LABEL COMMAND...: one run, its wall time, exit status and the
	# loop's own time.
	timed() {
		local label=$1
		shift
		local s rc
		s=$(date +%s.%N)
		timeout -k 10 "${TRACE_CASE_LIMIT:-180}" "$@" >"$tmp/last" 2>>"$TRACE_LOG" </dev/null
		rc=$?
		echo "$label $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { printf "%.4f", b - a }') $rc" \
			"$(sed -n 's/^launch_loop: [0-9]* launches in \([0-9.]*\) ms.*/\1/p' "$tmp/last" | head -1)" >>"$times"
		# Under the trace the program must have run to its end: miotool says
		# SKIP (it captured nothing), exit 4, and that it exited 0.
		if [ "$label" = traced ] && ! grep -q 'the program exited with status 0' "$tmp/last"; then
			echo "[trace cost] a traced run did not end well (exit $rc): $(grep -m1 '^trace: ' "$tmp/last")" | tee -a "$TRACE_SUMMARY" >&2
		fi
	}
	echo "[trace cost] $pairs pairs of ${body[*]}" >&2
	for ((i = 1; i <= pairs; i++)); do
		if [ $((i % 2)) = 1 ]; then
			timed plain "${body[@]}"
			timed traced "${traced[@]}"
		else
			timed traced "${traced[@]}"
			timed plain "${body[@]}"
		fi
	done
	{
		echo
		echo "### $launches launches, $pairs pairs"
		echo
		echo '```'
		echo "$ ${body[*]}"
		echo "$ ${traced[*]}"
		echo '```'
		echo
		python3 scripts/paired-overhead.py "$times" ${target:+"$target"}
	} >>"$out" 2>>"$TRACE_LOG"
	echo "[trace cost] $launches launches: $(tail -n 1 "$out")" | tee -a "$TRACE_SUMMARY" >&2
	cp "$times" "$out.$launches.times"
	rm -rf "$tmp"
}

# trace_cost_section OUTDIR: the observer's cost, its own section: the
# launch-bound loop of TRACE_LAUNCHES (default 200,000) launches in
# TRACE_PAIRS (default 150) pairs, judged against 1.05; then the same loop
# with no launch (TRACE_FIXED_PAIRS, default 24), which is what any traced
# command pays once: miotool's start and end, CUPTI's load. On the H200 the
# loop alone drifts between 750 and 930 ms within seconds (the launches'
# own time, not the trace's): a hundred pairs put the pairs' median ratio
# within an interval of about ±0.016, so 150 are run. The section takes
# about 7 minutes there.
trace_cost_section() {
	local dir=$1
	local BIN=${BIN:-bin}
	mkdir -p "$dir"
	local out=$dir/trace-cost.md
	TRACE_LOG=$dir/trace-cost.log
	TRACE_SUMMARY=$dir/trace-cost-summary.txt
	: >"$out"
	: >"$TRACE_SUMMARY"
	{
		echo
		echo "## trace's cost: a launch-bound loop with and without the observer"
		echo
		echo "Each pair runs both, alternately (the order swaps every pair); wall times from the shell, the"
		echo "traced ones including miotool's start and its result; \"loop\" is the launches' own time as the"
		echo "program measured it. The ratio judged is the median of the pairs' own ratios (the two runs of a"
		echo "pair are next to each other in time, so the machine's drift largely cancels); its interval"
		echo "resamples the pairs, and the target is judged only when the whole interval is on one side of it."
	} >>"$out"
	local loop=$dir/launch_loop
	if ! nvcc -O2 -o "$loop" internal/trace/testdata/cuda/launch_loop.cu >>"$TRACE_LOG" 2>&1; then
		echo -e "\n_No launch loop: nvcc failed (see the log)._" >>"$out"
		cat "$out"
		return
	fi
	# One traced run first: the observer built and in the page cache. Its
	# records say the CUPTI scope the loop ran in (the observer's "scope"
	# notes): narrow, renarrowed after CUPTI went on calling, or full and
	# why. 2,000 launches are enough for a narrowing CUPTI ignored to show.
	"$BIN/miotool" --no-progress trace --save-records "$dir/scope.records" -- "$loop" 2000 >>"$TRACE_LOG" 2>&1 </dev/null
	local scope
	scope=$(awk -F '\t' '$2 == "note" && $6 == "scope" { printf "%s%s: %s", sep, $7, $8; sep = "; " }' "$dir/scope.records" 2>/dev/null)
	{
		echo
		echo "The observer's CUPTI scope in the loop's process, from its notes in a traced run of 2000 launches:"
		echo "${scope:-none said (an observer older than the scope notes, or no CUDA observed)}."
	} >>"$out"
	trace_overhead "$out" "$loop" "${TRACE_LAUNCHES:-200000}" "${TRACE_PAIRS:-150}" 1.05
	trace_overhead "$out" "$loop" 0 "${TRACE_FIXED_PAIRS:-24}"
	cat "$out"
}

# trace_records OUT: the observer's own records on this machine, read by
# the trace package's GPU tests (internal/trace/gpu_python_test.go): the
# Python line of each refused PyTorch call (CPython's stack read without
# waiting for the GIL) and the crash handler's report of a CUDA process
# that crashes through ctypes (native and Python frames). They need
# $BIN/trace.test (CGO_ENABLED=0 go test -c -o bin/trace.test
# ./internal/trace, built here when Go is on PATH); the section says so
# when there is none.
trace_records() {
	local out=$1 test=$BIN/trace.test
	if [ ! -x "$test" ] && command -v go >/dev/null; then
		CGO_ENABLED=0 go test -c -o "$test" ./internal/trace >>"$TRACE_LOG" 2>&1
	fi
	{
		echo
		echo "### The observer's records: Python lines and a crash in a CUDA process"
		echo
	} >>"$out"
	if [ ! -x "$test" ]; then
		echo "_No $test: build it with \`CGO_ENABLED=0 go test -c -o $test ./internal/trace\`._" >>"$out"
		echo "[trace records] no $test" | tee -a "$TRACE_SUMMARY" >&2
		return
	fi
	local abs tmp rc
	abs=$(cd "$(dirname "$test")" && pwd)/$(basename "$test")
	tmp=$(mktemp)
	(cd internal/trace && timeout -k 10 "${TRACE_CASE_LIMIT:-180}" "$abs" -test.run 'GPUPythonFrames|GPUCrashHandler' -test.v) >"$tmp" 2>&1
	rc=$?
	{
		echo '```'
		echo "$ (cd internal/trace && $test -test.run 'GPUPythonFrames|GPUCrashHandler' -test.v)"
		# The tests' own log lines and results, without the file:line prefixes.
		grep -E '^\s*(=== RUN|--- (PASS|FAIL|SKIP)|[a-z_]+\.go:[0-9]+: |    )' "$tmp" | sed -E 's/^(\s*)[a-z_]+\.go:[0-9]+: /\1/' | head -n 200
		echo '```'
		echo
		echo "_exit status ${rc}_"
	} >>"$out"
	echo "[trace records] exit $rc: $(grep -cE '^\s*--- PASS' "$tmp") passed, $(grep -cE '^\s*--- FAIL' "$tmp") failed, $(grep -cE '^\s*--- SKIP' "$tmp") skipped" |
		tee -a "$TRACE_SUMMARY" >&2
	cat "$tmp" >>"$TRACE_LOG"
	rm -f "$tmp"
}

# sanitizer_case OUT NAME COMMAND...: runs COMMAND under compute-sanitizer
# (memcheck, host backtraces, which carry Python frames) and appends one
# row to OUT/../sanitizer.tsv: the case, how many errors it reported, the
# first error's API call and the first Python frames of its backtrace, and
# the time. Its whole output goes to the log.
sanitizer_case() {
	local rows=$1 name=$2
	shift 2
	local cs tmp rc start elapsed
	cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -n 1)
	if [ -z "$cs" ]; then
		printf '%s\tno compute-sanitizer on this machine\t-\t-\n' "$name" >>"$rows"
		return
	fi
	tmp=$(mktemp)
	start=$(date +%s.%N)
	timeout -k 10 "${TRACE_CASE_LIMIT:-180}" "$cs" --tool memcheck --show-backtrace host --print-limit 20 "$@" >"$tmp" 2>&1 </dev/null
	rc=$?
	elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	python3 - "$tmp" "$name" "$elapsed" "$rc" >>"$rows" <<'PY'
import re
import sys

lines = open(sys.argv[1], errors="replace").read().splitlines()
errors = [i for i, l in enumerate(lines) if "Program hit" in l]
first = "-"
if errors:
    i = errors[0]
    m = re.search(r"Program hit (\S+).*?(?:API call to|call to) (\S+?)\.?$", lines[i])
    what = f"{m.group(2)}: {m.group(1)}" if m else lines[i].strip("= ").strip()
    frames = []
    for l in lines[i + 1:i + 80]:
        if "Program hit" in l:
            break
        f = re.search(r"(?:Host Frame|Python frame|Frame):\s*(\S+ in \S+\.py:\d+)", l) or re.search(r"(\S+ in \S+\.py:\d+)", l)
        if f:
            frames.append(f.group(1))
        if len(frames) == 3:
            break
    first = what + (" ← " + " ← ".join(frames) if frames else "; no Python frame")
print(f"{sys.argv[2]}\t{len(errors)}\t{first}\t{sys.argv[3]} s (exit {sys.argv[4]})")
PY
	cat "$tmp" >>"$TRACE_LOG"
	rm -f "$tmp"
}

# trace_section OUTDIR: the whole section, into OUTDIR/trace.md and to
# standard output.
trace_section() {
	local dir=$1
	local BIN=${BIN:-bin}
	mkdir -p "$dir/records"
	local out=$dir/trace.md
	TRACE_LOG=$dir/trace.log
	TRACE_SUMMARY=$dir/trace-summary.txt
	: >"$out"
	: >"$TRACE_SUMMARY"
	local side=$dir/side-by-side.tsv
	: >"$side"
	# T NAME: miotool trace in Markdown, saving the run's records as NAME.
	T() { echo "$BIN/miotool" --no-progress trace --format markdown --timeout 150s --save-records "$dir/records/$1.records" "${@:2}" --; }
	local td=internal/trace/testdata py=internal/trace/testdata/pytorch
	{
		echo
		echo "## trace: the call that broke a real program's capture, named in the program's words (PyTorch, CuPy, torch.compile, JAX, miotool), beside compute-sanitizer"
		echo
		echo "Each case is \`miotool trace --format markdown\` on a program; CUDA is observed through CUPTI"
		echo "callbacks (an injection library built on first use). The headline names the culprit by its"
		echo "Python line and thread; native callers read innermost first, ← meaning \"called from\"."
		echo "Each run's observer records are kept (--save-records) as test inputs of the trace's judgement."
	} >>"$out"
	# compare NAME TITLE EXPECT NAMES... -- PROGRAM...: the trace case, then
	# the same program under compute-sanitizer, one row of the side-by-side.
	compare() {
		local name=$1 title=$2 expect=$3
		shift 3
		local names=()
		while [ "$1" != -- ]; do names+=("$1"); shift; done
		shift
		# shellcheck disable=SC2046
		trace_case "$out" "$title" "$expect" "${names[@]}" -- $(T "$name") "$@"
		printf '%s\t%s\t%s s\n' "$title" "$TRACE_LAST_HEADLINE" "$TRACE_LAST_ELAPSED" >>"$side.miotool"
		sanitizer_case "$side" "$title" "$@"
	}
	: >"$side.miotool"
	compare pytorch-sync-thread "a metrics thread's torch.cuda.synchronize() during torch.cuda.graph (global)" FAIL \
		cuCtxSynchronize sync_thread.py: '"metrics"' @c10::cuda::device_synchronize -- python3 "$py/sync_thread.py"
	compare pytorch-query "torch.cuda.current_stream().query() inside the capture" FAIL \
		cuStreamQuery query.py: -- python3 "$py/query.py"
	compare pytorch-pin-memory "a pin-memory thread pins a batch during a global capture (the DataLoader pattern)" FAIL \
		pin_memory.py: '"pin_memory"' cuMemHostAlloc -- python3 "$py/pin_memory.py"
	# shellcheck disable=SC2046
	trace_case "$out" "a clean capture and replay, --strict" PASS "@hazards 0" -- $(T pytorch-clean-strict --strict) python3 "$py/clean.py"
	# shellcheck disable=SC2046
	trace_case "$out" "CuPy: a capture (CuPy's mode) while a loader thread allocates" PASS "@cupy_backends.cuda.api.runtime.malloc" '@"loader"' -- $(T cupy-alloc-thread) python3 "$td/cupy/alloc_thread.py"
	# shellcheck disable=SC2046
	trace_case "$out" "torch.compile(mode=\"reduce-overhead\"): PyTorch's own CUDA graphs" PASS "@hazards 0" -- $(T torch-compile) python3 "$py/compile_reduce_overhead.py"
	# shellcheck disable=SC2046
	trace_case "$out" "a jitted JAX loop with XLA's command buffers on" SKIP "built without capture" -- $(T jax-command-buffers) python3 "$td/jax/command_buffers.py"
	# shellcheck disable=SC2046
	trace_case "$out" "miotool capture --reclaim=lazy under the trace" FAIL \
		cuStreamQuery -- $(T miotool-lazy) "$BIN/miotool" --backend cuda --no-progress capture --mode=global --reclaim=lazy
	# shellcheck disable=SC2046
	trace_case "$out" "miotool capture --reclaim=worker under the trace" PASS \
		-- $(T miotool-worker) "$BIN/miotool" --backend cuda --no-progress capture --mode=global --reclaim=worker
	{
		echo
		echo "### What each tool names, on the same failing programs"
		echo
		echo "compute-sanitizer: \`compute-sanitizer --tool memcheck --show-backtrace host --print-limit 20 PROGRAM\`;"
		echo "its errors counted, and the first one's call with the first Python frames of its backtrace."
		echo
		echo "| case | miotool trace | compute-sanitizer: errors | its first error | time (trace, sanitizer) |"
		echo "| --- | --- | --- | --- | --- |"
		paste "$side.miotool" "$side" | awk -F'\t' '{ gsub(/\|/, "\\|"); printf "| %s | %s | %s | %s | %s, %s |\n", $1, $2, $5, $6, $3, $7 }'
	} >>"$out"
	tar -czf "$dir/records.tar.gz" -C "$dir" records 2>>"$TRACE_LOG"
	trace_records "$out"
	cat "$out"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -uo pipefail
	cd "$(dirname "$0")/.." || exit 2
	case $#:${1:-} in
	1:*) trace_section "$1" ;;
	2:cost) trace_cost_section "$2" ;;
	*) echo "usage: $0 OUTDIR | cost OUTDIR" >&2; exit 2 ;;
	esac
fi
