#!/usr/bin/env python3
"""pkrylov-plot: plots of pkrylov's output files (installed as pkrylov-plot; Python 3 with matplotlib).

    pkrylov-plot [-o OUT.png] [--label NAME]... [--relative] HISTORY.csv...
    pkrylov-plot [-o OUT.png] BENCHMARK.json

HISTORY.csv files (pkrylov-solve --history: "iteration,residual" lines) give one convergence plot: the
residual norm against the iteration, log y, one labelled line per file (the label is the file name without
.csv, or --label, once per file in order); --relative divides each line by its first value. The PNG goes
to -o (another extension, e.g. .svg or .pdf, picks that format), else to the file's name with .png (one
file) or convergence.png (several).

A BENCHMARK.json written by pkrylov-bench-gpu --json gives the performance plots, one PNG with three
panels:
  1. thin shell: time per iteration against unknowns (log-log), one line per implementation
     (vendor cuSPARSE/cuBLAS PCG, each pkrylov CUDA operator form / solver / precision, pkrylov CPU);
  2. CSR Laplacians n^3 (plain CG): the same;
  3. fraction of the measured copy bandwidth, one bar per row of the thin shell 256x256x128 and the
     Laplacian 256^3 (else the largest that ran), GPU rows only (bytes counted with the byte model of
     the benchmark source).
Rows whose status is not "ok" (unavailable, skipped, error) are left out and listed under the figure.
The PNG goes to -o, else to the JSON's name with .png.

Exit status: 0 written, 2 bad input or usage, or matplotlib missing (one line on stderr says so).
"""
import argparse
import csv
import json
import os
import sys

PROG = "pkrylov-plot"
plt = None  # matplotlib.pyplot, imported by load_matplotlib() once the arguments are known


class InputError(Exception):
    """A file that cannot be read or is not what it should be (exit 2, the message names it)."""


def load_matplotlib():
    """Import matplotlib with the Agg backend (no display needed); None when it is not installed."""
    global plt
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
    except ImportError:
        return None
    plt = pyplot
    return pyplot


# ---- convergence plot of --history files ---------------------------------------------------------


def read_history(path):
    """[(iteration, residual)] of a pkrylov-solve --history file; InputError names the bad line."""
    try:
        f = open(path, newline="")
    except OSError as e:
        raise InputError(f"cannot read '{path}': {e.strerror}")
    with f:
        rows = list(csv.reader(f))
    if not rows or [c.strip() for c in rows[0]] != ["iteration", "residual"]:
        raise InputError(f"'{path}' line 1: expected the header 'iteration,residual' of "
                         "pkrylov-solve --history")
    pts = []
    for lineno, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        try:
            if len(row) != 2:
                raise ValueError
            pts.append((int(row[0]), float(row[1])))
        except ValueError:
            raise InputError(f"'{path}' line {lineno}: expected 'iteration,residual', got '{','.join(row)}'")
    if not pts:
        raise InputError(f"'{path}' has no residuals")
    return pts


def plot_histories(histories, labels, relative, out):
    """One convergence plot of the histories (read_history) into out."""
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for pts, lab in zip(histories, labels):
        scale = pts[0][1] if relative and pts[0][1] > 0 else 1.0
        # a residual of exactly 0 has no place on a log axis: left out
        xs = [p[0] for p in pts if p[1] > 0]
        ys = [p[1] / scale for p in pts if p[1] > 0]
        ax.plot(xs, ys, label=f"{lab} ({pts[-1][0]} it.)")
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("residual norm / initial" if relative else "residual norm ||b - A x||")
    ax.set_title("pkrylov convergence")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


# ---- performance plots of a pkrylov-bench-gpu JSON -------------------------------------------------


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


def read_benchmark(path):
    """The object of a pkrylov-bench-gpu JSON; InputError when it is not one."""
    try:
        with open(path) as f:
            d = json.load(f)
    except OSError as e:
        raise InputError(f"cannot read '{path}': {e.strerror}")
    except ValueError as e:
        raise InputError(f"'{path}' is not JSON: {e}")
    rows = d.get("rows") if isinstance(d, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "group" in r for r in rows):
        raise InputError(f"'{path}' is not a pkrylov-bench-gpu JSON (no rows with a 'group')")
    return d


def plot_benchmark(d, out):
    """The three panels of a pkrylov-bench-gpu JSON (read_benchmark) into out."""
    rows = d["rows"]
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
    plt.close(fig)


def is_json(path):
    """A benchmark JSON (by name, or a first character '{'), else a history CSV."""
    if path.endswith(".json"):
        return True
    try:
        with open(path) as f:
            return f.read(64).lstrip().startswith("{")
    except OSError:
        return False


def stem(path):
    base = os.path.basename(path)
    for ext in (".csv", ".json"):
        if base.endswith(ext):
            return base[: -len(ext)]
    return base


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("files", nargs="+", metavar="FILE", help="--history CSV files, or one benchmark JSON")
    ap.add_argument("-o", "--output", default=None, help="PNG to write")
    ap.add_argument("--label", action="append", default=[], help="legend label of the next history file")
    ap.add_argument("--relative", action="store_true", help="history: divide by the first residual")
    a = ap.parse_args(argv)

    def fail(msg):
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2

    kinds = {is_json(p) for p in a.files}
    if len(kinds) > 1:
        return fail("give either --history CSV files or one benchmark JSON, not both")
    if True in kinds and len(a.files) > 1:
        return fail(f"one benchmark JSON at a time ({len(a.files)} given)")
    if len(a.label) > len(a.files):
        return fail(f"{len(a.label)} --label for {len(a.files)} files")
    # the inputs are read (and refused) before matplotlib is imported, which takes a while
    try:
        if True in kinds:
            data = read_benchmark(a.files[0])
            out = a.output or (a.files[0][:-5] if a.files[0].endswith(".json") else a.files[0]) + ".png"
        else:
            data = [read_history(p) for p in a.files]
            labels = a.label + [stem(p) for p in a.files[len(a.label):]]
            if a.output:
                out = a.output
            elif len(a.files) == 1:
                out = (a.files[0][:-4] if a.files[0].endswith(".csv") else a.files[0]) + ".png"
            else:
                out = "convergence.png"
    except InputError as e:
        return fail(str(e))
    if load_matplotlib() is None:
        return fail("matplotlib is not installed for this Python (" + sys.executable +
                    "): pip install matplotlib, or apt-get install python3-matplotlib")
    try:
        if True in kinds:
            plot_benchmark(data, out)
        else:
            plot_histories(data, labels, a.relative, out)
    except OSError as e:
        return fail(f"cannot write '{out}': {e.strerror}")
    except ValueError as e:  # an output format matplotlib does not know
        return fail(f"cannot write '{out}': {e}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
