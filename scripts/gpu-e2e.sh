#!/usr/bin/env bash
# gpu-e2e.sh: whole commands as a user waits for them, timed from outside,
# as functions scripts/gpu-check.sh can source, or as commands:
#
#   scripts/gpu-e2e.sh stress_e2e OUTDIR   # stress-threads beside doctor and its run's own time; capture, replay, find
#
# BIN (default bin) is the folder of miotool (scripts/gpu-check.sh build
# makes it), BACKEND (default cuda) the backend, E2E_RUNS (default 10) the
# pairs of stress-threads and doctor, E2E_OTHER_RUNS (default 3) the runs of
# each of capture, replay and find. The function writes OUTDIR/e2e.md, a
# Markdown section of its own ("## ..."), made by this script from
# miotool's own output (its JSON results and --verbose lines) and the wall
# time of each process from its start to its exit, and prints it.

# stress_e2e OUTDIR: E2E_RUNS pairs, one after another, of
#   miotool --backend $BACKEND stress-threads   (one run, the defaults)
#   miotool --backend $BACKEND doctor
# each timed from its start to its exit; beside them the run's own process
# as stress-threads measured it (its result's "wall time per run" table:
# process start to exit, and the device open and the workload the run
# measures itself). The ratio command / run is taken pair by pair; the goal
# is a median of at most 1.15: stress-threads opens no device itself, so
# the command is its run plus one process start. Then E2E_OTHER_RUNS runs
# each of capture --mode=global --reclaim=worker, replay and find with
# --verbose, their lines stamped as they arrive, to show where a whole
# command's time goes: the process start up to miotool's first line (the Go
# runtime, the configuration), the device open (the driver's start-up and
# the context), and the rest (kernel modules, the work, the teardown).
#
# On the H200 it should show: stress-threads about the run's own time plus
# some 10-20 ms (before the change it was the run plus doctor's ~0.4 s),
# ratio <= 1.15; the device open about 0.4 s of every command that opens
# one; doctor about that open alone.
stress_e2e() {
	local dir=$1 bin=${BIN:-bin} backend=${BACKEND:-cuda}
	mkdir -p "$dir"
	python3 - "$dir" "$bin/miotool" "$backend" "${E2E_RUNS:-10}" "${E2E_OTHER_RUNS:-3}" <<'PY' | tee "$dir/e2e.md"
import json, os, statistics, subprocess, sys, time

out_dir, miotool, backend, runs, other_runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
log = open(os.path.join(out_dir, "e2e.log"), "a")

def timed(args, name):
    """Runs miotool with args; returns (wall ms, exit, stdout, [(ms, stderr line)])."""
    cmd = [miotool, "--backend", backend, "--no-progress"] + args
    lines = []
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # stdout is read after stderr ends: the results are small, and stderr's
    # lines are stamped as they arrive.
    for raw in iter(p.stderr.readline, b""):
        lines.append(((time.monotonic() - t0) * 1000, raw.decode(errors="replace").rstrip("\n")))
    stdout = p.stdout.read()
    rc = p.wait()
    wall = (time.monotonic() - t0) * 1000
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(stdout)
    log.write(f"{' '.join(cmd)}: exit {rc}, {wall:.0f} ms\n")
    for ms, l in lines:
        log.write(f"  {ms:8.1f} ms  {l}\n")
    return wall, rc, stdout, lines

def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)

def ms_of(cell):
    """A duration cell of miotool's tables ("476ms", "1.23s", "812µs") in ms."""
    for unit, f in (("ms", 1), ("µs", 1e-3), ("us", 1e-3), ("ns", 1e-6), ("s", 1000), ("m", 60000)):
        if cell.endswith(unit):
            try:
                return float(cell[: -len(unit)]) * f
            except ValueError:
                return None
    return None

def run_times(result):
    """The run's own wall, device open and workload, from the result's table."""
    got = {}
    for t in result.get("tables", []):
        if t["title"].startswith("wall time per run"):
            for row in t["rows"]:
                c = row["cells"]
                got[c[0]] = ms_of(c[2])
    return got.get("all"), got.get("device open, in the run"), got.get("workload, in the run after the open")

stress, doctor, child, opens, work, ratios, bad = [], [], [], [], [], [], []
for i in range(1, runs + 1):
    w, rc, out, _ = timed(["--format", "json", "stress-threads"], f"e2e-stress-{i}.json")
    dw, drc, _, _ = timed(["--format", "json", "doctor"], f"e2e-doctor-{i}.json")
    doctor.append(dw)
    try:
        res = json.loads(out)
    except ValueError:
        res = {}
    c, o, k = run_times(res)
    if rc != 0 or drc != 0 or c is None:
        bad.append(f"pair {i}: stress-threads exit {rc} ({res.get('verdict', 'no result')}), doctor exit {drc}")
        continue
    stress.append(w)
    child.append(c)
    ratios.append(w / c)
    if o is not None:
        opens.append(o)
    if k is not None:
        work.append(k)
    print(f"[stress_e2e] pair {i}: stress-threads {w:.0f} ms (its run {c:.0f} ms), doctor {dw:.0f} ms", file=sys.stderr)

version = subprocess.run([miotool, "version"], capture_output=True, text=True).stdout.strip().splitlines()[:1]
print()
print(f"## Whole commands as a user waits for them ({backend}, {runs} pairs of stress-threads and doctor, one after another)")
print()
print("```")
print(f"$ miotool --backend {backend} stress-threads     # one run, the defaults")
print(f"$ miotool --backend {backend} doctor")
print("```")
print()
print(f"_{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, {version[0] if version else 'miotool'}, {os.cpu_count()} CPU cores; "
      "wall time from the process's start to its exit, timed by this script; the run's own times are stress-threads' "
      "(its result's wall time per run)_")
print()
print("| what | runs | median ms | p90 ms | min - max ms |")
print("| --- | --- | --- | --- | --- |")
def num(x):
    return f"{x:.1f}" if abs(x) < 10 else f"{x:.0f}"

def row(what, xs):
    if xs:
        print(f"| {what} | {len(xs)} | {num(statistics.median(xs))} | {num(pct(xs, 0.9))} | {num(min(xs))} - {num(max(xs))} |")
    else:
        print(f"| {what} | 0 | - | - | - |")
row("`stress-threads`, the whole command", stress)
row("its run's process, start to exit (as stress-threads measured it)", child)
row("the run's device open (measured in the run)", opens)
row("the run's workload after the open (measured in the run)", work)
row("`doctor`, the whole command", doctor)
print()
if ratios:
    print(f"Ratio whole command / its run, pair by pair: median **{statistics.median(ratios):.3f}**, "
          f"p90 {pct(ratios, 0.9):.3f} (goal: at most 1.15). The command's own cost beyond its run: "
          f"median {statistics.median([s - c for s, c in zip(stress, child)]):.0f} ms.")
for b in bad:
    print(f"- not counted: {b}")
print()

# Where a whole command's time goes, from its --verbose lines as they arrive.
others = [("capture --mode=global --reclaim=worker", ["capture", "--mode=global", "--reclaim=worker"]),
          ("replay", ["replay"]), ("find", ["find"]), ("doctor", ["doctor"])]
print(f"### Where a whole command's time goes ({backend}, runs of each: {other_runs}, medians)")
print()
print("Stamped as miotool's `--verbose` lines arrive: the process start is up to its first line (the Go runtime "
      "and the configuration read), the device open up to the line that names the backend and device (the driver's "
      "start-up and the context), the rest up to the exit (kernel modules, the work, the teardown).")
print()
print("| command | runs | whole ms | process start ms | device open ms | the rest ms | exit |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for label, args in others:
    whole, first, opened, rest, codes = [], [], [], [], []
    for i in range(1, other_runs + 1):
        w, rc, _, lines = timed(["--verbose", "--format", "json"] + args, f"e2e-{args[0]}-{i}.json")
        whole.append(w)
        codes.append(rc)
        f = lines[0][0] if lines else None
        b = next((ms for ms, l in lines if l.startswith("miotool: backend ")), None)
        if f is not None:
            first.append(f)
        if f is not None and b is not None:
            opened.append(b - f)
            rest.append(w - b)
        elif f is not None:
            rest.append(w - f)
    med = lambda xs: num(statistics.median(xs)) if xs else "-"
    print(f"| `{label}` | {len(whole)} | {med(whole)} | {med(first)} | {med(opened)} | {med(rest)} | {', '.join(sorted(set(map(str, codes))))} |")
print()
PY
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -uo pipefail
	cd "$(dirname "$0")/.."
	case ${1:-} in
	stress_e2e)
		[ $# -eq 2 ] || { echo "usage: $0 stress_e2e OUTDIR" >&2; exit 2; }
		"$1" "$2"
		;;
	*)
		echo "usage: $0 stress_e2e OUTDIR" >&2
		exit 2
		;;
	esac
fi
