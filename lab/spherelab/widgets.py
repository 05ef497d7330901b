"""Helpers for the notebooks' interactive figures (ipympl / any Agg-based canvas).

:class:`BlitManager` implements Matplotlib's blitting pattern: the static part of a figure is
rendered once and cached; a slider move that changes only a few artists restores the cache and
redraws just those artists (a few ms instead of a full render, which costs ~100 ms per axes with
tick labels on a small machine). Changes that move axis limits call :meth:`BlitManager.full`.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any, Iterable

from ._listing import own_names

__all__ = ["BlitManager", "subplots", "figure", "capped_dpi", "MAX_WIDTH_PX", "overlapping_text", "notebook_sizes",
           "interactive"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports


def smoke_run() -> bool:
    """Whether this is the test suite's small run of a notebook (``SPHERELAB_SMOKE=1``)."""
    return os.environ.get("SPHERELAB_SMOKE") == "1"


def notebook_sizes(**choices: tuple[Any, Any]) -> SimpleNamespace:
    """A notebook's sizes, chosen in one place: each keyword is a pair ``(small, full)``, the size
    the test suite runs (``SPHERELAB_SMOKE=1``, or ``SPHERELAB_NOTEBOOK_SIZE=small`` with live
    figures) and the size a reader runs. Returns a namespace
    of the chosen values, and ``smoke`` saying which.

    Examples
    --------
    >>> size = notebook_sizes(max_degree=(6, 12))
    >>> size.max_degree == (6 if size.smoke else 12)
    True
    """
    # SPHERELAB_NOTEBOOK_SIZE=small: the small sizes with live figures (the browser check in CI)
    smoke = smoke_run() or os.environ.get("SPHERELAB_NOTEBOOK_SIZE") == "small"
    for name, pair in choices.items():
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(f"{name} must be a pair (small, full), got {pair!r}")
    return SimpleNamespace(smoke=smoke, **{name: pair[0 if smoke else 1] for name, pair in choices.items()})


def interactive(shell) -> None:
    """Draw figures as ipympl widgets in JupyterLab (``%matplotlib widget`` in the IPython
    ``shell``), so that sliders update them in place; the test suite's small run keeps its static
    backend."""
    if not smoke_run():
        shell.run_line_magic("matplotlib", "widget")


#: the widest figure, in pixels: a JupyterLab output area in a 1 280-px window with the file browser
#: open leaves 844 right of the canvas's left edge (benchmarks/tools/browser.py checks it)
MAX_WIDTH_PX = 800


def capped_dpi(width_inches: float, dpi: float | None = None) -> float:
    """The resolution at which a figure ``width_inches`` wide is at most :data:`MAX_WIDTH_PX`
    pixels: ``dpi`` (Matplotlib's ``figure.dpi`` when None) or less. Scaling the resolution, not
    the size, keeps the layout: every text and line shrinks with the panels."""
    import matplotlib

    dpi = float(matplotlib.rcParams["figure.dpi"] if dpi is None else dpi)
    return min(dpi, MAX_WIDTH_PX / float(width_inches))


def _capped(kwargs: dict) -> dict:
    import matplotlib

    width = (kwargs.get("figsize") or matplotlib.rcParams["figure.figsize"])[0]
    return {**kwargs, "dpi": capped_dpi(width, kwargs.get("dpi"))}


def subplots(*args, **kwargs):
    """``plt.subplots`` for an explorer's figure: created with interactive mode off, so that under
    ipympl the canvas is not displayed by the cell that builds the explorer — only where its
    ``widget()`` (figure with its controls) is displayed, once; at most :data:`MAX_WIDTH_PX` wide
    (:func:`capped_dpi`)."""
    import matplotlib.pyplot as plt

    with plt.ioff():
        return plt.subplots(*args, **_capped(kwargs))


def overlapping_text(fig, tolerance: float = 1.0) -> list[str]:
    """Layout defects of a drawn figure: every pair of visible texts (titles, axis and tick labels,
    colour-bar labels, figure titles) whose boxes overlap, every text that overlaps the panel
    of an axes it does not belong to (a colour-bar label under a neighbouring globe), and every
    text or legend that reaches past the canvas's edge (cut off where the canvas is shown as it
    is, as ipympl shows it). Returns one line per defect, empty when the layout is clean; the
    notebook tests assert it on every figure.

    ``tolerance`` (pixels) shrinks each box first, so texts that merely touch pass.
    """
    import numpy as np

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()

    def tick_labels(axis):  # the drawn ones: within the view, compared on the axis's scale (log too)
        scale = axis.get_transform()
        with np.errstate(divide="ignore", invalid="ignore"):
            lo, hi = sorted(scale.transform(np.asarray(axis.get_view_interval(), dtype=float)))
            slack = 1e-9 * max(abs(lo), abs(hi), 1.0)
            return [label for tick in axis.get_major_ticks()
                    if lo - slack <= scale.transform(np.array([float(tick.get_loc())]))[0] <= hi + slack
                    for label in (tick.label1, tick.label2)]

    owned = [(t, None) for t in fig.texts]
    for ax in fig.axes:
        if ax.get_visible():
            axis_texts = [ax.xaxis.label, ax.yaxis.label, *tick_labels(ax.xaxis), *tick_labels(ax.yaxis)]
            for t in [ax.title, *ax.texts, *(axis_texts if ax.axison else [])]:
                owned.append((t, ax))
    texts = []
    for t, owner in owned:
        if not t.get_visible() or not t.get_text().strip():
            continue
        box = t.get_window_extent(renderer)
        if box.width > 2 * tolerance and box.height > 2 * tolerance:
            texts.append((t, owner, box.padded(-tolerance)))
    panels = [(ax, ax.get_window_extent(renderer).padded(-tolerance)) for ax in fig.axes if ax.get_visible()]
    defects = []
    canvas = fig.bbox.padded(tolerance)
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_visible())]
    for item, what in [*((t, repr(t.get_text())) for t, _, _ in texts),
                       *((leg, "a legend") for leg in legends if leg is not None and leg.get_visible())]:
        box = item.get_window_extent(renderer)
        cut = [side for side, out in (("left", box.x0 < canvas.x0), ("right", box.x1 > canvas.x1),
                                      ("bottom", box.y0 < canvas.y0), ("top", box.y1 > canvas.y1)) if out]
        if cut:
            defects.append(f"{what} is cut at the canvas's {' and '.join(cut)} edge")
    for i, (a, owner, box_a) in enumerate(texts):
        for b, _, box_b in texts[i + 1:]:
            if box_a.overlaps(box_b):
                defects.append(f"{a.get_text()!r} overlaps {b.get_text()!r}")
        for ax, box in panels:
            if ax is not owner and box_a.overlaps(box):
                defects.append(f"{a.get_text()!r} overlaps a panel it does not belong to")
    return defects


def figure(*args, **kwargs):
    """``plt.figure`` with interactive mode off and its width capped (see :func:`subplots`)."""
    import matplotlib.pyplot as plt

    with plt.ioff():
        return plt.figure(*args, **_capped(kwargs))


class BlitManager:
    """Fast redraw of a few changing ("animated") artists over a cached background.

    Parameters
    ----------
    figure
        A Matplotlib figure whose canvas supports ``copy_from_bbox`` (Agg, ipympl).
    artists
        The artists that change on fast updates; they are excluded from the cached background.
    """

    def __init__(self, figure, artists: Iterable = ()) -> None:
        self.figure = figure
        self.canvas = figure.canvas
        self._background = None
        self._artists: list = []
        for artist in artists:
            self.add(artist)
        self._cid = self.canvas.mpl_connect("draw_event", self._on_draw)

    def add(self, artist) -> None:
        """Register an artist redrawn by :meth:`update`."""
        artist.set_animated(True)
        self._artists.append(artist)

    def _on_draw(self, event) -> None:
        self._background = self.canvas.copy_from_bbox(self.figure.bbox)
        self._draw_artists()

    def _draw_artists(self) -> None:
        for artist in self._artists:
            self.figure.draw_artist(artist)

    def _live(self) -> bool:
        """Whether the figure still has a canvas that can show a redraw. A closed figure (the
        inline backend closes every figure it has shown: documentation builds, nbconvert) gets a
        bare canvas: nothing on screen to update, so updates are skipped; a figure moved to a new
        canvas is followed."""
        canvas = self.figure.canvas
        if canvas is not self.canvas:
            if not hasattr(canvas, "copy_from_bbox"):
                return False
            self.canvas.mpl_disconnect(self._cid)
            self.canvas, self._background = canvas, None
            self._cid = canvas.mpl_connect("draw_event", self._on_draw)
        return True

    def full(self) -> None:
        """Schedule a full render (axis limits or static artists changed)."""
        if self._live():
            self.canvas.draw_idle()

    def update(self) -> None:
        """Redraw only the registered artists over the cached background."""
        if not self._live():
            return
        if self._background is None:
            self.full()
            return
        self.canvas.restore_region(self._background)
        self._draw_artists()
        self.canvas.blit(self.figure.bbox)
        self.canvas.flush_events()
