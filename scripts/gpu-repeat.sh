#!/usr/bin/env bash
# gpu-repeat.sh: the repeat section of the GPU results, on a machine with an
# NVIDIA GPU, PyTorch and a C compiler, as a function scripts/gpu-check.sh
# sources (its "repeat" section), or as a command:
#
#   scripts/gpu-repeat.sh OUTDIR
#
# repeat_section OUTDIR runs `miotool repeat --format markdown` on:
#   - the body of PyTorch's test_cudnn_multiple_threads_same_device
#     (scripts/pytorch-threads.py --once), REPEAT_RUNS (default 100) fresh
#     processes, REPEAT_JOBS (default 4) at a time: its failure rate's bound;
#   - libcache_race (internal/repeat/testdata/gpu/cache_race.c, built here
#     with gcc), ROCM-27477's unlocked model cache in a CUDA process of its
#     own, called from two Python threads through ctypes (cache_race.py):
#     RACE_RUNS (default 100) runs, its crashes grouped by where they
#     happened, with the crashing thread's Python frames;
#   - the same cache with the fix's lock against the unlocked one, both run
#     interleaved run by run (--against): whether the fix is shown, and the
#     runs per build that would show it if it is not.
# It writes the section ("## repeat ...") to OUTDIR/repeat.md and prints it;
# one line per case goes to standard error as it finishes (and to
# OUTDIR/repeat-summary.txt), miotool's standard error to OUTDIR/repeat.log.
# Every table is miotool's own Markdown. RACE_JITTER_US (default 200) is
# the longest a model load waits (the wider, the rarer the crash).
#
# Each case is bounded by `timeout` (REPEAT_CASE_LIMIT, default 600 s).
# The PyTorch runs take 9-15 s each (a PyTorch process starts in 3-5 s),
# so 100 of them four at a time take some 5 minutes; the cache race's runs
# well under a second each. BIN (default bin) holds miotool, built by
# `scripts/gpu-check.sh build`.

# repeat_case OUT TITLE EXPECT COMMAND...: runs a miotool repeat command,
# appends its Markdown, its exit status and time, and whether its verdict
# is one of EXPECT (e.g. "PASS" or "PASS|FAIL").
repeat_case() {
	local out=$1 title=$2 expect=$3
	shift 3
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
	timeout -k 10 "${REPEAT_CASE_LIMIT:-600}" "$@" >"$tmp/stdout" 2>"$tmp/stderr" </dev/null
	rc=$?
	elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	if grep -q '^### repeat: ' "$tmp/stdout"; then
		cat "$tmp/stdout" >>"$out"
	else
		{
			echo "miotool wrote no result; the end of standard error:"
			echo
			echo '```'
			tail -n 15 "$tmp/stderr"
			echo '```'
		} >>"$out"
	fi
	local verdict headline met=no
	verdict=$(sed -n '1s/^### repeat: //p' "$tmp/stdout")
	headline=$(sed -n '3p' "$tmp/stdout" | sed 's/\\//g')
	case "|$expect|" in *"|$verdict|"*) met=yes ;; esac
	{
		echo
		echo "_exit status $rc, $elapsed s; expected $expect: $([ $met = yes ] && echo met || echo "NOT MET")_"
	} >>"$out"
	cat "$tmp/stderr" >>"$REPEAT_LOG"
	echo "[repeat $title] ${verdict:-no result} (exit $rc, $elapsed s), expected $expect: $([ $met = yes ] && echo met || echo "NOT MET"): $headline" |
		tee -a "$REPEAT_SUMMARY" >&2
	rm -rf "$tmp"
}

# repeat_section OUTDIR: the whole section, into OUTDIR/repeat.md and to
# standard output.
repeat_section() {
	local dir=$1
	local BIN=${BIN:-bin}
	mkdir -p "$dir"
	local out=$dir/repeat.md
	REPEAT_LOG=$dir/repeat.log
	REPEAT_SUMMARY=$dir/repeat-summary.txt
	: >"$out"
	: >"$REPEAT_SUMMARY"
	local runs=${REPEAT_RUNS:-100} jobs=${REPEAT_JOBS:-4} race_runs=${RACE_RUNS:-100} jitter=${RACE_JITTER_US:-200}
	local R=("$BIN/miotool" --no-progress repeat --format markdown)
	local py
	py=$(python3 -c 'import sys; print(sys.executable)')
	{
		echo
		echo "## repeat: the PyTorch test body $runs times, and a CUDA program that crashes now and then"
		echo
		echo "Each case is \`miotool repeat --format markdown\`: every run a fresh process, its end counted"
		echo "(passed, failed, crashed with its signal, hung), the runs that did not pass grouped by where"
		echo "they ended, the rate with its exact interval, and against the unfixed build the one-sided"
		echo "Fisher exact test. Python runs with -X faulthandler, so a crashing Python thread names its"
		echo "Python frames."
	} >>"$out"
	repeat_case "$out" "PyTorch's test_cudnn_multiple_threads_same_device body, $runs fresh processes, $jobs at a time" PASS \
		"${R[@]}" --runs "$runs" --jobs "$jobs" --timeout 5m -- "$py" scripts/pytorch-threads.py --once

	local lib=$dir/libcache_race.so src=internal/repeat/testdata/gpu
	if ! gcc -std=gnu11 -O1 -g -Wall -Wextra -Werror -shared -fPIC -o "$lib" "$src/cache_race.c" -ldl -pthread 2>>"$REPEAT_LOG"; then
		echo -e "\nlibcache_race did not build (gcc; see repeat.log): the cache race's cases were not run." >>"$out"
		echo "[repeat] libcache_race did not build" | tee -a "$REPEAT_SUMMARY" >&2
		cat "$out"
		return
	fi
	local race=("$py" -X faulthandler "$src/cache_race.py" "$lib" 3)
	repeat_case "$out" "libcache_race: the unlocked model cache from two Python threads in a CUDA process, $race_runs runs" FAIL \
		"${R[@]}" --runs "$race_runs" --jobs "$jobs" --timeout 2m --env CACHE_RACE_JITTER_US="$jitter" -- "${race[@]}"
	repeat_case "$out" "libcache_race: the fix's lock against the unlocked cache, interleaved run by run, $race_runs runs each" "PASS|FAIL" \
		"${R[@]}" --runs "$race_runs" --jobs "$jobs" --timeout 2m --env CACHE_RACE_JITTER_US="$jitter" \
		--against "env CACHE_RACE_LOCKED=0 ${race[*]}" -- env CACHE_RACE_LOCKED=1 "${race[@]}"
	cat "$out"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -uo pipefail
	cd "$(dirname "$0")/.." || exit 2
	[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
	repeat_section "$1"
fi
