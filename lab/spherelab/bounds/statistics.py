r"""The package's one loop over rows, and the statistics it gathers.

Every Gaussian bound of the package depends on the data only through

.. math:: G = AA^\top, \qquad c = Ay, \qquad y^\top y, \qquad \textstyle\sum_n d(x_n), \qquad N,

where the columns of :math:`A` ``(P, N)`` are the model's (whitened) feature vectors of the rows
and :math:`d` a per-row prior term (VISH: :math:`A = K_{uf}` with :math:`K_{uu}` diagonal and
:math:`d = r^2`; the decoupled model: :math:`A = L_J^{-1}K_{pf}` and :math:`d = k(x, x)`; HVGP:
the stacked :math:`L_{k,c}^{-1}k_c(Z_c, X)`). Every pass over rows — these statistics on any
device (:func:`~spherelab.bounds.harmonic_statistics`, :func:`streamed_statistics`, the rows
floor's :class:`~spherelab.rows.device.DeviceRows`) and their backward passes — is one loop,
:func:`pass_sums`, with a chunk function of its own: the chunks are dealt to the cores
(:func:`run_shares`) and their sums added by name, so memory is :math:`O(P \cdot \text{chunk} +
P^2)` whatever N.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from .._state import Fields, Saveable
from ..backend.ops import as_operations
from ..chunks import host_slices
from ..linalg import NumericalFailure
from ..threads import gram_policy, pass_worker, pass_workers, thread_limit

__all__ = ["Statistics", "check_trace_term", "check_variance_rounding", "streamed_statistics", "host_gram_pass",
           "row_chunks", "run_shares", "stopping", "gram_threads", "pass_sums", "add_named"]


@dataclass
class Statistics(Saveable):
    r"""Sufficient statistics of a Gaussian bound: ``G = A A^T`` ``(P, P)``, ``c = A y`` ``(P,)``,
    ``yy = y^T y``, ``sum_diag`` = :math:`\sum_n d(x_n)` (an additive kernel's per component,
    ``(C,)``), ``n`` rows; ``chunks`` holds the
    chunks' A when asked to keep them (for a backward pass without recomputing them).
    ``rounding`` is the scale :math:`\rho` of the products' rounding errors, relative to
    :math:`\sqrt{G_{ii}G_{jj}}` for :math:`G_{ij}` and :math:`\sqrt{G_{ii}\,y^\top y}` for :math:`c_i`
    (0: float64, negligible; float32 products: float32's eps, above the 0.02-0.03 eps measured),
    from which a bound estimates its own error (:func:`spherelab.bounds.vish.collapsed_bound`)."""

    G: np.ndarray
    c: np.ndarray
    yy: float
    sum_diag: float | np.ndarray  # (C,): an additive kernel's, one per component
    n: int
    chunks: list = field(default_factory=list, repr=False)
    rounding: float = 0.0
    #: the chunks' own sums stay with the pass that made them: a file holds the totals
    fields: ClassVar[Fields] = Fields(config=("G", "c", "yy", "sum_diag", "n", "rounding"), transient=("chunks",))

    def __add__(self, other: "Statistics") -> "Statistics":
        """The statistics of two disjoint sets of rows together (the blocks of a Dask array)."""
        return Statistics(self.G + other.G, self.c + other.c, self.yy + other.yy, self.sum_diag + other.sum_diag,
                          self.n + other.n, rounding=max(self.rounding, other.rounding))

    def without(self, part: "Statistics") -> "Statistics":
        """The statistics of these rows less a subset ``part`` of them (the rows held out from a
        fit's subsample): a difference of sums, accurate while ``part`` is at most about half."""
        if not isinstance(part, Statistics):
            raise TypeError(f"part must be Statistics, got {type(part).__name__}")
        if not 1 <= part.n < self.n:
            raise ValueError(f"part must be a strict, non-empty subset of the rows ({part.n} of {self.n} given)")
        if part.G.shape != self.G.shape:
            raise ValueError(f"part must have statistics of the same features: G of shape {self.G.shape}, "
                             f"got {part.G.shape}")
        # each sum of squares over a subset is at most the whole's, up to the sums' rounding (n terms)
        eps = self.n * np.finfo(np.float64).eps
        over = [name for name, whole, sub in (("diag(G)", np.diag(self.G), np.diag(part.G)), ("yy", self.yy, part.yy),
                                              ("sum_diag", self.sum_diag, part.sum_diag))
                if np.any(np.asarray(sub) > np.asarray(whole) + eps * (np.abs(whole) + np.abs(sub)) + self.rounding)]
        if over:
            raise ValueError(f"part is not a subset of these rows: its {', '.join(over)} exceed(s) the whole's "
                             "(sums of squares over a subset cannot)")
        return Statistics(self.G - part.G, self.c - part.c, max(self.yy - part.yy, 0.0),
                          self.sum_diag - part.sum_diag, self.n - part.n, rounding=max(self.rounding, part.rounding))

    @classmethod
    def _load_state(cls, state):
        G = state.array("G", shape=(None, None))
        P = G.shape[0]
        if G.shape != (P, P) or not np.allclose(G, G.T, rtol=1e-12, atol=1e-300):
            raise state.fail("G", "a symmetric square array")
        if isinstance(state.value("sum_diag"), np.ndarray):  # an additive kernel's, per component
            sum_diag = state.array("sum_diag", shape=(None,))
            if sum_diag.size == 0 or np.any(sum_diag < 0):
                raise state.fail("sum_diag", "a number >= 0, or a non-empty array of them")
        else:
            sum_diag = state.float("sum_diag", minimum=0.0)
        out = cls(G, state.array("c", shape=(P,)), state.float("yy", minimum=0.0),
                  sum_diag, state.int("n", minimum=1),
                  rounding=state.float("rounding", minimum=0.0))
        state.check_work(9.0 * P ** 3, f"the eigendecomposition of a {P:,} x {P:,} G")
        problem = out.impossible()
        if problem:
            raise state.fail("G", f"statistics of some data ({problem})")
        return out

    def impossible(self) -> str | None:
        r"""Why no data give these statistics, or None: :math:`G = AA^\top` is positive
        semi-definite, and :math:`c = Ay` lies in its range with :math:`c^\top G^+ c \le y^\top y`
        (Cauchy–Schwarz: :math:`(v^\top c)^2 \le v^\top G v\, y^\top y` for every v), to the
        products' rounding (relative :math:`10^{-9} + 2P\rho`)."""
        from .._validation import MAX_MAGNITUDE

        P = self.G.shape[0]
        if P and float(np.max(np.abs(self.G))) > MAX_MAGNITUDE:
            return f"G has entries up to {float(np.max(np.abs(self.G))):.3g}, beyond {MAX_MAGNITUDE:g}"
        tol = 1e-9 + 2.0 * P * self.rounding
        lam, V = np.linalg.eigh(self.G) if P else (np.zeros(0), np.zeros((0, 0)))
        top = max(float(lam.max()) if P else 0.0, 0.0)
        if P and float(lam.min()) < -tol * top - 1e-300:
            return f"G is not positive semi-definite: eigenvalue {float(lam.min()):.3g} against a largest {top:.3g}"
        floor = tol * top
        with np.errstate(over="ignore"):  # c of 1e300: its square is inf, and refused as such
            a2 = (V.T @ self.c) ** 2
            fit = (np.inf if np.any(a2 > 0) else 0.0) if top == 0.0 else float(np.sum(a2 / np.maximum(lam, floor)))
        if fit > self.yy * (1.0 + tol) + 1e-300:
            return (f"c^T G^+ c = {fit:.3g} exceeds y^T y = {self.yy:.3g}: c = A y must lie in the range of "
                    "G = A A^T with c^T G^+ c <= y^T y")
        return None


def row_chunks(n: int, size: int):
    """``(start, stop)`` pairs covering ``range(n)`` in pieces of at most ``size`` rows."""
    size = max(1, int(size))
    for start in range(0, n, size):
        yield start, min(start + size, n)


def run_shares(work: Callable[[int, int], object], chunks: int, ops) -> list:
    """``[work(k, shares) for k in range(shares)]`` with ``shares`` =
    :func:`~spherelab.threads.pass_workers` ``(chunks)``, each share on its own thread with one
    BLAS and one Numba thread (:func:`~spherelab.threads.pass_worker`); share k takes chunks
    ``k, k + shares, ...``, so the results do not depend on timing. The first failure is
    raised, and the other shares stop at their next :func:`stopping` check. Only the CPU's
    operations are split (a GPU's work is queued on its own streams): ``ops`` is the device's
    :class:`~spherelab.backend.Operations` (or its name), which ``work`` passes to what it calls."""
    shares = pass_workers(chunks) if as_operations(ops).device == "cpu" else 1
    if shares == 1:
        return [work(0, 1)]
    _stop.flag = threading.Event()
    flag = _stop.flag

    def run(k):
        _stop.flag = flag
        with pass_worker():
            return work(k, shares)

    with thread_limit(1), ThreadPoolExecutor(shares) as pool:
        futures = [pool.submit(run, k) for k in range(shares)]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            if any(f.exception() is not None for f in done):
                flag.set()  # before waiting for the others: they stop at their next chunk
            return [f.result() for f in futures]
        finally:
            flag.set()
            _stop.flag = None


_stop = threading.local()


def stopping() -> bool:
    """Inside a :func:`run_shares` share: whether another share failed (give up between chunks)."""
    flag = getattr(_stop, "flag", None)
    return flag is not None and flag.is_set()


def pass_sums(ops, pieces: list, rows: Callable, chunk: Callable, *, progress: str | None = None) -> dict:
    r"""The package's one chunk loop: every pass over rows (a bound's statistics, their backward
    pass, on any device) is this loop with its own ``chunk``.

    The ``pieces`` (``(start, stop)`` rows) are dealt to :func:`run_shares`' shares, share k taking
    chunks k, k + shares, ...; ``rows(share_pieces)`` yields those chunks' rows where the device
    keeps its arrays, in that order (slices of arrays held there, or a stream that copies chunk k + 1
    while chunk k computes: the ``stream_rows`` operation); ``chunk(i, rows_i, shares, acc)``
    returns the chunk's sums by name (arrays of the device, fresh ones, or numbers; float32 ones
    are accumulated in float64), or adds them to its share's sums ``acc`` itself (a product
    accumulated in place). Returns the totals by name, the shares' added in share order, so that
    they do not depend on timing; ``progress``: a bar's title (a bar over the chunks), or None."""
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pieces), desc=progress, unit="chunk")

    def work(k, shares):
        acc: dict = {}
        indices = range(k, len(pieces), shares)
        for i, rows_i in zip(indices, rows([pieces[i] for i in indices])):
            if stopping():
                break
            for name, value in chunk(i, rows_i, shares, acc).items():
                if name in acc:
                    acc[name] += value  # in place, into the share's own copy
                else:  # the share's own copy (float32 sums accumulate in float64)
                    acc[name] = value if not hasattr(value, "astype") else value.astype(
                        np.float64 if value.dtype == np.float32 else value.dtype)
            if bar is not None:
                bar.update(1)
        return acc

    try:
        totals: dict = {}
        for part in run_shares(work, len(pieces), ops):
            add_named(totals, part)
        return totals
    finally:
        if bar is not None:
            bar.close()


def add_named(into: dict[str, Any], more: dict[str, Any]) -> None:
    """Sums keyed by name: each of ``more`` added to ``into``'s of the same name (or set there)."""
    for name, value in more.items():
        into[name] = into[name] + value if name in into else value


def gram_threads(ops, shares: int, work: float):
    """The BLAS threads of one chunk's Gram product (``work`` flops) in a pass of ``shares`` shares
    (:func:`run_shares`): alone on the CPU, a large product may use BLAS's threads; in a share,
    BLAS is single-threaded; a device's product is its own."""
    if shares == 1 and as_operations(ops).device == "cpu":
        return gram_policy(work)
    return contextlib.nullcontext()


def host_gram_pass(X, y, pieces, columns, keep=False, ops="cpu", progress: str | None = None):
    r""":func:`pass_sums` of host columns: ``columns(X_chunk)`` -> :math:`A` ``(P, n)`` (or ``(A, d)``
    with a per-row term ``d``) for every chunk, accumulated by ``ops.gram_update``; each share
    computes its chunks' columns and products single-threaded, so both cores stay in BLAS's
    single-threaded kernels, which run this shape faster than OpenBLAS's own threads (measured,
    RESULTS.md). Returns ``(G, c, sum_d, kept)``."""
    ops = as_operations(ops)
    pieces = list(pieces)
    kept: dict = {}

    def chunk(i, rows_i, shares, acc):
        Xc, yc = rows_i
        A = columns(Xc)
        A, d = A if isinstance(A, tuple) else (A, None)
        P = A.shape[0]
        if "G" not in acc:
            acc["G"], acc["c"] = np.zeros((P, P)), np.zeros(P)
        with gram_threads(ops, shares, 2.0 * P * P * Xc.shape[0]):
            ops.gram_update(acc["G"], acc["c"], A, yc)
        if keep:
            kept[i] = A
        return {} if d is None else {"d": np.sum(d, axis=0)}

    t = pass_sums(ops, pieces, host_slices(X, y), chunk, progress=progress)
    total = t.get("d", 0.0)  # (C,) per component for an additive kernel
    return (t.get("G"), t.get("c"), (float(total) if np.ndim(total) == 0 else np.asarray(total)),
            [kept[i] for i in sorted(kept)])


def streamed_statistics(
    columns: Callable[[np.ndarray], np.ndarray],
    X: np.ndarray,
    y: np.ndarray,
    *,
    chunk_size: int,
    diag: Callable[[np.ndarray], np.ndarray] | None = None,
    keep: bool = False,
    progress: bool | None = None,
    desc: str = "statistics",
    ops="cpu",
) -> Statistics:
    """One pass over (X, y) in chunks of ``chunk_size`` rows, the columns computed on the host
    (:func:`host_gram_pass`).

    Parameters
    ----------
    columns
        ``columns(X_chunk)`` returns :math:`A` for the chunk, ``(P, n_chunk)`` (a transposed
        ``(n_chunk, P)`` array is fine: no copy is made), or ``(A, d)`` with the per-row prior
        term ``d`` ``(n_chunk,)`` when it comes out of the same computation.
    X, y
        ``(N, D)`` and ``(N,)``, already validated.
    diag
        ``diag(X_chunk)`` returns the per-row prior term ``(n_chunk,)`` (default: from
        ``columns``, else 0).
    keep
        Keep each chunk's A in ``Statistics.chunks``.
    progress
        Show a tqdm bar titled ``desc`` (default: when N > 10^6).
    ops
        The device's :class:`~spherelab.backend.Operations`, or its name (default: ``"cpu"``):
        its ``gram_update`` forms the products.
    """
    n = X.shape[0]
    pieces = list(row_chunks(n, chunk_size))
    show = n > 1_000_000 if progress is None else progress
    G, c, sum_diag, kept = host_gram_pass(X, y, pieces, columns, keep, ops, desc if show else None)
    if diag is not None:
        sum_diag += sum(float(np.sum(diag(X[a:b]))) for a, b in row_chunks(n, chunk_size))
    if G is None:
        raise ValueError("no rows: the statistics need at least one")
    G = 0.5 * (G + G.T)  # exactly symmetric
    return Statistics(G, c, float(y @ y), sum_diag, n, kept)


#: the relative rounding of a sum of products of squared norms, generously (64 ulps)
TRACE_ROUNDING = 64 * np.finfo(np.float64).eps


def check_trace_term(value: float, prior: float, explained: float, noise: float, n: int) -> None:
    r"""Raise :class:`~spherelab.linalg.NumericalFailure` where the rounding of the trace term
    :math:`\mathrm{tr}(K_{ff} - Q_{ff})/2\sigma^2` = (``prior`` - ``explained``)/2``noise``
    exceeds a thousandth of the bound ``value`` (or of ``n`` nats, the number of rows, where
    the bound is near zero): the two sums of :math:`r^2` it subtracts then outgrow what float64
    resolves (a lift that inflates the norms), and the bound would be rounding that an optimiser
    climbs without end. The optimisers step back from such a point."""
    slack = TRACE_ROUNDING * (abs(prior) + abs(explained)) / (2 * noise)
    if slack <= 1e-3 * max(abs(value), n):
        return
    _refuse_rounding(slack, value, n, f"trace term tr(K_ff - Q_ff) = {prior:.3g} - {explained:.3g} is not resolved "
                     f"in float64 at noise variance {noise:.3g}")


def check_variance_rounding(value: float, dvar: np.ndarray, terms, n: int) -> None:
    r""":func:`check_trace_term` for a bound on rows (a minibatch's, any likelihood): each row's
    predictive variance is a sum of ``terms`` (arrays over the rows: :math:`k(x_n, x_n)`,
    :math:`-Q_{nn}`, ...) whose rounding, at most 64 ulps of the terms' absolute sum, moves the
    bound by up to :math:`\sum_n |\partial\mathcal L/\partial\nu_n|` times that (``dvar``, the
    bound's derivatives by the variances, its data-term scaling included). Refused where that
    exceeds a thousandth of the bound ``value`` (or of ``n`` nats)."""
    size = sum(np.abs(t) for t in terms)
    slack = TRACE_ROUNDING * float(np.abs(dvar) @ size)
    if np.isnan(slack) or np.isnan(value) or slack <= 1e-3 * max(abs(value), n):  # (NaN: the likelihood's to report)
        return
    _refuse_rounding(slack, value, n, f"predictive variances (terms up to {float(np.max(size)):.3g} per row) are "
                     "not resolved in float64")


def _refuse_rounding(slack: float, value: float, n: int, what: str) -> None:
    if not slack <= 1e-3 * max(abs(value), n):  # (the callers return early where it is; NaN slack raises)
        raise NumericalFailure(
            f"the bound's {what} (rounding up to {slack:.3g} nats against a bound of {value:.3g}): the lift "
            "[x / input_scale, bias] has moved the inputs far from unit norm; standardise X, start from larger "
            "input scales, or (VISH) use prior='features'")
