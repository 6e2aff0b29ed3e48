#!/bin/sh
# On a GPU machine, from the repository root with bin/miotool and
# bin/tunanet-collect built (CGO_ENABLED=0 go build -o bin/... ./cmd/miotool
# ./tools/tunanet-collect): stress-threads with the pre-fix and the fixed
# model cache on two CPU cores, and find results for miotool's TunaNet.
# Everything is written under OUT; the whole script keeps within BUDGET
# seconds (default 170) by sizing the number of runs from a first, timed one.
#
#   scripts/gpu-stress.sh OUT [BUDGET] [BACKEND]
#
# STRESS_ARGS adds flags to every stress-threads command (e.g. to try the
# script on the simulator with "--iters 20 --trials 1").
set -u
extra=${STRESS_ARGS:-}
out=${1:?usage: scripts/gpu-stress.sh OUT [BUDGET] [BACKEND]}
budget=${2:-170}
backend=${3:-cuda}
mkdir -p "$out"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
cores="taskset -c 0,1"
command -v taskset >/dev/null 2>&1 || cores=

./bin/miotool doctor --backend "$backend" > "$out/doctor.txt" 2>&1

# One run of the PyTorch test's defaults, timed: it sizes the comparisons.
s=$(date +%s%N)
timeout 60 $cores ./bin/miotool --backend "$backend" stress-threads --cache=locked --runs 1 $extra > "$out/stress-one.txt" 2>&1
echo "rc=$?" >> "$out/stress-one.txt"
one_ms=$(( ($(date +%s%N) - s) / 1000000 ))
[ "$one_ms" -lt 100 ] && one_ms=100
echo "one run took ${one_ms} ms" | tee "$out/timing.txt"

# The collection gets a third of what is left, the two comparisons the rest.
left=$(( budget - $(elapsed) - 10 ))
collect=$(( left / 3 ))
if [ "$collect" -ge 5 ]; then
	timeout "$collect" ./bin/tunanet-collect --backend "$backend" --out "$out/$backend-find.csv" --quiet > "$out/collect.log" 2>&1
	echo "collect rc=$? after $(elapsed)s" >> "$out/timing.txt"
fi

for cache in unlocked locked; do
	left=$(( budget - $(elapsed) - 5 ))
	[ "$cache" = unlocked ] && left=$(( left / 2 ))
	if [ "$left" -lt 5 ]; then
		echo "$cache: no time left after $(elapsed)s" >> "$out/timing.txt"
		continue
	fi
	# Two at a time, planned to fill half the phase: the rest is margin.
	runs=$(( left * 1000 * 2 / 2 / one_ms ))
	[ "$runs" -gt 50 ] && runs=50
	[ "$runs" -lt 1 ] && runs=1
	echo "$cache: $runs runs after $(elapsed)s" >> "$out/timing.txt"
	timeout "$left" $cores ./bin/miotool --backend "$backend" --no-progress stress-threads --cache="$cache" --runs "$runs" --jobs 2 $extra \
		> "$out/stress-$cache.txt" 2> "$out/stress-$cache.log"
	echo "$cache rc=$? after $(elapsed)s" >> "$out/timing.txt"
done
