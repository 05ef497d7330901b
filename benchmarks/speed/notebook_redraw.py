"""Benchmark: how long one slider move takes to redraw in every notebook's explorers.

Runs each notebook's code (non-interactive Agg canvas, full-size data, widgets live), then
times ``slider.value = v`` followed by a full ``canvas.draw()`` — the work a browser's slider
event triggers, plus rendering. Target: under 100 ms after the first draw.

    .venv/bin/python benchmarks/speed/notebook_redraw.py [--save DIR]   # --save: PNG of each figure
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from _machine import describe  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def run_notebook(name: str, until: str | None = None) -> dict:
    """Execute a notebook's code cells in a fresh namespace (widget backend switched off), up to
    the first cell that assigns ``until``."""
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    cells = []
    for c in nb.cells:
        if c.cell_type == "code":
            cells.append(c.source)
            if until and f"{until} = " in c.source:
                break
    src = "\n".join(cells)
    src = src.replace('get_ipython().run_line_magic("matplotlib", "widget")', "pass")
    import IPython.display

    IPython.display.display = lambda *a, **k: None
    ns: dict = {"display": lambda *a, **k: None}
    src = src.replace("from IPython.display import display", "")
    exec(compile(src, name, "exec"), ns)
    return ns


def time_moves(fig, moves) -> list[float]:
    """Seconds per move: the callback, plus a full render if the callback asked for one
    (``draw_idle``, which a live front end would run once, right after), else only the
    blitted artists the callback drew itself."""
    fig.canvas.draw()  # the first draw is not what the target is about
    requested = []
    fig.canvas.draw_idle = lambda *a, **k: requested.append(True)
    out = []
    for widget, value in moves:
        requested.clear()
        t0 = time.perf_counter()
        widget.value = value
        if requested:
            fig.canvas.draw()
        out.append((widget.description, time.perf_counter() - t0))
    return out


def report(name: str, timings) -> None:
    by: dict[str, list[float]] = {}
    for label, t in timings:
        by.setdefault(label, []).append(t * 1e3)
    parts = ", ".join(f"{k}: median {np.median(v):.0f} ms (max {max(v):.0f})" for k, v in by.items())
    print(f"{name}: {parts}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--save", type=Path, default=None)
    args = parser.parse_args()
    os.environ.pop("SPHERELAB_SMOKE", None)
    print("machine:", describe())

    ns = run_notebook("01_spherical_harmonics.ipynb", until="addition")
    for label, e, moves in [
        ("01 gallery", ns["gallery"], [(ns["gallery"].degree, v) for v in (4, 6, 8)]
         + [(ns["gallery"].order, v) for v in (1, 3, 5)] + [(ns["gallery"].view, 30.0)]),
        ("01 addition theorem", ns["addition"], [(ns["addition"].degree, v) for v in (2, 6, 10)]
         + [(ns["addition"].lat, v) for v in (-30.0, 45.0)] + [(ns["addition"].lon, 90.0)]),
    ]:
        report(label, time_moves(e.fig, moves))

    ns = run_notebook("04_vish.ipynb", until="degree_explorer")
    e = ns["degree_explorer"]
    report("04 VISH degree", time_moves(e.fig, [(e.L, v) for v in (2, 10, 20, 30, 40)]))

    ns = run_notebook("06_depth_and_phases.ipynb", until="depth")
    e = ns["depth"]
    report("06 depth", time_moves(e.fig, [(e.beta, v) for v in (1.0, 2.5, 4.0, 6.0)]))

    ns = run_notebook("02_spectra_mismatch.ipynb")
    e = ns["explorer"]
    moves = [(e.levels, v) for v in (25, 30, 35, 40)] + [(e.dim, v) for v in (4, 9, 15)]
    moves += [(e.kernel, "arc-cosine, order 1"), (e.act, "softplus (β = 3)"), (e.kernel, "intrinsic Matérn-3/2")]
    report("02 spectra mismatch", time_moves(e.fig, moves))
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        e.fig.savefig(args.save / "02_spectra_mismatch.png", dpi=80)

    ns = run_notebook("03_truncation.ipynb")
    e = ns["explorer"]
    moves = [(e.L, v) for v in (8, 12, 20, 30, 40)] + [(e.dim, v) for v in (5, 9)]
    moves += [(e.act, "softplus (β = 3)"), (e.kernel, "Matérn-5/2 (chordal)")]
    report("03 truncation", time_moves(e.fig, moves))
    if args.save:
        e.fig.savefig(args.save / "03_truncation.png", dpi=80)

    ns = run_notebook("07_harmonic_decomposition.ipynb")
    e = ns["explorer"]
    moves = [(e.seed, v) for v in (1, 2, 3, 4, 5)] + [(e.T, v) for v in (3, 6, 4)]
    moves += [(e.group, "reflect x₁ and x₂ (2 × 2)"), (e.group, "rotation by 2π/T"), (e.seed, 6)]
    report("07 harmonic decomposition", time_moves(e.fig, moves))
    if args.save:
        e.fig.savefig(args.save / "07_harmonic_decomposition.png", dpi=80)
    plt.close("all")


if __name__ == "__main__":
    main()
