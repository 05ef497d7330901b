r"""Host-to-device streaming for the CUDA devices: the array interfaces and the double-buffered
statistics pass.

The pass keeps :math:`G = \sum_k A_k A_k^\top` and :math:`c = \sum_k A_k y_k` on the device
while host chunks travel through pinned buffers on a second stream: chunk :math:`k+1` is
prepared on the host (``load``) and copied while chunk :math:`k` computes, and only the
:math:`P \times P` results come back. Device memory is two chunks' worth of inputs plus one
chunk's columns, whatever N.

Two implementations of one small interface carry it: :class:`CupyArrays` (CuPy: pinned host
memory, a non-blocking stream, events) and :class:`HostArrays`, a NumPy stand-in of the same
methods for numba-cuda's simulator, so CI runs the very control flow the GPU runs (ordering,
slot reuse, the short last chunk).
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

__all__ = ["CupyArrays", "HostArrays", "double_buffered_pass"]


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


def double_buffered_pass(arrays, X: np.ndarray, y: np.ndarray, pieces: Iterable[tuple[int, int]],
                         load: Callable, columns: Callable, keep: bool = False):
    r""":math:`G = \sum_k A_kA_k^\top`, :math:`c = \sum_k A_k y_k` and :math:`\sum d` with the
    columns computed on the device.

    Parameters
    ----------
    arrays
        :class:`CupyArrays` or :class:`HostArrays`.
    X, y
        Host arrays ``(N, D)``, ``(N,)``.
    pieces
        ``(start, stop)`` row ranges.
    load
        ``load(X_chunk)`` -> tuple of host arrays (cheap per-row preparation, e.g. the lift).
    columns
        ``columns(*device_arrays)`` -> ``(A (P, n), d (n,))`` on the device.

    Returns
    -------
    (G, c, sum_d, kept): host ``(P, P)``, ``(P,)``, float, and the chunks' A on the host when
    ``keep``.
    """
    pieces = list(pieces)
    copy, compute = arrays.stream(), arrays.compute_stream()
    slots: list[list | None] = [None, None]  # per slot: (pinned buffers, device buffers)
    copied: list = [None, None]  # event: the slot's upload finished
    used: list = [None, None]  # event: the compute reading the slot finished

    def stage(k: int):
        start, stop = pieces[k]
        n, s = stop - start, k % 2
        host = [np.ascontiguousarray(a, dtype=np.float64) for a in (*load(X[start:stop]), y[start:stop])]
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
        return views

    G = c = None
    sum_d = 0.0
    kept = []
    staged = stage(0) if pieces else None
    for k in range(len(pieces)):
        s = k % 2
        compute.wait_event(copied[s])
        *inputs, yd = staged
        A, d = columns(*inputs)
        if G is None:
            xp = arrays.xp
            G, c, sum_d = xp.zeros((A.shape[0], A.shape[0])), xp.zeros(A.shape[0]), xp.zeros(d.shape[1:])
        G += A @ A.T
        c += A @ yd
        sum_d += d.sum(axis=0)
        if keep:
            kept.append(arrays.to_host(A))
        used[s] = compute.record()
        if k + 1 < len(pieces):
            staged = stage(k + 1)  # host work and the copy overlap the kernels just queued
    if G is None:
        return None, None, 0.0, kept
    sum_d = arrays.to_host(sum_d)  # per component for an additive kernel
    return arrays.to_host(G), arrays.to_host(c), (float(sum_d) if sum_d.ndim == 0 else sum_d), kept
