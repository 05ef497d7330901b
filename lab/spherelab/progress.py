"""A fit's progress bar: iteration, bound, elapsed time, and the remainder where one is known.

``progress=True`` shows it from the first iteration, ``False`` never; ``None`` (the default) shows it
once a fit has run a few seconds in an interactive session (an IPython kernel or a terminal, on the
main thread), so that a long fit talks and a short one, a script's or a background refit's stays
quiet. The bar is tqdm's (``tqdm.auto``: a
widget in a notebook, text on a terminal). ``progress=`` also takes a :class:`Reporter`, which
receives the same reports on the fitting thread (the explorers' bar,
:class:`spherelab.widgets.FitBar`, is one).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from ._listing import own_names
from ._validation import check_bool

__all__ = ["FitProgress", "Reporter", "check_progress", "AFTER_SECONDS"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports

#: seconds a fit runs before ``progress=None`` shows its bar
AFTER_SECONDS = 5.0


def _interactive() -> bool:
    if threading.current_thread() is not threading.main_thread():
        return False  # an explorer's background refit: a bar would land in whatever cell is current
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and getattr(shell, "kernel", None) is not None:
            return True
    except ImportError:
        pass
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


class Reporter:
    """Where a fit's progress goes instead of a tqdm bar: pass an instance as ``progress=``. A fit
    calls :meth:`start` once, :meth:`step` after each iteration and :meth:`close` at its end, all
    on the thread that fits (an explorer's background thread: a reporter that draws widgets hands
    the drawing to its event loop). Subclasses implement :meth:`step`."""

    def start(self, desc: str, total: int | None, max_time: float | None) -> None:
        """A fit named ``desc`` begins: at most ``total`` iterations, ``max_time`` seconds (None:
        no such limit)."""

    def step(self, iteration: int, bound: float, elapsed: float, stage: str | None) -> None:
        """Iteration ``iteration`` (from 1) has ended with ``bound``, ``elapsed`` seconds into
        the fit; ``stage`` names the optimisation running, when a fit has several."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def close(self) -> None:
        """The fit has ended (finished, stopped or failed)."""


def check_progress(progress: Any, name: str = "progress") -> bool | Reporter | None:
    """``progress`` as True, False (NumPy's too), None or a :class:`Reporter`, else a
    ``TypeError`` naming it."""
    if progress is None or isinstance(progress, Reporter):
        return progress
    try:
        return check_bool(progress, name)
    except TypeError:
        raise TypeError(f"{name} must be True, False or None (automatic), or a spherelab.progress.Reporter, "
                        f"got {progress!r}") from None


class FitProgress:
    """Reports a fit: call it with the bound after each iteration (``stage``, when set, names the
    optimisation running), then :meth:`close`. ``total`` is the iteration limit (the bar's end;
    L-BFGS-B usually converges before it), ``max_time`` a time limit (the time it leaves is shown),
    ``label`` the name of the number reported (the bound, or a validation NLPD)."""

    def __init__(self, progress: bool | Reporter | None, desc: str, total: int | None = None,
                 max_time: float | None = None, label: str = "bound"):
        self.mode = check_progress(progress)
        self.desc, self.total, self.max_time, self.label = desc, total, max_time, label
        self.start, self.iteration, self.bar, self.stage = time.perf_counter(), 0, None, None
        self.reporter = self.mode if isinstance(self.mode, Reporter) else None
        self.auto = self.mode is None and _interactive()
        if self.reporter is not None:
            self.reporter.start(desc, total, max_time)
        elif self.mode:
            self._open(0)

    def _open(self, done: int) -> None:
        from tqdm.auto import tqdm

        # one estimate of the time left: under max_time the postfix's, not tqdm's (from the iteration
        # limit, which L-BFGS-B rarely reaches); a bar shown by itself (progress=None) goes when the
        # fit ends, one asked for stays
        timed = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"
        self.bar = tqdm(total=self.total, initial=done, desc=self.desc, unit="it", leave=bool(self.mode),
                        dynamic_ncols=True, bar_format=timed if self.max_time is not None else None)

    def __call__(self, bound: float) -> None:
        self.iteration += 1
        elapsed = time.perf_counter() - self.start
        if self.reporter is not None:
            self.reporter.step(self.iteration, float(bound), elapsed, self.stage)
            return
        if self.bar is None:
            if not (self.auto and elapsed >= AFTER_SECONDS):
                return
            self._open(self.iteration - 1)
        self.bar.update(1)
        postfix = {"stage": self.stage} if self.stage else {}
        postfix[self.label] = f"{bound:.6g}"
        if self.max_time is not None:
            postfix["time left"] = f"{max(self.max_time - elapsed, 0.0):.0f} s"
        self.bar.set_postfix(postfix, refresh=False)

    def close(self) -> None:
        if self.reporter is not None:
            reporter, self.reporter = self.reporter, None
            reporter.close()
        if self.bar is not None:
            self.bar.close()
            self.bar = None
