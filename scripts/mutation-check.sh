#!/usr/bin/env bash
# mutation-check.sh: proves each guard of the tracker, the handle, find, the
# find-db and the model caches by reintroducing the regression it prevents
# and requiring a named test to fail.
#
#   scripts/mutation-check.sh [--tier fast|full] [--only NAME] [--write FILE] [--timeout S]
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
# with a time limit and reverts it. A regression is "killed" when the tests
# fail, "survived" when they pass, "hung" when they outrun the limit, and
# "stale" when the patch no longer applies (the code it breaks has moved:
# rewrite the patch), and "broken" when the patched package no longer
# compiles: a regression is a change of behaviour, so a build failure
# proves nothing about the guard and is never counted as a kill. Every
# expected test must run and pass (not only skip) on the unchanged tree,
# each name of a "test:" list on its own, or the check stops before it
# starts: a name that matches nothing could never kill anything. The
# copy sits beside a link to the shared reference data, when there is
# one, so tests that read it run instead of skipping. It exits 1 on any
# survivor, hang, stale or broken patch, and 2 on bad usage or a
# baseline that does not pass.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

tier=full
only=""
write=""
limit=${MUTATION_TIMEOUT:-240}
while [ $# -gt 0 ]; do
	case $1 in
	--tier) tier=${2:-}; shift 2 ;;
	--tier=*) tier=${1#*=}; shift ;;
	--only) only=${2:-}; shift 2 ;;
	--only=*) only=${1#*=}; shift ;;
	--write) write=${2:-}; shift 2 ;;
	--write=*) write=${1#*=}; shift ;;
	--timeout) limit=${2:-}; shift 2 ;;
	--timeout=*) limit=${1#*=}; shift ;;
	-h | --help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "mutation-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
case $tier in fast | full) ;; *) echo "mutation-check: --tier must be fast or full, not '$tier'" >&2; exit 2 ;; esac
case $limit in '' | *[!0-9]*) echo "mutation-check: --timeout must be a number of seconds, not '$limit'" >&2; exit 2 ;; esac

field() { # field NAME FILE: the header value, from the lines before the diff
	sed -n '/^diff --git /q;p' "$2" | grep -i -E "^$1s?:" | head -n 1 | sed -E 's/^[^:]*:[[:space:]]*//; s/[[:space:]]+$//'
}

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
done < <(git ls-files '*/testdata/mutations/*.patch')
if [ ${#patches[@]} -eq 0 ]; then
	echo "mutation-check: no regression selected (tier $tier${only:+, only $only})" >&2
	exit 2
fi

# What is tested is the tree as it is now: its commit, and whether it had
# changes not yet committed, are taken before the copy, not when the
# results are written (the tree may move on while the check runs).
tested=$(git rev-parse --short HEAD 2>/dev/null || echo 'an unknown commit')
[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && tested="$tested with uncommitted changes"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
work=$scratch/tree
mkdir "$work"
# Tests find the reference data in ../shared, beside the module.
[ -d "$root/../shared" ] && ln -s "$(cd "$root/../shared" && pwd)" "$scratch/shared"
git ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$work")
if ! git -C "$work" init -q 2>/dev/null; then
	echo "mutation-check: cannot prepare $work" >&2
	exit 2
fi

run_tests() { # run_tests TEST PACKAGES FLAGS: go test's exit status, 124 on timeout
	local test=$1 pkgs=$2 flags=$3
	# shellcheck disable=SC2086
	(cd "$work" && timeout --kill-after=10 "$limit" go test -v -count=1 $flags -run "^(${test})\$" $pkgs) >"$scratch/last.log" 2>&1
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
	if ! git -C "$work" apply "$root/$p" 2>"$scratch/apply.log"; then
		result=stale
		stale=$((stale + 1))
	else
		run_tests "$test" "$(field Package "$p")" "$(field Flags "$p")"
		rc=$?
		if [ $rc -ne 0 ] && grep -q -E '\[(build|setup) failed\]' "$scratch/last.log"; then
			rc=broken
		fi
		case $rc in
		0) result=survived; survived=$((survived + 1)) ;;
		124 | 137) result=hung; hung=$((hung + 1)) ;;
		broken) result=broken; broken=$((broken + 1)) ;;
		*) result=killed; killed=$((killed + 1)) ;;
		esac
		git -C "$work" apply -R "$root/$p"
	fi
	secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	printf '  %-8s %6ss  %s\n' "$result" "$secs" "$name"
	rows+=("| $name | $guard | \`${test//|/\\|}\` | $result | $secs s |")
done

total=${#patches[@]}
table() {
	echo "| regression | guard | expected test | result | time |"
	echo "| --- | --- | --- | --- | --- |"
	printf '%s\n' "${rows[@]}"
	echo
	echo "Score: $killed of $total killed ($survived survived, $hung hung, $stale stale, $broken broken)."
}
echo
table

if [ -n "$write" ]; then
	{
		echo "# Mutation check"
		echo
		echo "Written by \`scripts/mutation-check.sh --tier $tier --write $write\`: each guard's"
		echo "regression applied to a copy of the tree, its expected test run with a ${limit} s limit."
		echo
		echo "_$(date -u +%Y-%m-%d), commit $tested, $(go version | cut -d' ' -f3), $(nproc) CPU cores_"
		echo
		table
	} >"$write"
	echo "wrote $write"
fi

[ $((survived + hung + stale + broken)) -eq 0 ]
