#!/usr/bin/env python3
"""Medians of Go benchmark output, as a Markdown table.

Reads `go test -bench` output (any number of -count runs) on stdin or from
files and prints, per benchmark and metric, the median, the min-max range
and the number of runs. With --ratio A:B it adds the ratio of medians of
two benchmarks' ns/op (e.g. Run/worker-16:Run/raw-launch-16).
Standard library only.
"""
import re
import statistics
import sys

LINE = re.compile(r"^(Benchmark\S+)\s+\d+\s+(.*)$")


def parse(lines):
    runs = {}
    for line in lines:
        m = LINE.match(line.strip())
        if not m:
            continue
        name, rest = m.group(1), m.group(2).split()
        for i in range(0, len(rest) - 1, 2):
            try:
                v = float(rest[i])
            except ValueError:
                continue
            runs.setdefault((name, rest[i + 1]), []).append(v)
    return runs


def fmt(v):
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.3g}"
    return f"{v:.3g}"


def main(argv):
    ratios = [a for a in argv if a.startswith("--ratio=")]
    files = [a for a in argv if not a.startswith("--")]
    lines = []
    if files:
        for f in files:
            with open(f) as fh:
                lines += fh.readlines()
    else:
        lines = sys.stdin.readlines()
    runs = parse(lines)
    print("| benchmark | metric | median | min - max | runs |")
    print("| --- | --- | --- | --- | --- |")
    for (name, unit), vs in runs.items():
        print(f"| {name} | {unit} | {fmt(statistics.median(vs))} | {fmt(min(vs))} - {fmt(max(vs))} | {len(vs)} |")
    if ratios:
        print()
        print("| ratio of medians (ns/op) | value |")
        print("| --- | --- |")
        for r in ratios:
            a, b = r[len("--ratio="):].split(":")
            va = runs.get((a, "ns/op"))
            vb = runs.get((b, "ns/op"))
            if not va or not vb:
                print(f"| {a} / {b} | missing |")
                continue
            print(f"| {a} / {b} | {statistics.median(va) / statistics.median(vb):.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
