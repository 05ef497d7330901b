r"""Rows held on a device, and the chunks every Gaussian statistic a bound takes of them.

Every Gaussian bound of the package depends on its rows through

.. math:: G = AA^\top, \qquad c = Ay, \qquad \textstyle\sum_n r_n^2,

with :math:`A = L^{-1}K_{pf}` ``(P, n)``: the columns :math:`K_{fp}` of a *column source* at the
rows' lift (:math:`\tilde x = [x/s, b]`, :math:`r = \|\tilde x\|`, :math:`\hat x = \tilde x/r`),
whitened by a factor :math:`L` (the joint inducing block's for the decoupled models and HVGP;
none for VISH, whose :math:`K_{uu}` is diagonal and folded into its bound). Backwards, a bound
gives :math:`\partial\mathcal L/\partial K_{pf} = QA + q\,y^\top` (``Q`` = :math:`2L^{-\top}\partial_G`,
``q`` = :math:`L^{-\top}\partial_c`) and :math:`\partial\mathcal L/\partial\sum_n r_n^2`; the loop
chains them through the source's backward pass and the lift into the lift's :math:`D + 1` sums
(:func:`~spherelab.sphere.lift.lift_backward_sums`) and the source's own sums, keyed by name.

The chunks' work is written once, on the device's array namespace (``ops.array_namespace()``:
NumPy, or CuPy), for :class:`DeviceRows`: rows copied to a device once per fit (on the CPU the
host's own arrays), so that nothing of size N crosses between evaluations; the package's one loop
(:func:`~spherelab.bounds.statistics.pass_sums`) deals them to the cores. A column source has

* ``width``: P, its columns;
* ``columns(ops, r, Xh)`` -> ``(state, K)``: its block ``K`` ``(n, P)`` of the chunk's lifted rows
  and what its backward pass reuses;
* ``backward(ops, state, dK, r, Xh)`` -> ``(dXt, sums)``: :math:`\partial\mathcal L/\partial\tilde x`
  ``(n, D + 1)`` of the chunk from ``dK`` ``(n, P)`` and a dict of the sums its own parameters need,
  each keyed by its name (arrays or 0-d arrays of the device; chunks' sums add up).

:class:`Stacked` puts several sources side by side (:mod:`spherelab.features.device_columns`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..bounds.statistics import add_named, gram_threads, pass_sums, row_chunks
from ..chunks import host_slices
from ..sphere.lift import lift_backward_sums, lift_rows_kept

__all__ = ["DeviceRows", "RowsPass", "Stacked", "copy_back", "copy_back_named", "add_named"]

#: rows beyond which a pass shows a progress bar over its chunks
PROGRESS_ROWS = 1_000_000


@dataclass
class RowsPass:
    """One forward pass of :meth:`DeviceRows.gram`: its device results ``G`` ``(P, P)``, ``c``
    ``(P,)``, ``r2`` (:math:`\\sum_n r_n^2`) and ``bad`` (the rows the lift rejected), and what its
    backward pass (:meth:`DeviceRows.sums`) needs: the source, the factor, the lift's parameters
    and the chunks' columns where they were kept."""

    G: Any
    c: Any
    r2: Any
    bad: Any
    source: Any
    L: Any
    lift: tuple
    kept: list | None = field(default=None, repr=False)
    #: the chunks' ``(start, stop)`` rows, the same for the backward pass
    pieces: list = field(default_factory=list, repr=False)


class DeviceRows:
    """Training rows ``(X, y)`` copied once to a device (``ops``), with the statistics pass and its
    backward pass (the module's docstring).

    Parameters
    ----------
    ops
        The device's :class:`~spherelab.backend.Operations`.
    X, y
        The host rows ``(N, D)``, ``(N,)`` (validated); copied here unless ``on_device`` gives them
        there already (:meth:`batch`).
    width
        The widest chunk temporary's columns (P); a chunk holds about ``chunk_entries`` entries.
    keep_entries
        The most entries (rows x ``kept_width``) of a pass's columns kept for its backward pass.
    kept_width
        The columns a kept chunk holds (default ``width``).
    chunk_rows
        ``chunk_rows(N)``: rows per chunk, decided at each forward pass (the CPU's: its cache and
        its cores' load, :meth:`~spherelab.rows.decoupled.StatisticsPath.chunk_rows`); default
        :attr:`chunk_entries` entries of the widest temporary.
    """

    #: rows per device chunk: about 2^25 entries of each (rows, P) temporary (256 MB)
    chunk_entries = 1 << 25

    def __init__(self, ops, X: np.ndarray, y: np.ndarray, width: int, keep_entries: int,
                 on_device: tuple | None = None, kept_width: int | None = None,
                 chunk_rows: Callable[[int], int] | None = None) -> None:
        self.ops, self.xp = ops, ops.array_namespace()
        self.X, self.y = X, y  # the host arrays these rows copy: a later call with the same ones reuses them
        self.Xd, self.yd = (ops.to_device(X), ops.to_device(y)) if on_device is None else on_device
        self.slices = host_slices(self.Xd, self.yd)  # the rows of the loop's chunks, where they are held
        self.yy = float(y @ y)
        self.width, self.keep_entries, self.kept_width = width, keep_entries, kept_width or width
        self.rows = max(1, min(X.shape[0], self.chunk_entries // max(width, 1)))
        self.keep = X.shape[0] * self.kept_width <= keep_entries
        self.chunk_rows = chunk_rows

    def batch(self, idx: np.ndarray) -> "DeviceRows":
        """The rows ``idx`` of these, gathered on the device: only the B indices cross."""
        idxd = self.ops.to_device(idx)
        return DeviceRows(self.ops, self.X[idx], self.y[idx], self.width, self.keep_entries,
                          (self.Xd[idxd], self.yd[idxd]), self.kept_width, self.chunk_rows)

    def matches(self, X: Any, y: Any) -> bool:
        return X is self.X and y is self.y

    def _pieces(self) -> list:
        n = self.X.shape[0]
        return list(row_chunks(n, self.rows if self.chunk_rows is None else self.chunk_rows(n)))

    def _chunk(self, p: RowsPass, Xc):
        r, Xh, bad = lift_rows_kept(self.xp, Xc, *p.lift)  # rejected rows are counted, not summed
        state, K = p.source.columns(self.ops, r, Xh)
        A = K.T if p.L is None else self.ops.device_solve(p.L, K.T)
        return r, Xh, state, A, bad

    def _progress(self) -> str | None:
        return "statistics" if self.X.shape[0] > PROGRESS_ROWS else None

    def gram(self, kernel, source, L=None) -> RowsPass:
        r""":math:`G`, :math:`c`, :math:`\sum_n r_n^2` and the rejected rows' count (device arrays, in
        the pass returned) of the columns of ``source`` at ``kernel``'s lift, whitened by the device
        array ``L`` (lower triangular, ``(P, P)``) when given; the chunks' columns are kept for
        :meth:`sums` when they fit."""
        xp = self.xp
        lift = (xp.asarray(np.asarray(kernel.input_scale, dtype=np.float64)), kernel.bias)
        p = RowsPass(None, None, None, None, source, L, lift, None, self._pieces())
        kept: dict = {}

        def chunk(i, rows, shares, acc):  # one chunk of share k's: chunks k, k + shares, ...
            Xc, yc = rows
            r, Xh, state, A, rejected = self._chunk(p, Xc)
            if self.keep:
                kept[i] = (r, Xh, state, A)
            with gram_threads(self.ops, shares, 2.0 * A.shape[0] ** 2 * A.shape[1]):
                return {"G": A @ A.T, "c": A @ yc, "r2": r @ r, "bad": rejected}

        t = pass_sums(self.ops, p.pieces, self.slices, chunk, progress=self._progress())
        p.G, p.c, p.r2, p.bad = t["G"], t["c"], t["r2"], t["bad"]
        p.kept = [kept[i] for i in range(len(p.pieces))] if self.keep else None
        return p

    def sums(self, p: RowsPass, Q, q, dr2) -> tuple[Any, dict[str, Any]]:
        r"""The backward pass of ``p`` from :math:`\partial\mathcal L/\partial K_{pf} = QA + q\,y^\top`
        (device arrays ``Q`` ``(P, P)``, ``q`` ``(P,)``) and :math:`\partial\mathcal L/\partial\sum_n
        r_n^2` ``dr2``: the lift's :math:`D + 1` sums and the source's named sums, device arrays
        (the chunks of ``p`` reused where kept, else computed again, in the same chunks)."""
        def chunk(i, rows, shares, acc):
            Xc, yc = rows
            r, Xh, state, A = p.kept[i] if p.kept else self._chunk(p, Xc)[:4]
            dK = A.T @ Q.T  # (QA + q y^T)^T, row-major as it comes out of the product
            dK += yc[:, None] * q[None, :]
            dXt, own = p.source.backward(self.ops, state, dK, r, Xh)
            dXt = dXt + (2.0 * dr2) * (Xh * r[:, None])  # sum r^2: its gradient is 2 x_tilde
            return {**own, " lift": lift_backward_sums(Xc, dXt, self.xp)}  # (no parameter's name)

        named = pass_sums(self.ops, p.pieces, self.slices, chunk)
        return named.pop(" lift"), named

    def rejected(self, kernel) -> None:
        """Raise the lift's own error for these rows (some lifted outside the usable range)."""
        kernel.check_lift(self.X)  # names the row
        raise ValueError("rows of X lift outside the usable range (check_lift found none: report this)")


class Stacked:
    """Column sources side by side: ``K = [K_1, K_2, ...]``. Sums of the same name add up (a
    kernel's hyper-parameters, shared by its blocks); a name may be made a block's own with
    ``own``: ``"sources"`` of block k comes back as ``"sources.k"``."""

    def __init__(self, blocks: list, own: tuple[str, ...] = ("sources",)) -> None:
        self.blocks, self.own = list(blocks), own
        self.width = sum(block.width for block in self.blocks)
        self._spans = np.cumsum([0] + [block.width for block in self.blocks])

    def columns(self, ops, r, Xh):
        states, Ks = zip(*(block.columns(ops, r, Xh) for block in self.blocks))
        return states, Ks[0] if len(Ks) == 1 else ops.array_namespace().concatenate(Ks, axis=1)

    def backward(self, ops, states, dK, r, Xh):
        xp, dXt, out = ops.array_namespace(), None, {}
        for k, (block, state) in enumerate(zip(self.blocks, states)):
            part = xp.ascontiguousarray(dK[:, self._spans[k]:self._spans[k + 1]])
            dX, own = block.backward(ops, state, part, r, Xh)
            dXt = dX if dXt is None else dXt + dX
            add_named(out, {f"{name}.{k}" if name in self.own else name: value for name, value in own.items()})
        return dXt, out


def copy_back(ops, arrays: list) -> list:
    """The device ``arrays`` (any shapes, 0-d included) on the host in one copy: concatenated on the
    device, copied, and split again; each comes back a float64 array of its own shape."""
    xp = ops.array_namespace()
    flat = ops.to_host(xp.concatenate([xp.ravel(xp.asarray(a, dtype=xp.float64)) for a in arrays]))
    out, i = [], 0
    for a in arrays:
        n = int(np.prod(np.shape(a)))
        out.append(flat[i:i + n].reshape(np.shape(a)))
        i += n
    return out


def copy_back_named(ops, arrays: list, named: dict[str, Any]) -> tuple[list, dict[str, np.ndarray]]:
    """:func:`copy_back` of ``arrays`` and the values of ``named`` together (one copy); the named
    ones come back under their names."""
    keys = sorted(named)
    host = copy_back(ops, [*arrays, *(named[k] for k in keys)])
    return host[:len(arrays)], dict(zip(keys, host[len(arrays):]))
