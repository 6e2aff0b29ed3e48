#!/usr/bin/env bash
#SBATCH --job-name=miotool-suite
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gpus=1
#SBATCH --exclusive
#SBATCH --time=01:00:00
#SBATCH --output=miotool-suite-%A_%a.log
#
# Runs a miotool suite on every node of a Slurm cluster, one job-array task
# per node, then merges the nodes' results into one Testing Checklist.
#
# On the login node, from the repository root (a shared file system, with
# bin/miotool built: go build -o bin/miotool ./cmd/miotool):
#
#   scripts/slurm-suite.sh submit 8            # 8 nodes, configs/suites/pr12265.yaml
#   SUITE=configs/suites/rocm27477.yaml REPEAT=5 scripts/slurm-suite.sh submit 4
#
# This submits the array (this file, run by Slurm once per task) and a merge
# job that starts when every task has ended, whatever its exit status. The
# results land in results/<array job id>/: one <host>-<task>.json and .xml per
# task, then checklist.md (paste it into the PR) and fleet.xml (JUnit for CI).
# To merge by hand:
#
#   scripts/slurm-suite.sh merge results/<array job id>
#
# Settings, from the environment: MIOTOOL (the binary, default bin/miotool),
# SUITE, REPEAT (default 1), REPORT_FLAGS (more flags for `miotool report`,
# e.g. "--cpu-load 8 --env GPU_MAX_HW_QUEUES=3"), RESULTS_ROOT (default
# results). Add partition or account options to sbatch with SBATCH_* variables,
# e.g. SBATCH_PARTITION=gpu.
set -euo pipefail

MIOTOOL="${MIOTOOL:-bin/miotool}"
SUITE="${SUITE:-configs/suites/pr12265.yaml}"
REPEAT="${REPEAT:-1}"
REPORT_FLAGS="${REPORT_FLAGS:-}"
RESULTS_ROOT="${RESULTS_ROOT:-results}"

merge() {
	local dir="$1"
	shopt -s nullglob
	local files=("$dir"/*.json)
	if ((${#files[@]} == 0)); then
		echo "no suite results in $dir" >&2
		exit 2
	fi
	# Exit 1 means a check missed its expectation on some node: the table says
	# which, and it is still the table to read.
	local rc=0
	"$MIOTOOL" report merge "${files[@]}" --format markdown --junit "$dir/fleet.xml" >"$dir/checklist.md" || rc=$?
	echo "merged ${#files[@]} results into $dir/checklist.md and $dir/fleet.xml (exit $rc)"
	return "$rc"
}

case "${1:-}" in
submit)
	nodes="${2:?usage: scripts/slurm-suite.sh submit NODES}"
	array_id="$(sbatch --parsable --array="0-$((nodes - 1))" --export=ALL "$0")"
	array_id="${array_id%%;*}"
	mkdir -p "$RESULTS_ROOT/$array_id"
	sbatch --parsable --job-name=miotool-merge --dependency="afterany:$array_id" \
		--nodes=1 --ntasks=1 --time=00:10:00 --output="$RESULTS_ROOT/$array_id/merge.log" \
		--export=ALL --wrap="$0 merge $RESULTS_ROOT/$array_id"
	echo "array job $array_id: results in $RESULTS_ROOT/$array_id/"
	;;
merge)
	merge "${2:?usage: scripts/slurm-suite.sh merge DIR}"
	;;
"")
	# One task of the array, on its node.
	: "${SLURM_ARRAY_JOB_ID:?run this through 'scripts/slurm-suite.sh submit NODES'}"
	dir="$RESULTS_ROOT/$SLURM_ARRAY_JOB_ID"
	mkdir -p "$dir"
	host="$(hostname -s)"
	out="$dir/$host-${SLURM_ARRAY_TASK_ID:-0}"
	rc=0
	# shellcheck disable=SC2086 # REPORT_FLAGS is a list of flags
	"$MIOTOOL" report --suite "$SUITE" --repeat "$REPEAT" $REPORT_FLAGS \
		--host "$host" --format json --junit "$out.xml" >"$out.json.part" || rc=$?
	# 1 (a check not as expected) is a result; 2 and up mean the run broke,
	# and what it printed is kept apart from the results the merge reads.
	if ((rc <= 1)); then
		mv "$out.json.part" "$out.json"
		echo "$host: suite exit $rc, result in $out.json"
	else
		mv "$out.json.part" "$out.json.failed"
		echo "$host: suite exit $rc, no result (see this log and $out.json.failed)" >&2
		exit "$rc"
	fi
	;;
*)
	echo "usage: scripts/slurm-suite.sh submit NODES | merge DIR" >&2
	exit 2
	;;
esac
