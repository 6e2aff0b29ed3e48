#!/usr/bin/env python3
"""paired-overhead.py TIMES [TARGET]: the observer's cost from paired runs.

TIMES has one line per run, "LABEL SECONDS EXIT [LOOP_MS]" with LABEL
plain or traced, the two of a pair one after the other, and LOOP_MS the
launches' own time as the program measured it (scripts/gpu-trace.sh
writes it). Prints a Markdown table of the pairs, then one line: the
medians of the loops' own times and the median of the pairs' own loop
ratios with its interval (a cost paid per launch shows there, one paid
once per command does not), the medians and p90s of the wall times,
the median of the paired differences (what the trace adds to one
command), the ratio of the medians, and the median of the pairs' own
ratios with its 95% interval (the pairs resampled, 4000 times, seed fixed
so that a rerun prints the same). The pairs' ratio is the one judged: the
two runs of a pair are next to each other in time, so the machine's slow
drift (on the H200 the same loop takes 750 ms or 930 ms a few seconds
apart, in one process) largely cancels in it and not in a ratio of two
medians. When TARGET is given: "met" only when the whole interval is
within it, "NOT MET" when the whole interval is above it, and otherwise
"not decided by N pairs": a noisy machine must not decide it.
"""
import math
import random
import statistics
import sys


def p90(xs):
    s = sorted(xs)
    return s[max(0, math.ceil(0.9 * len(s)) - 1)]


def median_interval(xs, rounds=4000, seed=20261203):
    rng = random.Random(seed)
    medians = sorted(statistics.median(xs[rng.randrange(len(xs))] for _ in xs) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


def main():
    rows = [(line.split() + [""])[:4] for line in open(sys.argv[1]) if line.strip()]
    target = float(sys.argv[2]) if len(sys.argv) > 2 else None
    plain = [float(t) for label, t, rc, loop in rows if label == "plain"]
    traced = [float(t) for label, t, rc, loop in rows if label == "traced"]
    loops = {label: [loop for l, t, rc, loop in rows if l == label] for label in ("plain", "traced")}
    codes = {label: sorted({rc for l, t, rc, loop in rows if l == label}) for label in ("plain", "traced")}
    pairs = list(zip(plain, traced))
    print("| pair | without the trace (s) | under miotool trace (s) | difference (ms) | ratio | loop without (ms) | loop traced (ms) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for i, ((a, b), la, lb) in enumerate(zip(pairs, loops["plain"], loops["traced"]), 1):
        print(f"| {i} | {a:.3f} | {b:.3f} | {1000 * (b - a):+.0f} | {b / a:.3f} | {la or '-'} | {lb or '-'} |")
    print()
    if len(pairs) < 2:
        print("Too few pairs to say anything.")
        return
    mp, mt = statistics.median(plain), statistics.median(traced)
    diff = statistics.median(b - a for a, b in pairs)
    ratios = [b / a for a, b in pairs]
    paired = statistics.median(ratios)
    lo, hi = median_interval(ratios)
    own = {label: [float(x) for x in xs if x] for label, xs in loops.items()}
    line = ""
    if own["plain"] and own["traced"]:
        line = (f"The launches' own time: median {statistics.median(own['plain']):.0f} ms without, "
                f"{statistics.median(own['traced']):.0f} ms with the trace")
        loop_ratios = [float(b) / float(a) for a, b in zip(loops["plain"], loops["traced"]) if a and b and float(a) > 0]
        if len(loop_ratios) >= 2:
            llo, lhi = median_interval(loop_ratios)
            line += (f"; the pairs' own loop ratio {statistics.median(loop_ratios):.3f}, "
                     f"95% interval {llo:.3f}-{lhi:.3f}")
        line += ". "
    line += (f"Medians {mp:.3f} s without, {mt:.3f} s with the trace; p90 {p90(plain):.3f} s and {p90(traced):.3f} s; "
            f"the trace adds {1000 * diff:.0f} ms to a command (median of the paired differences); "
            f"ratio of the medians {mt / mp:.3f}; the pairs' median ratio {paired:.3f}, 95% interval {lo:.3f}-{hi:.3f}")
    if target is not None:
        if hi <= target:
            verdict = "met"
        elif lo > target:
            verdict = "NOT MET"
        else:
            verdict = f"not decided by {len(pairs)} pairs"
        line += f" (target ≤ {target:.2f}: {verdict})"
    line += (f". Exit statuses: {', '.join(codes['plain'])} without, {', '.join(codes['traced'])} "
             "under the trace (4: no capture began).")
    print(line)


if __name__ == "__main__":
    main()
