#!/usr/bin/env python3
"""Plot the JSON written by pkrylov-bench-gpu --json FILE.

    python3 bench/plot_gpu.py bench-gpu.json [-o bench-gpu.png]

One PNG with three panels:
  1. thin shell: time per iteration against unknowns (log-log), one line per implementation
     (vendor cuSPARSE/cuBLAS PCG, each pkrylov CUDA operator form / solver / precision, pkrylov CPU);
  2. CSR Laplacians n^3 (plain CG): the same;
  3. fraction of the measured copy bandwidth, one bar per row of the thin shell 256x256x128 and the
     Laplacian 256^3 (else the largest that ran), GPU rows only (bytes counted with the byte model of
     the benchmark source).
Rows whose status is not "ok" (unavailable, skipped, error) are left out and listed under the figure.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def label(r):
    """Legend label of a row: implementation, form, solver, preconditioner, precision."""
    if r["impl"].startswith("vendor"):
        return f'{r["impl"]} {r["solver"]}/{r["precond"]}'
    s = f'{r["impl"].replace("pkrylov-", "pk-")} {r["form"]} {r["solver"]}'
    if r["precond"] != "none":
        s += f'/{r["precond"]}'
    if r["precision"] != "fp64":
        s += f' {r["precision"]}'
    return s


def style(r):
    """Line style: vendor dashed black-ish, CPU dotted, pkrylov CUDA solid."""
    if r["impl"].startswith("vendor"):
        return dict(linestyle="--", marker="s")
    if r["impl"] == "pkrylov-cpu":
        return dict(linestyle=":", marker="^")
    return dict(linestyle="-", marker="o")


def series(rows, group):
    """{label: sorted [(n, time)]} for the ok rows of a group."""
    out = {}
    for r in rows:
        if r["group"] != group or r["status"] != "ok" or r["time_per_iteration_s"] is None:
            continue
        out.setdefault(label(r), (r, []))[1].append((r["n"], r["time_per_iteration_s"]))
    return {k: (v[0], sorted(v[1])) for k, v in out.items()}


def time_panel(ax, rows, group, title):
    ser = series(rows, group)
    ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)
    if not ser:
        ax.text(0.5, 0.5, "no rows", ha="center", va="center", transform=ax.transAxes)
    for lab, (r, pts) in sorted(ser.items()):
        ax.plot([p[0] for p in pts], [p[1] * 1e6 for p in pts], label=lab, **style(r))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("unknowns")
    ax.set_ylabel("time per iteration [us]")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if ser:
        ax.legend(fontsize=6, loc="upper left")


def bar_problem(rows, group, preferred):
    """The problem of the targets (256x256x128, lap256^3) when it ran, else the largest of the group."""
    ok = [r for r in rows if r["group"] == group and r["status"] == "ok"]
    if any(r["problem"] == preferred for r in ok):
        return preferred
    return max(ok, key=lambda r: r["n"])["problem"] if ok else None


def bandwidth_panel(ax, rows, copy_gbs):
    bars = []
    for group, preferred in (("thinshell", "256x256x128"), ("laplacian", "lap256^3")):
        p = bar_problem(rows, group, preferred)
        for r in rows:
            # GPU rows only: a CPU row against the GPU's copy bandwidth says nothing
            if (r["problem"] == p and r["status"] == "ok" and r["fraction_of_copy"] is not None
                    and r["impl"] != "pkrylov-cpu"):
                bars.append((f'{p}: {label(r)}', r["fraction_of_copy"], r))
    if not bars:
        ax.text(0.5, 0.5, "no rows", ha="center", va="center", transform=ax.transAxes)
        return
    colors = ["0.4" if r["impl"].startswith("vendor") else "tab:blue" for _, _, r in bars]
    y = range(len(bars))
    ax.barh(list(y), [100 * b[1] for b in bars], color=colors)
    ax.set_yticks(list(y))
    ax.set_yticklabels([b[0] for b in bars], fontsize=6)
    ax.invert_yaxis()
    ax.axvline(80, color="k", linestyle=":", linewidth=1)
    ax.set_xlabel("achieved bandwidth (counted bytes) / measured copy bandwidth [%]")
    ax.set_title(f"fraction of copy bandwidth ({copy_gbs:.0f} GB/s)" if copy_gbs else
                 "fraction of copy bandwidth")
    ax.grid(True, axis="x", alpha=0.3)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("-o", "--output", default=None, help="PNG to write (default: JSON name with .png)")
    a = ap.parse_args(argv)
    with open(a.json) as f:
        d = json.load(f)
    rows = d["rows"]
    out = a.output or (a.json[:-5] if a.json.endswith(".json") else a.json) + ".png"
    dev = d.get("device", {}).get("name", "?")
    fig = plt.figure(figsize=(15, 11))
    gs = fig.add_gridspec(2, 2, height_ratios=[1, 1.1])
    time_panel(fig.add_subplot(gs[0, 0]), rows, "thinshell", "thin shell (column preconditioner)")
    time_panel(fig.add_subplot(gs[0, 1]), rows, "laplacian", "CSR Laplacian n^3 (plain CG)")
    bandwidth_panel(fig.add_subplot(gs[1, :]), rows, d.get("copy_GBs"))
    missing = sorted({f'{r["impl"]} {r["form"]}: {r["status"]}' for r in rows if r["status"] != "ok"})
    note = f"device: {dev}; copy bandwidth {d.get('copy_GBs')} GB/s"
    if missing:
        note += "; not plotted: " + ", ".join(missing)
    fig.text(0.01, 0.005, note, fontsize=7, wrap=True)
    fig.suptitle("pkrylov GPU benchmark: time per iteration and bandwidth")
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
