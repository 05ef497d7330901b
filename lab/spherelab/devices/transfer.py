r"""Host-to-device streaming for the CUDA devices: the array interfaces and the double-buffered
rows of a pass over host rows.

:func:`staged_rows` hands the rows floor's loop (:func:`~spherelab.bounds.statistics.pass_sums`)
one chunk of rows at a time on the device while the next travels through pinned buffers on a second
stream: chunk :math:`k+1` is copied while chunk :math:`k` computes, and only the loop's sums stay
on the device. Device memory is two chunks' worth of rows, whatever N.

Two implementations of one small interface carry it: :class:`CupyArrays` (CuPy: pinned host
memory, a non-blocking stream, events) and :class:`HostArrays`, a NumPy stand-in of the same
methods for numba-cuda's simulator, so CI runs the very control flow the GPU runs (ordering,
slot reuse, the short last chunk).
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

__all__ = ["CupyArrays", "HostArrays", "staged_rows"]


class _DoneEvent:
    """An event that has already happened (host arrays need no waiting)."""

    def synchronize(self) -> None:
        return None


class _HostStream:
    def record(self) -> _DoneEvent:
        return _DoneEvent()

    def wait_event(self, event) -> None:
        return None


class HostArrays:
    """NumPy standing in for :class:`CupyArrays` (the ``"sim"`` device): copies are plain
    assignments, streams and events complete at once."""

    xp = np

    def empty(self, shape):
        return np.empty(shape)

    def pinned(self, shape):
        return np.empty(shape)

    def stream(self) -> _HostStream:
        return _HostStream()

    def compute_stream(self) -> _HostStream:
        return _HostStream()

    def upload(self, dst, src, stream) -> None:
        dst[...] = src

    def to_device(self, a):
        return np.array(a)  # a writable copy, as a device array would be (the simulator writes back)

    def to_host(self, a) -> np.ndarray:
        return np.asarray(a)


class CupyArrays:
    """CuPy's side of the interface: device arrays from CuPy's pool, page-locked host buffers,
    a non-blocking copy stream whose events the compute stream waits on."""

    def __init__(self) -> None:
        import cupy
        import cupyx

        self.xp, self._cupyx = cupy, cupyx

    def empty(self, shape):
        return self.xp.empty(shape, dtype=self.xp.float64)

    def pinned(self, shape):
        return self._cupyx.empty_pinned(shape, dtype=np.float64)

    def stream(self):
        return self.xp.cuda.Stream(non_blocking=True)

    def compute_stream(self):
        return self.xp.cuda.get_current_stream()

    def upload(self, dst, src, stream) -> None:
        dst.set(src, stream=stream)  # asynchronous: src is page-locked

    def to_device(self, a):
        return self.xp.asarray(a)

    def to_host(self, a) -> np.ndarray:
        return self.xp.asnumpy(a)


def staged_rows(arrays, X: np.ndarray, y: np.ndarray, pieces: Iterable[tuple[int, int]]) -> Iterator[tuple]:
    r"""The rows ``(X[a:b], y[a:b])`` of each piece as device arrays, in order, double-buffered.

    Parameters
    ----------
    arrays
        :class:`CupyArrays` or :class:`HostArrays`.
    X, y
        Host arrays ``(N, D)``, ``(N,)``.
    pieces
        ``(start, stop)`` row ranges.

    Yields
    ------
    (X chunk, y chunk), views of one of two device slots: valid until the piece after next is
    asked for. The consumer queues its work on the chunk (on the compute stream) before asking
    for the next piece; the next piece's copy is queued then, to overlap that work, and a slot is
    refilled only after its pinned buffers are free and the compute that read it has finished.
    """
    pieces = list(pieces)
    copy, compute = arrays.stream(), arrays.compute_stream()
    slots: list[list | None] = [None, None]  # per slot: (pinned buffers, device buffers)
    copied: list = [None, None]  # event: the slot's upload finished
    used: list = [None, None]  # event: the compute reading the slot finished

    def stage(k: int):
        start, stop = pieces[k]
        n, s = stop - start, k % 2
        host = [np.ascontiguousarray(a, dtype=np.float64) for a in (X[start:stop], y[start:stop])]
        if copied[s] is not None:
            copied[s].synchronize()  # the pinned buffers are free again
        if used[s] is not None:
            copy.wait_event(used[s])  # the device buffers are free again
        if slots[s] is None or any(b.shape[1:] != a.shape[1:] or b.shape[0] < n for b, a in zip(slots[s][0], host)):
            slots[s] = ([arrays.pinned(a.shape) for a in host], [arrays.empty(a.shape) for a in host])
            # New device buffers come from the compute stream's pool, possibly memory that kernels
            # still queued there (the previous chunk's scratch) are using: the copy stream must not
            # write them before the compute stream reaches this point.
            copy.wait_event(compute.record())
        pinned, device = slots[s]
        views = []
        for p, dev, a in zip(pinned, device, host):
            p[:n] = a
            arrays.upload(dev[:n], p[:n], copy)
            views.append(dev[:n])
        copied[s] = copy.record()
        return tuple(views)

    staged = stage(0) if pieces else None
    for k in range(len(pieces)):
        s = k % 2
        compute.wait_event(copied[s])
        yield staged
        used[s] = compute.record()  # the consumer's work on chunk k is queued by now
        if k + 1 < len(pieces):
            staged = stage(k + 1)  # host work and the copy overlap the kernels just queued
