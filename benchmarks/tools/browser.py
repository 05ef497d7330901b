"""Every notebook in a real browser: JupyterLab (``make lab HEADLESS=1``) driven in Debian's
Chromium by Playwright. For each notebook: run all cells (time it), check that no output holds a
traceback and that the widgets and ipympl figures are live, then move every slider with the
keyboard (ArrowRight, three times) and step every dropdown, timing key press -> first changed
pixel of any figure canvas, and -> the final figure (an explorer that refits in the background
first shows "fitting…" over the previous figure). Moves start ``--pause`` seconds after the last cell finished, as a
reader's pause (explorers whose moves need a refit compute the configurations around the shown
one in that time, in the background).

    python benchmarks/tools/browser.py [--notebooks 01 02 ...] [--chromium /usr/bin/chromium] [--pause 10] [--check]
                                       [--smoke]

``--check`` exits non-zero on an error output or any output on stderr, a notebook without live widgets, a control whose
move never redraws, a progress bar left in an output after the run, or a figure (a live canvas or a
displayed image) that passes the right edge of its output area in a 1 280 x 900 window with the file
browser open (what ``make test-browser`` asserts); latencies are only
reported (targets: median under 150 ms, worst under 300 ms). A screenshot of each figure in the
window goes to ``build/browser/`` (``--screenshots``).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _machine import describe  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: a laptop's browser window (the narrowest a reader is expected to use), in CSS pixels
WINDOW = (1280, 900)

DONE = """(n) => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(e => e.textContent);
  return p.length === n && p.every(t => /\\[\\d+\\]/.test(t)) && document.body.innerText.includes('Idle'); }"""
SNAP = """() => { window.__snap = [...document.querySelectorAll('.jupyter-matplotlib-canvas-div canvas:first-child')]
  .map(c => c.toDataURL()); }"""
CHANGED = """() => [...document.querySelectorAll('.jupyter-matplotlib-canvas-div canvas:first-child')]
  .some((c, i) => window.__snap[i] !== undefined && c.toDataURL() !== window.__snap[i])"""
# an explorer computing in the background shows "fitting…" / "computing…" until its figure is final
SETTLED = """() => ![...document.querySelectorAll('.widget-label')].some(e => /(fitting|computing)…/.test(e.textContent))"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(port: int, notebook_dir: str, smoke: bool = False):
    # a reader's sizes unless asked for the test suite's (--smoke: what CI checks, in minutes)
    env = {k: v for k, v in os.environ.items() if k != "SPHERELAB_SMOKE"} | (
        {"SPHERELAB_NOTEBOOK_SIZE": "small"} if smoke else {})
    # on a copy of the notebooks: JupyterLab autosaves what it runs, and the repository's notebooks
    # are committed without outputs
    proc = subprocess.Popen(["make", "lab", "HEADLESS=1", f"PORT={port}", f"NOTEBOOK_DIR={notebook_dir}"], cwd=ROOT,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    t0 = time.perf_counter()
    for line in proc.stdout:
        m = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=(\w+)", line)
        if m:
            return proc, m.group(1), time.perf_counter() - t0
    raise RuntimeError("JupyterLab did not start (no URL with a token in its log)")


def timed_redraw(page, action, timeout_ms: int = 60_000) -> tuple[float, float] | None:
    """Seconds from ``action()`` to the first changed figure pixel, and to the final figure (no
    "fitting…" / "computing…" label left); None: nothing redrew."""
    page.evaluate(SNAP)
    t0 = time.perf_counter()
    action()
    try:
        page.wait_for_function(CHANGED, timeout=timeout_ms, polling="raf")
        first = time.perf_counter() - t0
        page.wait_for_function(SETTLED, timeout=timeout_ms, polling="raf")
    except Exception:  # noqa: BLE001 - Playwright's TimeoutError
        return None
    return first, time.perf_counter() - t0


def run_notebook(page, port: int, token: str, name: str, presses: int, pause: float = 0.0,
                 workdir: str | None = None, shots: str | None = None) -> dict:
    page.goto(f"http://127.0.0.1:{port}/lab/tree/{name}?reset&token={token}")  # reset: only this notebook open
    page.wait_for_selector(".jp-Notebook", timeout=120_000)
    page.wait_for_function("() => document.body.innerText.includes('Idle')", timeout=120_000, polling=250)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    t0 = time.perf_counter()
    time.sleep(1.0)
    import json

    cells = json.loads((ROOT / "notebooks" / name).read_text())["cells"]
    n_code = sum(c["cell_type"] == "code" for c in cells)
    page.wait_for_function(DONE, arg=n_code, timeout=900_000, polling=500)  # every code cell numbered
    run_all = time.perf_counter() - t0
    time.sleep(1.0 + pause)  # widgets and figures render after the last reply; then a reader's pause
    outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
    errors = [t[:300] for t in outputs if "Traceback" in t or re.search(r"^\w+Error\b", t, re.M)]
    # anything on stderr (a warning, a log line, a worker's complaint): a reader did not cause it
    stderr = [t[:300] for t in page.locator('[data-mime-type="application/vnd.jupyter.stderr"]').all_inner_texts()]
    sliders = page.locator(".noUi-handle")
    dropdowns = page.locator(".widget-dropdown select")
    figures = page.locator(".jupyter-matplotlib-canvas-div").count()
    # every figure against the output area it sits in (the file browser open): its width, the room
    # from its left edge to the area's right edge, and how far its right edge passes that one
    # (interactive canvases, and the images a cell displays: a recorded figure, an SVG)
    widths = page.evaluate("""() => [...document.querySelectorAll('.jupyter-matplotlib-canvas-div canvas:first-child, '
      + '.jp-OutputArea-output img, .jp-OutputArea-output .jp-RenderedSVG > svg')]
      .map(c => { const b = c.getBoundingClientRect(), a = c.closest('.jp-OutputArea').getBoundingClientRect();
                  return [b.width, a.right - b.left]; })""")
    # a progress bar still shown once every cell has finished: a fit's bar that outlived its fit
    bars = page.evaluate("""() => [...document.querySelectorAll('.jp-OutputArea-output .widget-hprogress')]
      .filter(e => e.offsetParent !== null && getComputedStyle(e).visibility !== 'hidden').length""")
    overflow = max((w - room for w, room in widths), default=0.0)
    if shots is not None:  # what a reader sees of each figure, in the window, kept for a person to look at
        for i, canvas in enumerate(page.locator(".jupyter-matplotlib-canvas-div").all()):
            canvas.scroll_into_view_if_needed()
            page.screenshot(path=os.path.join(shots, f"{name[:2]}-figure-{i}.png"))
    moves, dead = [], []
    for i in range(sliders.count()):
        handle = sliders.nth(i)
        label = f"slider {i}"
        for _ in range(presses):
            handle.scroll_into_view_if_needed()
            at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
            key = "ArrowLeft" if at_max else "ArrowRight"  # a slider at its end moves back
            t = timed_redraw(page, lambda h=handle, k=key: h.press(k))
            (moves.append((label, t)) if t is not None else dead.append(label))
    for i in range(dropdowns.count()):
        select = dropdowns.nth(i)
        options = select.locator("option").count()
        if options < 2:
            continue
        current = select.evaluate("s => s.selectedIndex")
        select.scroll_into_view_if_needed()
        t = timed_redraw(page, lambda s=select, k=(current + 1) % options: s.select_option(index=k))
        (moves.append((f"dropdown {i}", t)) if t is not None else dead.append(f"dropdown {i}"))
    # a reader saves: the lab's pre-save hook (.jupyter/) must write the notebook as committed. By
    # the File menu, as Run All is run: a key press after the last control went to that control
    # (a <select> keeps the focus), and the file was never saved
    saved_clean = None
    if workdir is not None:
        path = os.path.join(workdir, name)
        before = os.stat(path).st_mtime_ns
        page.keyboard.press("Escape")
        page.locator(".lm-MenuBar-itemLabel", has_text="File").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Save Notebook").first.click()
        deadline = time.time() + 30
        while os.stat(path).st_mtime_ns == before and time.time() < deadline:
            time.sleep(0.2)
        if os.stat(path).st_mtime_ns == before:
            saved_clean = "not saved"
        else:
            # the server may write the file in more than one step: read it once it has settled
            settled = None
            while os.stat(path).st_mtime_ns != settled and time.time() < deadline:
                settled = os.stat(path).st_mtime_ns
                time.sleep(0.5)
            clean = (ROOT / "notebooks" / name).read_bytes() == open(path, "rb").read()
            saved_clean = True if clean else "outputs written"
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Shut Down Kernel").first.click()
    return dict(bars=bars, saved_clean=saved_clean, name=name, run_all=run_all, errors=errors, stderr=stderr, sliders=sliders.count(), dropdowns=dropdowns.count(),
                figures=figures, moves=moves, dead=sorted(set(dead)), overflow=overflow,
                widest=max((w for w, _ in widths), default=0.0), room=min((r for _, r in widths), default=0.0))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notebooks", nargs="*", default=None, help="prefixes, e.g. 01 04 (default: all)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--presses", type=int, default=3)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="the notebooks at the test suite's sizes (CI)")
    parser.add_argument("--pause", type=float, default=10.0, help="seconds between run-all and the first move")
    parser.add_argument("--screenshots", default="build/browser",
                        help="where each figure's screenshot in the window goes ('' for none)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    names = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    if args.notebooks:
        names = [n for n in names if any(n.startswith(k) for k in args.notebooks)]
    print("machine:", describe())
    import shutil
    import tempfile

    port = free_port()
    workdir = tempfile.mkdtemp(prefix="spherelab-browser-")
    for name in names:
        shutil.copy(ROOT / "notebooks" / name, workdir)
    proc, token, up = start_lab(port, workdir, args.smoke)
    shots = None
    if args.screenshots:
        shots = str((ROOT / args.screenshots).resolve())
        os.makedirs(shots, exist_ok=True)
    print(f"JupyterLab up in {up:.1f} s; Chromium {args.chromium}, window {WINDOW[0]} x {WINDOW[1]}; moves {args.pause:g} s "
          "after run-all")
    results = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": WINDOW[0], "height": WINDOW[1]})
            for name in names:
                results.append(run_notebook(page, port, token, name, args.presses, args.pause, workdir, shots))
                r = results[-1]
                print(f"  {name}: run-all {r['run_all']:.1f} s, {len(r['moves'])} moves", flush=True)
            browser.close()
    finally:
        import signal

        os.killpg(proc.pid, signal.SIGTERM)  # make and the JupyterLab server it started
        proc.wait(30)
        shutil.rmtree(workdir, ignore_errors=True)
    print("saved after Run All as committed (git status clean): "
          + ", ".join(f"{r['name'][:2]} {'yes' if r['saved_clean'] is True else r['saved_clean']}" for r in results))
    print("\n| notebook | run all (s) | sliders / dropdowns / figures | moves | median (ms) | worst (ms) | "
          "final figure: median / worst (ms) | errors | controls that never redrew | widest figure / room (px) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    failures = []
    for r in results:
        t = np.array([m[1][0] for m in r["moves"]]) * 1e3
        f = np.array([m[1][1] for m in r["moves"]]) * 1e3
        med, worst = (f"{np.median(t):.0f}", f"{t.max():.0f}") if t.size else ("-", "-")
        final = f"{np.median(f):.0f} / {f.max():.0f}" if f.size else "-"
        print(f"| {r['name']} | {r['run_all']:.1f} | {r['sliders']} / {r['dropdowns']} / {r['figures']} | "
              f"{t.size} | {med} | {worst} | {final} | {len(r['errors'])} | {', '.join(r['dead']) or 'none'} | "
              f"{r['widest']:.0f} / {r['room']:.0f}{' (too wide)' if r['overflow'] > 0 else ''} |")
        if r["errors"]:
            failures.append(f"{r['name']}: error output: {r['errors'][0]}")
        if r["stderr"]:
            failures.append(f"{r['name']}: {len(r['stderr'])} output(s) on stderr, the first: {r['stderr'][0]}")
        if r["overflow"] > 0:
            failures.append(f"{r['name']}: a figure passes its output area's right edge by {r['overflow']:.0f} px "
                            f"in a {WINDOW[0]}-px window")
        if r["bars"]:
            failures.append(f"{r['name']}: {r['bars']} progress bar(s) still shown after every cell finished")
        if r["figures"] and not r["moves"]:
            failures.append(f"{r['name']}: no control redrew a figure")
        if r["saved_clean"] == "outputs written":
            failures.append(f"{r['name']}: saved after Run All, the notebook differs from the committed one "
                            "(outputs written: is .jupyter/ on JUPYTER_CONFIG_PATH?)")
        elif r["saved_clean"] == "not saved":
            failures.append(f"{r['name']}: File > Save Notebook did not write the file within 30 s")
    for r in results:
        for label in sorted({m[0] for m in r["moves"]}):
            t = [m[1] for m in r["moves"] if m[0] == label]
            print(f"{r['name']} {label}: " + ", ".join(f"{a * 1e3:.0f}" + (f" (final {b * 1e3:.0f})" if b - a > 0.05
                                                                       else "") for a, b in t) + " ms")
    if failures:
        print("\nFAILED:\n" + "\n".join(failures))
    return 1 if (failures and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
