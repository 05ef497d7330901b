"""Slow values of an explorer's configurations, computed once each and ahead of the user.

An explorer whose configuration needs a real recompute (a refit, an eigendecomposition) asks a
:class:`Precomputer` for the value of the shown configuration (:meth:`Precomputer.when_ready`:
at once when it is at hand; otherwise, in a Jupyter kernel, on a worker thread while the figure
shows the previous value and a "fitting…" state, the kernel staying free for the widgets) and
tells it which configurations are one move away (:meth:`Precomputer.ahead`): those are computed
on a background thread while the user reads, so that the next move finds its value ready.
NumPy, BLAS and the compiled kernels release the GIL while they work.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, Callable, Hashable, Iterable

__all__ = ["Precomputer", "Selectable"]


class Precomputer:
    """``compute(key)`` memoised (at most ``max_items`` values, least recently used dropped),
    thread-safe, with a background thread working through the keys given to :meth:`ahead`.

    A key asked for while the background thread computes it is waited for, not computed twice;
    a failure in the background is dropped (the caller meets it when it asks for that key).

    Parameters
    ----------
    compute
        ``compute(key) -> value``; must not share mutable state between calls (it runs on two
        threads).
    max_items
        Values kept.
    """

    def __init__(self, compute: Callable[[Hashable], Any], max_items: int = 64) -> None:
        self._compute, self.max_items = compute, int(max_items)
        self._values: collections.OrderedDict = collections.OrderedDict()
        self._pending: dict = {}
        self._queue: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._latest: tuple | None = None  # the newest when_ready request not yet started
        self._foreground: threading.Thread | None = None
        try:  # a Jupyter kernel runs its cells and widget callbacks inside this loop
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    def ready(self, key: Hashable) -> bool:
        """Whether the value of ``key`` is at hand."""
        with self._lock:
            return key in self._values

    def get(self, key: Hashable) -> Any:
        """The value of ``key``: cached, awaited from the background thread, or computed here."""
        while True:
            with self._lock:
                if key in self._values:
                    self._values.move_to_end(key)
                    return self._values[key]
                event = self._pending.get(key)
                mine = event is None
                if mine:
                    event = self._pending[key] = threading.Event()
            if not mine:
                event.wait()
                continue  # computed meanwhile, or failed there: then computed here
            try:
                value = self._compute(key)
                with self._lock:
                    self._values[key] = value
                    while len(self._values) > self.max_items:
                        self._values.popitem(last=False)
                return value
            finally:
                with self._lock:
                    self._pending.pop(key, None)
                event.set()

    def when_ready(self, key: Hashable, done: Callable[[Any], None],
                   failed: Callable[[BaseException], None] | None = None, wait: bool = False) -> bool:
        """Call ``done(value)`` with the value of ``key``: now when it is at hand, with ``wait``,
        or outside an event loop (scripts, tests; returns True); otherwise compute it on a worker
        thread and call ``done`` (or ``failed(error)``) in the loop's thread when it is ready,
        returning False at once. Of several requests made while one computes, only the newest
        is started."""
        if wait or self._loop is None or not self._loop.is_running() or self.ready(key):
            done(self.get(key))
            return True
        with self._lock:
            self._latest = (key, done, failed)
            if self._foreground is None:
                self._foreground = threading.Thread(target=self._serve, name="spherelab-compute", daemon=True)
                self._foreground.start()
        return False

    def _serve(self) -> None:
        while True:
            with self._lock:
                job, self._latest = self._latest, None
                if job is None:
                    self._foreground = None
                    return
            key, done, failed = job
            try:
                value = self.get(key)
            except Exception as err:  # noqa: BLE001 - handed to the loop's thread
                if failed is not None:
                    self._loop.call_soon_threadsafe(failed, err)
                continue
            self._loop.call_soon_threadsafe(done, value)

    def ahead(self, keys: Iterable[Hashable]) -> None:
        """Compute ``keys`` (in this order, the missing ones) on the background thread, replacing
        what it had still to do."""
        with self._lock:
            self._queue = collections.deque(k for k in keys if k not in self._values)
            if self._queue and self._thread is None:
                self._thread = threading.Thread(target=self._run, name="spherelab-precompute", daemon=True)
                self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background thread has nothing left (for scripts and tests); whether
        it finished within ``timeout`` seconds."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._thread = None  # under the lock: ahead() starts a new one from here on
                    return
                key = self._queue.popleft()
            try:
                self.get(key)
            except Exception:  # noqa: BLE001 - the caller meets it when it asks for this key
                pass


class Selectable:
    """Mixin of the explorers that compute on a worker thread: :meth:`select` sets controls and
    shows the result before returning (the explorer passes ``wait=self._wait`` on to
    :meth:`Precomputer.when_ready`)."""

    _wait = False

    def select(self, **values) -> None:
        """Set controls by their attribute names (e.g. ``select(L=4, K=2)``) and show the result
        before returning — for scripts and tests: in a kernel a move otherwise returns at once
        and shows its result when ready."""
        self._wait = True
        try:
            for name, value in values.items():
                getattr(self, name).value = value
        finally:
            self._wait = False
