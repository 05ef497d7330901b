"""Figures drawn from the benchmark log, never from retyped numbers.

A claim with a figure (:data:`FIGURES`) has it drawn from the tables of its log entries into
``benchmarks/figures/CLAIM.svg``; the SVG's description names the newest entry, so
``record.py render --check`` can tell a figure that lags behind its log.

    python benchmarks/tools/figures.py            # redraw every figure from the current log
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIGURE_DIR = HERE.parent / "figures"

#: the claims drawn as a figure, and how: claim -> function(the claim's log entries, oldest first)
#: -> matplotlib Figure
FIGURES: dict = {}


def source_tag(entry: dict) -> str:
    """What a figure's SVG description says about the log entry it was drawn from."""
    return f"drawn from benchmarks/log/{entry['file']}"


def tables(body: str) -> dict[str, list[list[str]]]:
    """Each ``### heading`` of a log body with the rows of the Markdown table under it (header and
    rule left out)."""
    out: dict[str, list[list[str]]] = {}
    heading = None
    for line in body.split("\n"):
        match = re.match(r"#{3,6} (.*)", line)
        if match:
            heading = match.group(1).strip()
            out[heading] = []
        elif heading and line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("- :") for c in cells):
                out[heading].append(cells)
    return {h: rows[1:] for h, rows in out.items() if rows}


def frontier_runs(entries: list[dict]) -> dict[str, dict[int, tuple[tuple[str, ...], dict]]]:
    """Per set and split, each contender's newest curve: ``{set: {split: (log files, {contender: [(s,
    NLPD, RMSE), ...]})}}``. A later run of a contender on a (set, split) replaces its earlier curve
    whole; the contenders it did not run keep theirs (the files say which runs contributed)."""
    out: dict = {}
    for entry in entries:
        for heading, rows in tables(entry["body"]).items():
            match = re.match(r"(\w+), split (\d+):", heading)
            if not match:
                continue
            curves: dict = {}
            for row in rows:
                if len(row) == 5 and all(re.fullmatch(r"-?[0-9.]+", c) for c in row[2:]):
                    curves.setdefault(row[0], []).append(tuple(float(c) for c in row[2:]))
            if curves:
                split = out.setdefault(match.group(1), {}).setdefault(int(match.group(2)), ({}, {}))
                for label, curve in curves.items():
                    split[0][label] = entry["file"]
                    split[1][label] = curve
    return {name: {s: (tuple(sorted(set(files.values()))), curves) for s, (files, curves) in splits.items()}
            for name, splits in out.items()}


def frontier_curves(entries: list[dict]) -> dict[str, tuple[str, dict[str, list[tuple[float, float]]]]]:
    """A panel per set: the split whose newest run has the most contenders (the lowest split on a
    tie), as ``{set: ("set, split s", {contender: [(seconds, test NLPD), ...]})}``."""
    out = {}
    for name, splits in frontier_runs(entries).items():
        split = min(splits, key=lambda s: (-len(splits[s][1]), s))
        curves = {label: [(t, nlpd) for t, nlpd, _ in c] for label, c in splits[split][1].items()}
        out[name] = (f"{name}, split {split}", curves)
    return out


def frontier_figure(entries: list[dict]):
    """One panel per set (:func:`frontier_curves`): each contender's test NLPD against its fit's seconds (log
    scale), GPflow SGPR's final NLPD dashed. VISH's points are separate fits, one per degree."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = dict(frontier_curves(entries).values())
    cols = min(2, len(panels))
    rows = -(-len(panels) // cols)
    # 8.5 inches wide at most: 816 px at 96 dpi, inside a notebook's output area (about 850 px beside
    # JupyterLab's side bar) on a 1 280-px screen
    fig, axes = plt.subplots(rows, cols, figsize=(4.25 * cols, 3.6 * rows), squeeze=False)
    styles = {"spherelab": "-", "GPflow": "--", "GPyTorch": ":"}
    # one colour per contender in every panel (a contender missing from one set shifts no other)
    order = list(dict.fromkeys(label for curves in panels.values() for label in curves))
    colours = {label: f"C{i % 10}" if i < 10 else "k" for i, label in enumerate(order)}
    for ax, (name, curves) in zip(axes.ravel(), panels.items()):
        finite = [v for c in curves.values() for _, v in c]
        for label, points in curves.items():
            t, v = zip(*points)
            ax.plot(t, v, styles.get(label.split()[0], "-"), color=colours[label], marker="o", markersize=2.5,
                    lw=1.3, label=label)
        if "GPflow SGPR" in curves:
            ax.axhline(curves["GPflow SGPR"][-1][1], color="0.4", lw=0.8, ls=(0, (4, 3)))
        low, high = min(finite), sorted(finite)[int(0.9 * (len(finite) - 1))]
        ax.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
        ax.set_xscale("log")
        ax.set_xlabel("fit time, s (log scale)")
        ax.set_ylabel("test NLPD (lower is better)")
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    handles: dict = {}
    for ax in axes.ravel()[:len(panels)]:  # every contender once, whichever panel it ran in
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05 + 0.1 / rows, 1, 1))
    return fig


FIGURES["frontier"] = frontier_figure


def draw(claim: str, runs: list[dict]) -> Path:
    """Draw ``claim``'s figure from its log entries ``runs`` (oldest first; the description names
    the newest) into ``benchmarks/figures/CLAIM.svg``."""
    entry = runs[-1]
    fig = FIGURES[claim](runs)
    FIGURE_DIR.mkdir(exist_ok=True)
    target = FIGURE_DIR / f"{claim}.svg"
    fig.savefig(target, format="svg", metadata={"Date": None, "Description": source_tag(entry)})
    return target


def drawn_from(claim: str) -> str | None:
    """The description of ``claim``'s figure on disk (``None`` without one)."""
    path = FIGURE_DIR / f"{claim}.svg"
    if not path.exists():
        return None
    match = re.search(r"<dc:description>(.*?)</dc:description>", path.read_text(encoding="utf-8"), re.S)
    return match.group(1).strip() if match else ""


def main() -> int:
    sys.path.insert(0, str(HERE))
    from record import entries

    every = entries()
    for claim in FIGURES:
        runs = [e for e in every if e["claim"] == claim]
        if runs:
            print(f"wrote {draw(claim, runs).relative_to(HERE.parents[1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
