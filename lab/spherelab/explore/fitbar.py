"""The explorers' progress bar: a fit on a worker thread reported in the explorer's controls.

An explorer that refits on a worker thread (:mod:`.background`) passes ``progress=bar.follow(...)``
to the fit; the bar shows the iteration, the bound, the seconds so far and an estimate of the
remainder while the configuration shown is the one fitting, and hides when the fit ends. It is the
same report a fit gives a terminal's tqdm bar (:class:`spherelab.progress.FitProgress`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable

from ..progress import Reporter

__all__ = ["FitBar"]


class FitBar(Reporter):
    """An ipywidgets bar and a line of text (``box``, for an explorer's controls), updated from any
    thread: a change made off the thread that built it is handed to that thread's event loop (a
    Jupyter kernel's), so widgets change only where the kernel's messages are sent; without a
    running loop (scripts, tests) it is made at once.

    Parameters
    ----------
    every
        Seconds between two redraws while a fit runs (its last report is always drawn at
        :meth:`close`, none is lost from the text a test reads).
    """

    def __init__(self, every: float = 0.25) -> None:
        import ipywidgets as widgets

        self.bar = widgets.IntProgress(value=0, min=0, max=1, layout=widgets.Layout(width="200px"))
        self.text = widgets.Label()
        self.box = widgets.HBox([self.bar, self.text], layout=widgets.Layout(visibility="hidden"))
        self.every = float(every)
        self._home = threading.get_ident()
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._desc, self._total, self._max_time, self._drawn = "", None, None, 0.0

    def _apply(self, change: Callable[[], None]) -> None:
        loop = self._loop
        if threading.get_ident() != self._home and loop is not None and loop.is_running():
            loop.call_soon_threadsafe(change)
        else:
            change()

    def _draw(self, value: int, maximum: int, text: str) -> None:
        def change():
            self.bar.max = max(int(maximum), 1)
            self.bar.value = min(max(int(value), 0), self.bar.max)
            self.text.value = text
            self.box.layout.visibility = "visible"

        self._apply(change)

    def count(self, done: int, total: int, text: str) -> None:
        """Show ``done`` of ``total`` steps (an explorer's fits of several models) and ``text``."""
        self._draw(done, total, text)

    def start(self, desc: str, total: int | None, max_time: float | None) -> None:
        self._desc, self._total, self._max_time, self._drawn = desc, total, max_time, 0.0
        self._draw(0, total or 1, f"{desc}: starting")

    def step(self, iteration: int, bound: float, elapsed: float, stage: str | None) -> None:
        now = time.perf_counter()
        if now - self._drawn < self.every:
            return
        self._drawn = now
        self._draw(*self.report(iteration, bound, elapsed, stage))

    def report(self, iteration: int, bound: float, elapsed: float, stage: str | None) -> tuple[int, int, str]:
        """The bar's value, its maximum and its text for one iteration's report: the iteration (of
        the limit), the bound, the seconds so far and, with an iteration or time limit, at most
        how many remain (L-BFGS-B usually converges before its limit)."""
        total, max_time = self._total, self._max_time
        words = [self._desc] + ([stage] if stage else [])
        words.append(f"iteration {iteration}" + (f" of at most {total}" if total else ""))
        words += [f"bound {bound:.6g}", f"{elapsed:.1f} s"]
        left = []
        if total:
            left.append(elapsed / iteration * (total - iteration))
        if max_time is not None:
            left.append(max(max_time - elapsed, 0.0))
        if left:
            words.append(f"at most {min(left):.0f} s left")
        if total:
            return iteration, total, " · ".join(words)
        if max_time:
            return int(1000 * min(elapsed / max_time, 1.0)), 1000, " · ".join(words)
        return iteration % 21, 20, " · ".join(words)  # no limit known: the bar moves, it does not fill

    def close(self) -> None:
        def change():
            self.box.layout.visibility = "hidden"
            self.bar.value, self.text.value = 0, ""

        self._apply(change)

    def follow(self, shown: Callable[[], bool]) -> Reporter:
        """A :class:`~spherelab.progress.Reporter` for one fit, passed on to this bar while
        ``shown()`` is true (the fit is of the configuration on screen); fits computed ahead stay
        silent until the user moves to them."""
        return _Following(self, shown)


class _Following(Reporter):
    def __init__(self, bar: FitBar, shown: Callable[[], bool]) -> None:
        self.owner, self.shown, self.args, self.live = bar, shown, ("", None, None), False

    def start(self, desc: str, total: int | None, max_time: float | None) -> None:
        self.args = (desc, total, max_time)

    def step(self, iteration: int, bound: float, elapsed: float, stage: str | None) -> None:
        if not self.shown():
            self.live = False
            return
        if not self.live:  # shown from now on: the bar takes this fit's limits
            self.owner.start(*self.args)
            self.live = True
        self.owner.step(iteration, bound, elapsed, stage)

    def close(self) -> None:
        if self.live and self.shown():
            self.owner.close()
