#!/usr/bin/env bash
# mutation-check.sh: proves each guard of the tracker, the handle, find, the
# find-db and the model caches by reintroducing the regression it prevents
# and requiring a named test to fail.
#
#   scripts/mutation-check.sh [--tier fast|full] [--only NAME] [--write FILE] [--timeout S]
#   scripts/mutation-check.sh --self-test
#   scripts/mutation-check.sh --applies    # only: does every patch still apply?
#
# Each regression is a patch kept beside the code it breaks, in a
# testdata/mutations folder of that package (NAME.patch), whose header,
# before the diff, names the guard, the test expected to catch it and the
# packages to test (keys in any case):
#
#   guard: a late callback never retires a reuse of its stream
#   test: TestLateCallbackIgnored          (several: A|B)
#   package: ./internal/streams            (or packages: with several)
#   flags: -race                           (optional: extra go test flags)
#   tier: fast                             (optional: part of the fast tier that CI runs)
#
# The script copies the tracked tree once to a temporary folder (the
# working tree is never touched), checks that the expected tests pass
# there unchanged, then applies each patch in turn, runs only those tests
# with a time limit and reverts it. A regression is "killed" only when an
# expected test itself fails: go test -v reports "--- FAIL: NAME" for it,
# or the test binary crashes (a panic or a fatal error) while it runs. It
# is "survived" when every expected test runs and passes, "hung" when they
# outrun the limit, "stale" when the patch no longer applies (the code it
# breaks has moved: rewrite the patch), and "broken" otherwise: the
# package no longer builds, its set-up (init, TestMain, a build tag) keeps
# the tests from running or fails after them, the binary dies outside
# them, or an expected test only skips. Such a result proves nothing
# about the guard and is never counted as a kill. Every expected test must run and pass (not only skip) on the
# unchanged tree, each name of a "test:" list on its own, or the check
# stops before it starts: a name that matches nothing could never kill
# anything. The copy sits beside a link to the shared reference data, when
# there is one, so tests that read it run instead of skipping.
#
# The tests run with TMPDIR in the check's own temporary folder, so that
# every file they leave and every test binary they start is in it: after
# each run, a process whose command line or working folder is there is a
# leftover of that run. It is named, killed, and fails the check.
#
# It exits 1 on any survivor, hang, stale or broken patch or leftover
# process, and 2 on bad usage or a baseline that does not pass.
#
# --self-test runs the check on its own fixture (scripts/testdata/
# mutation-selftest, a module of its own): each patch there says in an
# "expect:" line what the check must report for it (a regression a test
# catches, one that panics away from the test's goroutine, one that stops
# TestMain before the tests, one that fails it after them, one that
# panics in init, a build tag that hides the tests, one that does not
# build, one no test sees, and one that leaves a process running), and it
# exits 0 only when every result is the expected one. It runs the check
# with --module on that folder.
set -uo pipefail
cd "$(dirname "$0")/.."
script=$(pwd)/scripts/mutation-check.sh

tier=full
only=""
write=""
limit=${MUTATION_TIMEOUT:-240}
module=.
self_test=0
applies=0
while [ $# -gt 0 ]; do
	case $1 in
	--self-test) self_test=1; shift ;;
	--applies) applies=1; shift ;;
	--module) module=${2:-}; shift 2 ;;
	--module=*) module=${1#*=}; shift ;;
	--tier) tier=${2:-}; shift 2 ;;
	--tier=*) tier=${1#*=}; shift ;;
	--only) only=${2:-}; shift 2 ;;
	--only=*) only=${1#*=}; shift ;;
	--write) write=${2:-}; shift 2 ;;
	--write=*) write=${1#*=}; shift ;;
	--timeout) limit=${2:-}; shift 2 ;;
	--timeout=*) limit=${1#*=}; shift ;;
	-h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
	*) echo "mutation-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
case $tier in fast | full) ;; *) echo "mutation-check: --tier must be fast or full, not '$tier'" >&2; exit 2 ;; esac
case $limit in '' | *[!0-9]*) echo "mutation-check: --timeout must be a number of seconds, not '$limit'" >&2; exit 2 ;; esac

field() { # field NAME FILE: the header value, from the lines before the diff
	sed -n '/^diff --git /q;p' "$2" | grep -i -E "^$1s?:" | head -n 1 | sed -E 's/^[^:]*:[[:space:]]*//; s/[[:space:]]+$//'
}

# The fixture the self-test checks: its patches are not the module's own.
fixture=scripts/testdata/mutation-selftest

if [ $self_test = 1 ]; then
	# Run the check on the fixture, then hold each result to the patch's
	# "expect:" line and each "leaves: process" to a named, killed leftover.
	log=$(mktemp)
	trap 'rm -f "$log"' EXIT
	"$script" --module "$fixture" --timeout 120 >"$log" 2>&1
	rc=$?
	ok=1
	n=0
	while IFS= read -r p; do
		name=$(basename "$p" .patch)
		want=$(field Expect "$p")
		got=$(awk -v n="$name" '$3 == n && $1 ~ /^(killed|survived|hung|stale|broken)$/ { print $1; exit }' "$log")
		n=$((n + 1))
		if [ "$got" != "$want" ]; then
			echo "mutation-check self-test: $name was reported '${got:-nothing}', want '$want'" >&2
			ok=0
		fi
		if [ "$(field Leaves "$p")" = process ]; then
			pids=$(sed -n "s/^mutation-check: left running after $name: \([0-9]*\) .*/\1/p" "$log")
			if [ -z "$pids" ]; then
				echo "mutation-check self-test: the process $name leaves running was not named" >&2
				ok=0
			fi
			for pid in $pids; do
				if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- 'mutation-selftest\|\.test'; then
					echo "mutation-check self-test: the process $name left running ($pid) is still running" >&2
					ok=0
				fi
			done
		fi
	done < <(git ls-files -- "$fixture/*/testdata/mutations/*.patch")
	if [ "$rc" != 1 ]; then
		echo "mutation-check self-test: the check on the fixture exited $rc, want 1 (it has survivors, broken patches and a leftover)" >&2
		ok=0
	fi
	if [ $ok = 1 ] && [ $n -gt 0 ]; then
		echo "mutation-check self-test: PASS: each of the fixture's $n regressions reported as its patch expects"
		exit 0
	fi
	echo "mutation-check self-test: FAIL; the check's output was:" >&2
	cat "$log" >&2
	exit 1
fi

root=$(cd "$module" && pwd) || exit 2
cd "$root" || exit 2

patches=()
while IFS= read -r p; do
	name=$(basename "$p" .patch)
	[ -n "$only" ] && [ "$name" != "$only" ] && continue
	[ "$tier" = fast ] && [ "$(field Tier "$p")" != fast ] && continue
	for f in Guard Test Package; do
		if [ -z "$(field $f "$p")" ]; then
			echo "mutation-check: $p has no '$f:' line in its header" >&2
			exit 2
		fi
	done
	patches+=("$p")
done < <(git ls-files -- '*/testdata/mutations/*.patch' ":(exclude)$fixture/*")
if [ ${#patches[@]} -eq 0 ]; then
	echo "mutation-check: no regression selected (tier $tier${only:+, only $only})" >&2
	exit 2
fi

# --applies: a patch that no longer applies proves nothing, and the fast
# tier CI runs would not notice one of the full list going stale; this
# checks every selected patch against the tree as it is, in seconds.
if [ "$applies" = 1 ]; then
	stale_list=()
	for p in "${patches[@]}"; do
		git apply --check "$p" 2>/dev/null || stale_list+=("$p")
	done
	if [ ${#stale_list[@]} -gt 0 ]; then
		printf 'mutation-check: %d of %d regression patches no longer apply (the code they break has moved: rewrite them):\n' "${#stale_list[@]}" "${#patches[@]}" >&2
		printf '  %s\n' "${stale_list[@]}" >&2
		exit 1
	fi
	echo "mutation-check: all ${#patches[@]} regression patches apply"
	exit 0
fi

# What is tested is the tree as it is now: its commit, and whether it had
# changes not yet committed, are taken before the copy, not when the
# results are written (the tree may move on while the check runs).
tested=$(git rev-parse --short HEAD 2>/dev/null || echo 'an unknown commit')
[ -n "$(git status --porcelain --untracked-files=no -- . 2>/dev/null)" ] && tested="$tested with uncommitted changes"
scratch=$(mktemp -d)
work=$scratch/tree
mkdir "$work" "$scratch/tmp"
# Tests find the reference data in ../shared, beside the module.
[ -d "$root/../shared" ] && ln -s "$(cd "$root/../shared" && pwd)" "$scratch/shared"
git ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$work")
if ! git -C "$work" init -q 2>/dev/null; then
	echo "mutation-check: cannot prepare $work" >&2
	exit 2
fi

# leftovers: the processes the test runs left, one "PID COMMAND" line
# each: every process whose command line or working folder is in the
# scratch folder (the test binaries run from its tmp, in its tree). It
# waits a little first, for processes that were killed to finish dying.
leftovers() {
	local d pid cmd cwd found deadline=$((SECONDS + 5))
	while :; do
		found=""
		for d in /proc/[0-9]*; do
			pid=${d#/proc/}
			[ "$pid" = $$ ] && continue
			cmd=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
			[ -n "$cmd" ] || continue # a kernel thread, or a zombie
			cwd=$(readlink "$d/cwd" 2>/dev/null)
			case "$cmd $cwd/" in *"$scratch/"*) found+="$pid ${cmd% }"$'\n' ;; esac
		done
		if [ -z "$found" ] || [ $SECONDS -ge $deadline ]; then
			printf '%s' "$found"
			return
		fi
		sleep 0.2
	done
}

left=()
# reap WHAT: names and kills what the last run left running.
reap() {
	local pid cmd
	while IFS=' ' read -r pid cmd; do
		[ -n "$pid" ] || continue
		echo "mutation-check: left running after $1: $pid $cmd"
		kill -KILL "$pid" 2>/dev/null
		left+=("$1: $pid")
	done < <(leftovers)
}
trap 'reap "the check (interrupted)" >/dev/null; rm -rf "$scratch"' EXIT

run_tests() { # run_tests TEST PACKAGES FLAGS: go test's exit status, 124 on timeout
	local test=$1 pkgs=$2 flags=$3
	# shellcheck disable=SC2086
	(cd "$work" && TMPDIR=$scratch/tmp GOTMPDIR=$scratch/tmp timeout --kill-after=10 "$limit" \
		go test -v -count=1 $flags -run "^(${test})\$" $pkgs) >"$scratch/last.log" 2>&1
}

# verdict NAMES RC: what the last run, which exited RC, says of the
# expected tests NAMES (A|B). "killed by A" when A reported its own failure
# (a top-level "--- FAIL: A", which a panic on A's goroutine prints too) or
# the binary crashed while A ran (a panic or fatal error after
# "=== RUN   A" and before A's result); "survived" when every one of them
# ran and passed; else "broken" and why.
verdict() {
	awk -v names="$1" -v rc="$2" '
	BEGIN { n = split(names, list, "|"); for (i = 1; i <= n; i++) named[list[i]] = 1 }
	/^=== RUN   / { top = $3; sub(/\/.*/, "", top); if (top in named) { ran++; running[top] = 1 } }
	/^--- (PASS|FAIL|SKIP): / && ($3 in named) { delete running[$3]; result[$3] = $2 }
	/^(panic: |fatal error: )/ { for (r in running) crashed[r] = 1 }
	/\[build failed\]/ { build = 1 }
	/\[setup failed\]/ { setup = 1 }
	END {
		for (i = 1; i <= n; i++) if (result[list[i]] == "FAIL:" || (list[i] in crashed)) by = by (by == "" ? "" : ",") list[i]
		if (by != "") { print "killed by " by; exit }
		for (i = 1; i <= n; i++) {
			if (result[list[i]] == "SKIP:") skipped = skipped (skipped == "" ? "" : ",") list[i]
			else if (result[list[i]] != "PASS:") missing = missing (missing == "" ? "" : ",") list[i]
		}
		if (rc == 0 && skipped == "" && missing == "") { print "survived"; exit }
		if (build) reason = "the package does not build"
		else if (setup) reason = "go test could not set the package up"
		else if (ran == 0) reason = "no expected test ran: the set-up (init, TestMain, build tags) stopped them"
		else if (missing != "") reason = missing " did not run"
		else if (skipped != "") reason = skipped " only skipped"
		else reason = "no expected test failed: the binary failed outside them"
		print "broken: " reason
	}' "$scratch/last.log"
}

echo "mutation-check: tier $tier, ${#patches[@]} regressions, $limit s limit each, on $tested"

# The expected tests must pass on the unchanged tree, or a "killed" says nothing.
declare -A baseline=()
for p in "${patches[@]}"; do
	key="$(field Test "$p")|$(field Package "$p")|$(field Flags "$p")"
	[ -n "${baseline[$key]:-}" ] && continue
	if ! run_tests "$(field Test "$p")" "$(field Package "$p")" "$(field Flags "$p")"; then
		echo "mutation-check: the expected tests fail without any regression ($key); fix them first:" >&2
		grep -v -E '^(=== |    --- PASS|--- PASS)' "$scratch/last.log" | tail -n 30 >&2
		exit 2
	fi
	reap "the unchanged tree's $(field Test "$p")"
	IFS='|' read -r -a names <<<"$(field Test "$p")"
	for n in "${names[@]}"; do
		if ! grep -q -E "^--- PASS: ${n} " "$scratch/last.log"; then
			echo "mutation-check: $p expects $n, which does not run and pass on the unchanged tree (missing, or it only skips)" >&2
			exit 2
		fi
	done
	baseline[$key]=ok
done

rows=()
killed=0 survived=0 hung=0 stale=0 broken=0
for p in "${patches[@]}"; do
	name=$(basename "$p" .patch)
	guard=$(field Guard "$p")
	test=$(field Test "$p")
	start=$(date +%s.%N)
	why=""
	if ! git -C "$work" apply "$root/$p" 2>"$scratch/apply.log"; then
		result=stale
		stale=$((stale + 1))
	else
		run_tests "$test" "$(field Package "$p")" "$(field Flags "$p")"
		rc=$?
		case $rc in
		124 | 137) result=hung; hung=$((hung + 1)) ;;
		*)
			why=$(verdict "$test" "$rc")
			case $why in
			killed*) result=killed; killed=$((killed + 1)); why=${why#killed } ;;
			survived) result=survived; survived=$((survived + 1)); why="" ;;
			*) result=broken; broken=$((broken + 1)); why=${why#broken: } ;;
			esac
			;;
		esac
		git -C "$work" apply -R "$root/$p"
		reap "$name"
	fi
	secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	printf '  %-8s %6ss  %s%s\n' "$result" "$secs" "$name" "${why:+  ($why)}"
	rows+=("| $name | $guard | \`${test//|/\\|}\` | $result${why:+ ($why)} | $secs s |")
done

total=${#patches[@]}
table() {
	echo "| regression | guard | expected test | result | time |"
	echo "| --- | --- | --- | --- | --- |"
	printf '%s\n' "${rows[@]}"
	echo
	echo "Score: $killed of $total killed ($survived survived, $hung hung, $stale stale, $broken broken)."
	if [ ${#left[@]} -gt 0 ]; then
		echo
		echo "Left running, then killed: ${left[*]}."
	else
		echo "No test run left a process running."
	fi
}
echo
table

if [ -n "$write" ]; then
	{
		echo "# Mutation check"
		echo
		echo "Written by \`scripts/mutation-check.sh --tier $tier --write $write\`: each guard's"
		echo "regression applied to a copy of the tree, its expected test run with a ${limit} s limit;"
		echo "killed means an expected test itself failed."
		echo
		echo "_$(date -u +%Y-%m-%d), commit $tested, $(go version | cut -d' ' -f3), $(nproc) CPU cores_"
		echo
		table
	} >"$write"
	echo "wrote $write"
fi

[ $((survived + hung + stale + broken + ${#left[@]})) -eq 0 ]
