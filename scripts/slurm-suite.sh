#!/usr/bin/env bash
#SBATCH --job-name=miotool-suite
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --time=01:00:00
#
# Runs a miotool suite over a Slurm cluster as a job array, one task per
# part, and a merge job that starts when every task has ended, whatever
# its exit status (--dependency=afterany), and merges the parts' results
# into one Testing Checklist.
#
# On the login node, from the repository root (a shared file system, with
# bin/miotool built: go build -o bin/miotool ./cmd/miotool):
#
#   scripts/slurm-suite.sh submit shards 4   # configs/suites/pr12265.yaml split in 4 shards
#   scripts/slurm-suite.sh submit hosts 8    # the whole suite on each of 8 nodes
#   SUITE=configs/suites/rocm27477.yaml DURATIONS=last/checklist.json scripts/slurm-suite.sh submit shards 3
#
# What a task runs is its kind:
#   shards N  task I of the array runs shard I/N of the suite
#             (miotool report --suite SUITE --shard I/N), balanced by the
#             durations of an earlier result when DURATIONS names one;
#   hosts N   every task runs the whole suite, REPEAT times, on its node
#             (compare machines; --exclusive keeps one task per node).
# A kind is one case of task_command below.
#
# submit holds the array until the results folder, results/<array job
# id>/, exists, submits the merge job, then releases the array. The folder
# gets task-I.json and task-I.xml (each task's result), task-I.log, then
# checklist.md (paste it into the PR), checklist.json and fleet.xml (JUnit
# for CI). A task that Slurm stops (scancel, its time limit) keeps its
# result: miotool records the check it was running as interrupted and
# the checks after it as not run. A task that left no result is named at
# the top of checklist.md, never silently absent, and the merge exits 2.
# For shards, the others are merged with --allow-missing-shards (miotool
# refuses a set with a shard missing without it): the checklist's header
# and summary name the missing shards, and each of their checks is "Not
# run (shard I/N missing)".
# To merge by hand, e.g. after a task was run again:
#
#   scripts/slurm-suite.sh merge results/<array job id>
#
# Settings, from the environment when submitting: MIOTOOL (the binary,
# default bin/miotool), SUITE (default configs/suites/pr12265.yaml), REPEAT
# (hosts: runs of each check, default 1), DURATIONS (shards: an earlier
# result to balance the split by), REPORT_FLAGS (more flags for `miotool
# report`, e.g. "--cpu-load 8 --env GPU_MAX_HW_QUEUES=3" or "--devices
# 0,1,2,3" to spread a task's checks over its node's GPUs), GPUS (GPUs per
# task, default 1; 0 asks for none, e.g. with --backend sim), EXCLUSIVE
# (default 1: a task has its node to itself, as timing checks need; 0
# shares it), RESULTS_ROOT (default results). Partition, account or time
# limit go to sbatch as SBATCH_* variables, e.g. SBATCH_PARTITION=gpu,
# SBATCH_TIMELIMIT=02:00:00.
set -euo pipefail

MIOTOOL="${MIOTOOL:-bin/miotool}"
SUITE="${SUITE:-configs/suites/pr12265.yaml}"
REPEAT="${REPEAT:-1}"
DURATIONS="${DURATIONS:-}"
REPORT_FLAGS="${REPORT_FLAGS:-}"
RESULTS_ROOT="${RESULTS_ROOT:-results}"
GPUS="${GPUS:-1}"
EXCLUSIVE="${EXCLUSIVE:-1}"

usage() {
	echo "usage: scripts/slurm-suite.sh submit shards|hosts COUNT | merge DIR" >&2
	exit 2
}

# task_command KIND INDEX COUNT sets cmd to what task INDEX of COUNT runs,
# before the output flags every task gets; it fails for an unknown kind.
task_command() {
	local kind="$1" index="$2" count="$3"
	# shellcheck disable=SC2206 # REPORT_FLAGS is a list of flags
	local flags=($REPORT_FLAGS)
	case "$kind" in
	shards)
		cmd=("$MIOTOOL" report --suite "$SUITE" --shard "$index/$count")
		if [[ -n "$DURATIONS" ]]; then
			cmd+=(--durations "$DURATIONS")
		fi
		cmd+=("${flags[@]}")
		;;
	hosts)
		cmd=("$MIOTOOL" report --suite "$SUITE" --repeat "$REPEAT" "${flags[@]}")
		;;
	*)
		return 1
		;;
	esac
}

# what_task KIND INDEX COUNT is how the checklist names a task.
what_task() {
	case "$1" in
	shards) echo "shard $2/$3" ;;
	*) echo "task $2 of $3" ;;
	esac
}

submit() {
	local kind="${1:-}" count="${2:-}"
	[[ -n "$kind" && -n "$count" ]] || usage
	if ! task_command "$kind" 1 1; then
		echo "scripts/slurm-suite.sh: unknown kind $kind: want shards or hosts" >&2
		exit 2
	fi
	if ! [[ "$count" =~ ^[1-9][0-9]*$ ]] || ((count > 1000)); then
		echo "scripts/slurm-suite.sh: $count: want a count of tasks from 1 to 1000" >&2
		exit 2
	fi
	local self
	self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
	local opts=(--parsable --hold --array="1-$count" --output="$RESULTS_ROOT/%A/task-%a.log")
	if ((GPUS > 0)); then
		opts+=(--gres="gpu:$GPUS")
	fi
	if [[ "$EXCLUSIVE" == 1 ]]; then
		opts+=(--exclusive)
	fi
	local array_id
	array_id="$(sbatch "${opts[@]}" "$self")"
	array_id="${array_id%%;*}"
	# Held until its folder and the merge job exist; cancelled if they
	# cannot be made, so nothing is left waiting in the queue.
	trap 'scancel "$array_id" 2>/dev/null; echo "scripts/slurm-suite.sh: submitting failed; array job $array_id cancelled" >&2' ERR
	local dir="$RESULTS_ROOT/$array_id"
	mkdir -p "$dir"
	KIND="$kind" COUNT="$count"
	declare -p KIND COUNT MIOTOOL SUITE REPEAT DURATIONS REPORT_FLAGS >"$dir/submit.env"
	local merge_id
	merge_id="$(sbatch --parsable --job-name=miotool-merge --dependency="afterany:$array_id" \
		--nodes=1 --ntasks=1 --time=00:10:00 --output="$dir/merge.log" \
		--wrap="$(printf '%q ' "$self" merge "$dir")")"
	merge_id="${merge_id%%;*}"
	scontrol release "$array_id"
	trap - ERR
	echo "array job: $array_id"
	echo "merge job: $merge_id"
	echo "results: $dir/"
}

# task runs one task of the array, on its node.
task() {
	: "${SLURM_ARRAY_JOB_ID:?run this through scripts/slurm-suite.sh submit}"
	local dir="$RESULTS_ROOT/$SLURM_ARRAY_JOB_ID"
	# shellcheck source=/dev/null
	source "$dir/submit.env"
	local index="$SLURM_ARRAY_TASK_ID" host
	host="$(hostname -s)"
	local out="$dir/task-$index"
	task_command "$KIND" "$index" "$COUNT"
	# Slurm signals every process of the task when it stops it (scancel,
	# the time limit): miotool then records the check it was running as
	# interrupted and writes its result, which this shell waits for and
	# keeps rather than dying first.
	trap 'echo "$host: stopped by Slurm; keeping what miotool records"' TERM INT
	local rc=0
	"${cmd[@]}" --host "$host" --format json --junit "$out.xml" >"$out.json.part" || rc=$?
	# 0 and 1 (checks met or not), 4 (nothing tested) and 130 or 143
	# (interrupted) come with a result; 2, 3 and the rest mean the run broke,
	# and what it printed is kept apart from the results the merge reads.
	case "$rc" in
	0 | 1 | 4 | 130 | 143)
		if [[ -s "$out.json.part" ]]; then
			mv "$out.json.part" "$out.json"
			echo "$host: $(what_task "$KIND" "$index" "$COUNT"): exit $rc, result in $out.json"
			exit 0
		fi
		;;
	esac
	mv "$out.json.part" "$out.json.failed"
	echo "$host: $(what_task "$KIND" "$index" "$COUNT"): exit $rc, no result (see this log and $out.json.failed)" >&2
	exit "$((rc == 0 ? 3 : rc))"
}

merge() {
	local dir="$1"
	# shellcheck source=/dev/null
	source "$dir/submit.env"
	local files=() missing=() i
	for ((i = 1; i <= COUNT; i++)); do
		if [[ -f "$dir/task-$i.json" ]]; then
			files+=("$dir/task-$i.json")
		else
			missing+=("$(what_task "$KIND" "$i" "$COUNT") (see $dir/task-$i.log)")
		fi
	done
	local rc=0 take=()
	if [[ "$KIND" == shards ]] && ((${#missing[@]} > 0 && ${#files[@]} > 0)); then
		# miotool refuses a set of shards with one missing unless told to
		# take what is there; told, its checklist names the missing ones.
		take=(--allow-missing-shards)
		echo "merging ${#files[@]} of $COUNT results with --allow-missing-shards; missing: ${missing[*]}" >&2
	fi
	if ((${#files[@]} > 0)); then
		# Exit 1 means a check missed its expectation somewhere: the table
		# says which, and it is still the table to read.
		"$MIOTOOL" report merge "${take[@]}" "${files[@]}" --format markdown --junit "$dir/fleet.xml" \
			--export-json "$dir/checklist.json" >"$dir/checklist.md.part" || rc=$?
	else
		: >"$dir/checklist.md.part"
	fi
	if ((${#missing[@]} > 0)); then
		{
			echo "**Missing: ${#missing[@]} of $COUNT ${KIND} left no result; this checklist holds only the others.**"
			printf -- '- %s\n' "${missing[@]}"
			echo
			cat "$dir/checklist.md.part"
		} >"$dir/checklist.md"
		rm -f "$dir/checklist.md.part"
		echo "merged ${#files[@]} of $COUNT results into $dir/checklist.md; missing: ${missing[*]}" >&2
		exit 2
	fi
	mv "$dir/checklist.md.part" "$dir/checklist.md"
	echo "merged ${#files[@]} results into $dir/checklist.md, $dir/checklist.json and $dir/fleet.xml (exit $rc)"
	return "$rc"
}

case "${1:-}" in
submit)
	shift
	submit "$@"
	;;
merge)
	merge "${2:?usage: scripts/slurm-suite.sh merge DIR}"
	;;
"")
	task
	;;
*)
	usage
	;;
esac
