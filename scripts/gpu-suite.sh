#!/usr/bin/env bash
# gpu-suite.sh: the wall time of a suite as the user waits for it, checks
# one at a time against checks side by side, as a function
# scripts/gpu-check.sh can source, or as a command:
#
#   scripts/gpu-suite.sh suite_wall OUTDIR   # report --suite, paired: --jobs 1 against the default
#
# BIN (default bin) is the folder of scripts/gpu-check.sh build's
# binaries; BACKEND (default cuda) the backend the checks run on; SUITE
# (default configs/suites/pr12265.yaml) the suite; SUITE_RUNS (default 5)
# the rounds; SUITE_JOBS the --jobs of the "after" runs (default: none
# given, so miotool's default). A third command, "base", is the suite as
# it ran before checks went side by side: --jobs 1, and the rules check
# with its default spin (the suite file with its "--spin 10ms" taken out).
# Each round runs every command once, in an order that turns with the
# round, so that a drift of the machine falls on each alike. The section,
# OUTDIR/suite-wall.md, is made by this script from the shell's timings and
# from miotool's own JSON results (each check's own wall time and when it
# started).
#
# On the H200 the suite took 23.0 s one check at a time (base); expect the
# default (--jobs 4 there) at half of that or less, every run PASS, and
# find-naive-timeout starting first, alone.

suite_wall() {
	local dir=$1 bin=${BIN:-bin} backend=${BACKEND:-cuda} suite=${SUITE:-configs/suites/pr12265.yaml}
	local runs=${SUITE_RUNS:-5} r i k cfg
	mkdir -p "$dir"
	local raw=$dir/suite-wall-raw.txt
	: >"$raw"
	local after_jobs=()
	[ -n "${SUITE_JOBS:-}" ] && after_jobs=(--jobs "$SUITE_JOBS")
	local configs=(before after)
	local base_file=""
	if grep -q -- '--spin 10ms' "$suite"; then
		# Its workdir made absolute, so that the copy runs from anywhere.
		base_file=$(mktemp --suffix=.yaml)
		sed -e 's/ --spin 10ms//' \
			-e "s|^workdir: *\(.*\)|workdir: $(cd "$(dirname "$suite")" && pwd)/\1|" "$suite" >"$base_file"
		configs+=(base)
	fi
	local n=${#configs[@]}
	for ((r = 1; r <= runs; r++)); do
		for ((i = 0; i < n; i++)); do
			k=$(((i + r) % n))
			cfg=${configs[$k]}
			local args t0 t1 rc
			case $cfg in
			before) args=(--suite "$suite" --jobs 1) ;;
			after) args=(--suite "$suite" "${after_jobs[@]}") ;;
			base) args=(--suite "$base_file" --jobs 1) ;;
			esac
			t0=$(date +%s%N)
			"$bin/miotool" --backend "$backend" report "${args[@]}" --format json --no-progress \
				>"$dir/suite-$cfg-$r.json" 2>"$dir/suite-$cfg-$r.err"
			rc=$?
			t1=$(date +%s%N)
			echo "$cfg $r $(((t1 - t0) / 1000000)) $rc" >>"$raw"
			echo "[suite_wall] round $r: $cfg $(((t1 - t0) / 1000000)) ms, exit $rc" >&2
		done
	done
	{
		echo
		echo "## The suite as the user waits for it: checks one at a time and side by side (medians of $runs rounds)"
		echo
		echo '```'
		echo "\$ bin/miotool --backend $backend report --suite $suite --jobs 1 --format json    # before"
		echo "\$ bin/miotool --backend $backend report --suite $suite ${after_jobs[*]:+${after_jobs[*]} }--format json    # after"
		[ -n "$base_file" ] && echo "\$ bin/miotool --backend $backend report --suite <$suite without --spin 10ms> --jobs 1 --format json    # base"
		echo '```'
		echo
		echo "_$(date -u +%Y-%m-%dT%H:%M:%SZ), $("$bin/miotool" version 2>/dev/null | head -1), $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)_"
		echo
		python3 - "$raw" "$dir" <<'PY'
import json, os, statistics, sys
raw, d = sys.argv[1], sys.argv[2]
walls, codes = {}, {}
for line in open(raw):
    cfg, r, ms, rc = line.split()
    walls.setdefault(cfg, {})[int(r)] = int(ms) / 1000
    codes.setdefault(cfg, {})[int(r)] = int(rc)
what = {"before": "--jobs 1 (one check at a time)", "after": "side by side", "base": "before: --jobs 1, rules' default spin"}
docs = {}
for cfg in walls:
    for r in walls[cfg]:
        p = os.path.join(d, f"suite-{cfg}-{r}.json")
        try:
            docs.setdefault(cfg, {})[r] = json.load(open(p))
        except (OSError, ValueError):
            pass
def jobs(cfg):
    js = {(doc.get("options") or {}).get("jobs", 1) for doc in docs.get(cfg, {}).values()}
    return ", ".join(str(j) for j in sorted(js)) or "-"
print("Whole commands, timed by the shell:")
print()
print("| command | jobs | rounds | wall s, median | min - max | verdicts | exit codes |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for cfg in ("base", "before", "after"):
    if cfg not in walls:
        continue
    w = list(walls[cfg].values())
    verdicts = sorted({doc.get("verdict", "?") for doc in docs.get(cfg, {}).values()})
    print(f"| {what[cfg]} | {jobs(cfg)} | {len(w)} | {statistics.median(w):.2f} | {min(w):.2f} - {max(w):.2f} | "
          f"{', '.join(verdicts) or 'no result'} | {', '.join(str(c) for c in sorted(set(codes[cfg].values())))} |")
print()
for num, den in (("after", "before"), ("after", "base"), ("before", "base")):
    if num in walls and den in walls:
        pairs = [walls[num][r] / walls[den][r] for r in walls[num] if r in walls[den]]
        print(f"- {num} / {den}, round by round: median **{statistics.median(pairs):.2f}** "
              f"(min {min(pairs):.2f}, max {max(pairs):.2f}, {len(pairs)} rounds)")
print()
print("Each check's own wall time (miotool's result, `runs[].duration_ms`), median over the rounds, "
      "and when it started after the suite did (median s):")
print()
cfgs = [c for c in ("base", "before", "after") if c in docs]
names = []
for cfg in cfgs:
    for doc in docs[cfg].values():
        for c in doc.get("checks", []):
            if c["name"] not in names:
                names.append(c["name"])
print("| check | " + " | ".join(f"{c}: wall s, started at s" for c in cfgs) + " |")
print("| --- | " + " | ".join("---" for _ in cfgs) + " |")
def parse(t):
    from datetime import datetime
    return datetime.fromisoformat(t.replace("Z", "+00:00"))
for name in names:
    cells = []
    for cfg in cfgs:
        ws, starts = [], []
        for doc in docs[cfg].values():
            s0 = parse(doc["started"]) if doc.get("started") else None
            for c in doc.get("checks", []):
                if c["name"] != name:
                    continue
                for run in c.get("runs", []):
                    ws.append(run["duration_ms"] / 1000)
                    if s0 and run.get("started"):
                        starts.append((parse(run["started"]) - s0).total_seconds())
        cells.append(f"{statistics.median(ws):.2f}, {statistics.median(starts):.2f}" if ws and starts else "-")
    print(f"| {name} | " + " | ".join(cells) + " |")
print()
for cfg in cfgs:
    bad = [(r, doc.get("summary", "")) for r, doc in sorted(docs[cfg].items()) if doc.get("verdict") != "PASS"]
    for r, s in bad:
        print(f"- {cfg} round {r}: {s}")
PY
		local last
		last=$(ls "$dir"/suite-after-*.json 2>/dev/null | sort -V | tail -1)
		if [ -n "$last" ]; then
			echo
			echo "The last side-by-side run, as miotool renders it (\`report merge $(basename "$last") --format markdown\`):"
			echo
			"$bin/miotool" report merge "$last" --format markdown 2>&1 | sed 's/^###/####/'
		fi
	} | tee "$dir/suite-wall.md"
	[ -n "$base_file" ] && rm -f "$base_file"
	return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -uo pipefail
	cd "$(dirname "$0")/.."
	case ${1:-} in
	suite_wall)
		[ $# -eq 2 ] || { echo "usage: $0 suite_wall OUTDIR" >&2; exit 2; }
		suite_wall "$2"
		;;
	*)
		echo "usage: $0 suite_wall OUTDIR" >&2
		exit 2
		;;
	esac
fi
