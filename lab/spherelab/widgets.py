"""Helpers for the notebooks' interactive figures (ipympl / any Agg-based canvas).

:class:`BlitManager` implements Matplotlib's blitting pattern: the static part of a figure is
rendered once and cached; a slider move that changes only a few artists restores the cache and
redraws just those artists (a few ms instead of a full render, which costs ~100 ms per axes with
tick labels on a small machine). Changes that move axis limits call :meth:`BlitManager.full`.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["BlitManager", "subplots", "figure"]


def subplots(*args, **kwargs):
    """``plt.subplots`` for an explorer's figure: created with interactive mode off, so that under
    ipympl the canvas is not displayed by the cell that builds the explorer — only where its
    ``widget()`` (figure with its controls) is displayed, once."""
    import matplotlib.pyplot as plt

    with plt.ioff():
        return plt.subplots(*args, **kwargs)


def figure(*args, **kwargs):
    """``plt.figure`` with interactive mode off (see :func:`subplots`)."""
    import matplotlib.pyplot as plt

    with plt.ioff():
        return plt.figure(*args, **kwargs)


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

    def full(self) -> None:
        """Schedule a full render (axis limits or static artists changed)."""
        self.canvas.draw_idle()

    def update(self) -> None:
        """Redraw only the registered artists over the cached background."""
        if self._background is None:
            self.full()
            return
        self.canvas.restore_region(self._background)
        self._draw_artists()
        self.canvas.blit(self.figure.bbox)
        self.canvas.flush_events()
