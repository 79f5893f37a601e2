#!/usr/bin/env python3
"""ab-compare.py: before/after table of two builds' benchmark runs made in the same session.

    python3 bench/ab-compare.py --old OLD.json [OLD2.json ...] --new NEW.json [NEW2.json ...]
                                [--match REGEX] [--limit 1.03] [--markdown]

Reads the JSON of pkrylov-bench-gpu, -gpu-kry, -grid, -cpu and -replace (each run of a build may be given
several times, interleaved with the other build's runs: old, new, old, new, ...). Rows are matched by their
descriptive fields (problem, sizes, impl, form, storage, solver, precond, precision); a row's time is the
least over the runs of that build (noise only adds time; the benchmarks already take the least of their
repetitions). Prints old, new and new/old per row, and the median ratio. Rows whose key matches --match
(a regular expression over "problem impl solver ..."; default: every pkrylov row) and whose ratio exceeds
--limit are listed at the end and make the exit status 1: the issue's gate "within 3 % or faster".
"""
import argparse
import json
import re
import statistics
import sys

TIME_KEYS = ("time_per_iteration_s", "t_iter_s", "us_per_iter", "median_s")
KEY_FIELDS = ("benchmark", "problem", "group", "nx", "ny", "nz", "n", "impl", "form", "storage", "solver",
              "precond", "precision", "restart")


def rows_of(path):
    with open(path) as f:
        d = json.load(f)
    rows = d.get("rows") or d.get("results") or []
    bench = d.get("benchmark", "")
    out = []
    for r in rows:
        if r.get("status", "ok") != "ok":
            continue
        t = None
        for k in TIME_KEYS:
            if isinstance(r.get(k), (int, float)) and r[k] > 0:
                t = float(r[k]) * (1e-6 if k == "us_per_iter" else 1.0)
                break
        if t is None:
            continue
        key = [str(bench)] if bench else []
        key += [f"{k}={r[k]}" for k in KEY_FIELDS if k in r and k != "benchmark" and r[k] not in ("", None)]
        out.append((" ".join(key), t))
    return out


def best(paths):
    acc = {}
    order = []
    for p in paths:
        for k, t in rows_of(p):
            if k not in acc:
                order.append(k)
                acc[k] = t
            else:
                acc[k] = min(acc[k], t)
    return acc, order


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--match", default=r"impl=pkrylov|^pkrylov-bench-cpu|^pkrylov-bench-replace")
    ap.add_argument("--limit", type=float, default=1.03)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    old, order = best(a.old)
    new, _ = best(a.new)
    common = [k for k in order if k in new]
    if not common:
        print("ab-compare.py: no rows in common", file=sys.stderr)
        return 2
    pat = re.compile(a.match)
    ratios, slow = [], []
    if a.markdown:
        print("| row | old us | new us | new/old |\n|---|---|---|---|")
    for k in common:
        r = new[k] / old[k]
        gated = bool(pat.search(k))
        if gated:
            ratios.append(r)
            if r > a.limit:
                slow.append((k, r))
        if a.markdown:
            print(f"| {k} | {old[k] * 1e6:.2f} | {new[k] * 1e6:.2f} | {r:.3f} |")
        else:
            print(f"{old[k] * 1e6:12.2f} {new[k] * 1e6:12.2f} {r:7.3f}{' ' if gated else '*'} {k}")
    only = [k for k in order if k not in new] + [k for k in new if k not in old]
    print(f"\n{len(common)} rows in common ({len(only)} in one build only); gated rows: {len(ratios)}, "
          f"median new/old {statistics.median(ratios):.3f}, range {min(ratios):.3f} .. {max(ratios):.3f}"
          if ratios else f"\n{len(common)} rows in common; no gated rows")
    if not a.markdown:
        print("(* = not gated: a baseline's row, e.g. the vendor's)")
    for k, r in slow:
        print(f"SLOWER than {a.limit:.2f}x: {r:.3f} {k}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
