#!/usr/bin/env bash
# bench-repeat.sh: what miotool repeat costs beyond the program it repeats,
# against a shell loop of the same runs, the two paired.
#
#   scripts/bench-repeat.sh [RUNS [PAIRS]]     (default 1000 runs, 5 pairs)
#
# Each pair times, from the shell, a loop of RUNS runs of true (the
# executable, not the shell's builtin: each run a fresh process, as
# repeat's are) and `miotool repeat --runs RUNS -- true`, one after the
# other, the order swapped every pair so that neither always goes first.
# It prints a Markdown table of the pairs, the medians and miotool's own
# cost per run (the difference of the medians over RUNS); the goal is at
# most 5 ms per run, 5 s over 1000 runs. BIN (default: a build into a
# temporary folder) holds the miotool to time.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000}
pairs=${2:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${BIN:-}" ]; then
	miotool=$BIN/miotool
else
	go build -o "$tmp/miotool" ./cmd/miotool
	miotool=$tmp/miotool
fi
truebin=$(type -P true)

# timed LABEL COMMAND...: one run's wall time in seconds, appended to the
# times file; a command that fails stops the benchmark.
timed() {
	local label=$1 start end
	shift
	start=$(date +%s%N)
	"$@" >"$tmp/out" 2>"$tmp/err" </dev/null || {
		echo "bench-repeat: $label failed:" >&2
		cat "$tmp/err" >&2
		exit 1
	}
	end=$(date +%s%N)
	echo "$label $(((end - start) / 1000))" >>"$tmp/times"
}
shell_loop() {
	local i
	for ((i = 0; i < runs; i++)); do
		"$truebin"
	done
}

: >"$tmp/times"
for ((p = 1; p <= pairs; p++)); do
	if ((p % 2)); then
		timed shell shell_loop
		timed miotool "$miotool" --no-progress repeat --runs "$runs" -- "$truebin"
	else
		timed miotool "$miotool" --no-progress repeat --runs "$runs" -- "$truebin"
		timed shell shell_loop
	fi
done
# The last repeat's result must say every run passed: a timing of runs
# that did not run is no timing.
grep -q "^repeat: PASS - 0 of $runs runs failed" "$tmp/out" || {
	echo "bench-repeat: the last repeat did not pass every run:" >&2
	cat "$tmp/out" >&2
	exit 1
}

echo "miotool repeat --runs $runs -- true against a shell loop of $runs runs of $truebin, $pairs pairs, $(nproc) CPU cores"
echo
awk -v runs="$runs" '
	$1 == "shell" { s[++ns] = $2 / 1e6 }
	$1 == "miotool" { m[++nm] = $2 / 1e6 }
	function median(a, n,   i, j, t, b) {
		for (i = 1; i <= n; i++) b[i] = a[i]
		for (i = 2; i <= n; i++) for (j = i; j > 1 && b[j-1] > b[j]; j--) { t = b[j]; b[j] = b[j-1]; b[j-1] = t }
		return n % 2 ? b[(n+1)/2] : (b[n/2] + b[n/2+1]) / 2
	}
	END {
		print "| pair | shell loop (s) | miotool repeat (s) | difference per run (ms) |"
		print "| --- | --- | --- | --- |"
		for (i = 1; i <= ns && i <= nm; i++) printf "| %d | %.2f | %.2f | %.2f |\n", i, s[i], m[i], (m[i] - s[i]) * 1000 / runs
		ms = median(s, ns); mm = median(m, nm); d = (mm - ms) * 1000 / runs
		printf "\nMedians %.2f s for the shell loop, %.2f s for miotool repeat: %.2f ms per run beyond the program (goal at most 5 ms: %s).\n", ms, mm, d, d <= 5 ? "met" : "NOT MET"
	}' "$tmp/times"
