#!/usr/bin/env python3
"""t510-plot: pkrylov-plot (apps/pkrylov-plot.py) run as a program, one ctest test per case.

    python3 t510-plot.py CASE PLOT_SCRIPT SOLVE_EXE SOURCE_DIR TMPDIR

Cases: history (two pkrylov-solve --history files -> one PNG, checked by its signature and size; the lines
are the files' residuals, read back from the figure's data before saving), benchmark (docs/bench-gpu-h200.json
-> PNG), no_matplotlib (a matplotlib that fails to import, put first on PYTHONPATH: exit 2 and one line on
stderr naming matplotlib), bad_input (a missing file, a CSV with a bad line, a JSON that is not a benchmark,
CSV and JSON mixed: exit 2, the message naming the file and line; refused before matplotlib is imported).
history and benchmark exit 77 (skipped) when matplotlib is not importable.
"""
import importlib.util
import os
import subprocess
import sys

case, plot, solve, srcdir, tmpdir = (sys.argv[1],) + tuple(os.path.abspath(a) for a in sys.argv[2:6])
tmp = os.path.join(tmpdir, "t510_" + case)
os.makedirs(tmp, exist_ok=True)
failures = []


def expect(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def run(args, env=None):
    p = subprocess.run([sys.executable, plot] + args, capture_output=True, text=True, env=env, cwd=tmp)
    return p.returncode, p.stdout, p.stderr


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 5000


have_mpl = importlib.util.find_spec("matplotlib") is not None


def history(name, extra):
    path = os.path.join(tmp, name)
    subprocess.run([solve, "--problem", "thinshell:8,8,6", "--quiet", "--history", path] + extra, check=True)
    return path


if case == "history":
    if not have_mpl:
        sys.exit(77)
    h1 = history("cg.csv", [])
    h2 = history("pipecg.csv", ["--solver", "pipecg", "--precond", "jacobi"])
    out = os.path.join(tmp, "conv.png")
    if os.path.exists(out):
        os.remove(out)
    rc, so, se = run([h1, h2, "--label", "CG column", "-o", out])
    expect(rc == 0 and "wrote" in so, f"exit {rc}: {se}")
    expect(os.path.exists(out) and is_png(out), f"{out} is not a PNG")
    # the figure's lines are the files' residuals: import the script and look before it saves
    sys.path.insert(0, os.path.dirname(plot))
    spec = importlib.util.spec_from_file_location("pkrylov_plot", plot)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.load_matplotlib()
    seen = {}
    orig = mod.plt.Figure.savefig

    def grab(fig, *a, **k):
        for line in fig.axes[0].get_lines():
            seen[line.get_label()] = list(zip(line.get_xdata(), line.get_ydata()))
        return orig(fig, *a, **k)

    mod.plt.Figure.savefig = grab
    mod.plot_histories([mod.read_history(h1), mod.read_history(h2)], ["CG column", "pipecg"], False,
                       os.path.join(tmp, "conv2.png"))
    for path, lab in ((h1, "CG column"), (h2, "pipecg")):
        with open(path) as f:
            rows = [l.strip().split(",") for l in f.readlines()[1:]]
        want = [(int(i), float(r)) for i, r in rows if float(r) > 0]
        key = [k for k in seen if k.startswith(lab + " (")]
        expect(len(key) == 1, f"no line labelled '{lab} (...)' in {list(seen)}")
        if key:
            expect(key[0] == f"{lab} ({len(rows) - 1} it.)", f"label '{key[0]}', {len(rows) - 1} iterations")
            got = [(int(x), float(y)) for x, y in seen[key[0]]]
            expect(got == want, f"line '{lab}' is not the file's data")
    # one file: the PNG beside it by default
    rc, so, se = run([h1])
    expect(rc == 0 and is_png(os.path.join(tmp, "cg.png")), f"default output: exit {rc}: {se}")
elif case == "benchmark":
    if not have_mpl:
        sys.exit(77)
    out = os.path.join(tmp, "bench.png")
    rc, so, se = run([os.path.join(srcdir, "docs", "bench-gpu-h200.json"), "-o", out])
    expect(rc == 0 and os.path.exists(out) and is_png(out), f"exit {rc}: {se}")
elif case == "no_matplotlib":
    fake = os.path.join(tmp, "fake")
    os.makedirs(os.path.join(fake, "matplotlib"), exist_ok=True)
    with open(os.path.join(fake, "matplotlib", "__init__.py"), "w") as f:
        f.write("raise ImportError('no matplotlib (t510 stand-in)')\n")
    h = os.path.join(tmp, "h.csv")
    with open(h, "w") as f:
        f.write("iteration,residual\n0,1\n1,0.5\n")
    env = dict(os.environ, PYTHONPATH=fake)
    rc, so, se = run([h, "-o", os.path.join(tmp, "h.png")], env=env)
    expect(rc == 2, f"exit {rc}, expected 2")
    one_line = se.count("\n") == 1 and se.startswith("pkrylov-plot: error:")
    expect(one_line and "matplotlib" in se, f"stderr: {se!r}")
    expect(not os.path.exists(os.path.join(tmp, "h.png")), "a PNG was written without matplotlib")
    rc, so, se = run(["--help"], env=env)
    expect(rc == 0 and "HISTORY.csv" in so, f"--help without matplotlib: exit {rc}")
elif case == "bad_input":
    bad = os.path.join(tmp, "bad.csv")
    with open(bad, "w") as f:
        f.write("iteration,residual\n0,1.0\n1,abc\n")
    nohdr = os.path.join(tmp, "nohdr.csv")
    with open(nohdr, "w") as f:
        f.write("0,1.0\n")
    notbench = os.path.join(tmp, "other.json")
    with open(notbench, "w") as f:
        f.write('{"records": []}\n')
    checks = [([os.path.join(tmp, "missing.csv")], ["missing.csv"]),
              ([bad], ["bad.csv", "line 3"]),
              ([nohdr], ["nohdr.csv", "line 1"]),
              ([notbench], ["other.json", "pkrylov-bench-gpu"]),
              ([bad, notbench], ["not both"]),
              ([bad, "--label", "a", "--label", "b"], ["--label"])]
    for args, needles in checks:  # refused before matplotlib is imported: no matplotlib needed
        rc, so, se = run(args)
        expect(rc == 2 and all(n in se for n in needles),
               f"{args}: exit {rc}, stderr {se!r}, wanted {needles}")
    rc, so, se = run([])
    expect(rc == 2, f"no arguments: exit {rc}")
else:
    print(f"unknown case {case}", file=sys.stderr)
    sys.exit(1)
sys.exit(1 if failures else 0)
