r"""Device parity: every CUDA kernel of the operation table, the streamed statistics pass and every
model's bound, gradient and prediction on a CUDA device against the CPU path.

One list of cases serves the tests (``tests/test_cuda_sim.py`` runs each on ``"sim"``, numba-cuda's
simulator, and on ``"gpu"`` where a card is present) and the device check
(``benchmarks/gpu_check.py``), so what CI proves in the simulator is exactly what a lent card is
asked. A case is a function ``case(device, rng) -> list of host arrays``; :func:`compare` runs it
on ``"cpu"`` and on ``device`` from the same seed and measures

.. math:: e = \max_k \frac{\max_i |a_{k,i} - b_{k,i}|}{\max(1, \max_i |b_{k,i}|)},

the largest difference of any output array ``a_k`` from the CPU's ``b_k``, relative to that
array's scale (an output near zero is compared absolutely). The float64 target is
:math:`e \le 10^{-10}`: the kernels compile the CPU's own device functions, so only the order of
floating-point sums (cuBLAS against OpenBLAS) may differ.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["KERNEL_CASES", "MODEL_CASES", "CASES", "ParityResult", "compare", "run_cases", "TOLERANCE"]

#: the float64 parity target of every case (relative to each output's scale)
TOLERANCE = 1e-10

Case = Callable[[str, np.random.Generator], list]


def _ops(device: str):
    from ..backend import resolve

    return resolve(device)


# ---- kernels -------------------------------------------------------------------------------
def _gegenbauer(alpha: float) -> Case:
    def case(device, rng):
        ops = _ops(device)
        t = np.concatenate([[-1.0, 1.0, 0.0], rng.uniform(-1, 1, 20)])
        c = rng.standard_normal(9)
        values, derivs = ops.clenshaw(c, alpha, t, True)
        return [ops.gegenbauer_table(12, alpha, t), ops.gegenbauer_derivative_table(12, alpha, t),
                ops.clenshaw(c, alpha, t, False), values, derivs, ops.clenshaw(c[:1], alpha, t)]

    return case


def _matern(code: int, same: bool) -> Case:
    def case(device, rng):
        ops = _ops(device)
        n2 = 5 if same else 7
        T = rng.uniform(-1, 1, (5, n2))
        if same:
            T = 0.5 * (T + T.T)
        r1, r2 = rng.uniform(0.5, 2, 5), rng.uniform(0.5, 2, n2)
        G = rng.standard_normal(T.shape)
        A, B, dvar, dlen = ops.matern_backward(T, G, r1, r2, code, 0.7, 1.3, same)
        return [ops.matern_values(T, r1, r2, code, 0.7, 1.3, same), A, B, np.array([dvar, dlen])]

    return case


def _series(alpha: float) -> Case:
    def case(device, rng):
        ops, xp = _ops(device), _ops(device).array_namespace()
        T = rng.uniform(-1, 1, (6, 5))
        T[0, :3] = [1.0, -1.0, 1.0 + 1e-15]  # the ends (and just past one: clipped)
        r1, r2, c = rng.uniform(0.5, 2, 6), rng.uniform(0.5, 2, 5), rng.standard_normal(7)
        G = rng.standard_normal(T.shape)
        Td = ops.to_device(T)
        F = ops.series_columns(Td, ops.to_device(r1), ops.to_device(r2), c, alpha)
        A, B = ops.series_columns_backward(Td, ops.to_device(G), c, alpha)
        col = xp.ascontiguousarray(Td[:, :1])
        one = ops.series_columns(col, ops.to_device(r1), ops.to_device(r2[:1]), c[:1], alpha)
        return [ops.to_host(a) for a in (F, A, B, one)]

    return case


def _harmonics(dim: int, degree: int, n: int) -> Case:
    """Values (host and device entry points), the pass's scaled columns and the solid harmonics'
    VJP away from the unit norm; ``n`` not a multiple of 16 leaves a partial block."""

    def case(device, rng):
        from ..sphere.harmonics import SphericalHarmonics
        from ..sphere.quadrature import sample_sphere

        ops = _ops(device)
        plan = SphericalHarmonics(dim, degree).plan
        M = plan.degrees.shape[0]
        X = sample_sphere(n, dim, rng=rng)
        scale = rng.uniform(0.5, 2.0, n)
        W = rng.standard_normal((n, M))
        Xd = ops.to_device(X)
        return [ops.harmonics(X, plan, np.empty((n, M))), ops.to_host(ops.device_harmonics(Xd, plan)),
                ops.to_host(ops.harmonic_columns(Xd, plan, ops.to_device(scale))),
                ops.harmonics_vjp(X * scale[:, None], W, plan)]

    return case


def _dense(device, rng):
    """cuSOLVER's Cholesky and triangular solves, cuBLAS's Gram update."""
    ops = _ops(device)
    A = rng.standard_normal((30, 30))
    S = A @ A.T + 30 * np.eye(30)
    B = rng.standard_normal((30, 4))
    L = ops.cholesky(S, "S", "")
    G, c = np.eye(30), np.zeros(30)
    F, y = rng.standard_normal((30, 50)), rng.standard_normal(50)
    ops.gram_update(G, c, F, y)
    return [L, ops.solve_triangular(L, B, 0), ops.solve_triangular(L, B, 1), G, c]


def _stream_rows(device, rng):
    """Host rows streamed to the device (double-buffered on a GPU): 5 chunks, the last one short,
    each chunk's work done before the next is asked for."""
    from ..bounds.statistics import row_chunks

    ops = _ops(device)
    X, y, W = rng.standard_normal((23, 3)), rng.standard_normal(23), rng.standard_normal((4, 3))
    Wd, out = ops.to_device(W), []
    for Xc, yc in ops.stream_rows(X, y, row_chunks(23, 5)):
        A = Wd @ Xc.T
        out.append(ops.to_host(ops.array_namespace().concatenate([(A @ A.T).ravel(), A @ yc])))
    return [np.vstack(out)]


# ---- the statistics pass and the models --------------------------------------------------------
def _statistics(kind: str) -> Case:
    """VISH's sufficient statistics with the chunks on the device (chunks of 16 rows, the last one
    short): all levels, the even levels of a parity kernel, phase-truncated features."""

    def case(device, rng):
        from .. import kernels as K
        from ..bounds.vish import harmonic_statistics
        from ..features import HarmonicFeatures, PhaseTruncatedHarmonics

        kernel, feats = {
            "all levels": lambda: (K.Matern(1.5, 1.0, bias=0.7), HarmonicFeatures(4)),
            "even levels": lambda: (K.Parity(K.Matern(2.5, 1.0), even=True), HarmonicFeatures(4)),
            "phases": lambda: (K.Matern(1.5, 1.0), PhaseTruncatedHarmonics(3, 3, 2, seed=0)),
        }[kind]()
        feats.initialise(3, None)
        feats.bind(kernel)
        X = rng.standard_normal((50, 2))
        y = np.sin(X[:, 0]) + np.cos(X[:, 1])
        s = harmonic_statistics(kernel, feats, X, y, chunk_size=16, ops=_ops(device))
        return [s.G, s.c, np.array([s.yy, s.sum_diag, s.n])]

    return case


def _builders() -> dict[str, Callable]:
    from .. import activations as A
    from .. import groups, likelihoods
    from .. import kernels as K
    from ..features import ActivatedFeatures, HarmonicFeatures, InducingPoints, PhaseTruncatedHarmonics
    from ..models import VISH, ActivatedSVGP, HarmonicSVGP, OrthogonalSVGP

    gauss = likelihoods.Gaussian
    return {
        "points+orthogonal": lambda X, dev: OrthogonalSVGP(K.Matern(2.5, 0.9, bias=0.8), InducingPoints(X[:4] + 0.1),
                                                           2, gauss(0.1), device=dev),
        "activated": lambda X, dev: ActivatedSVGP(K.Matern(1.5, 1.0), ActivatedFeatures(A.Softplus(2.0), 4, 4),
                                                  gauss(0.1), device=dev),
        "hvgp": lambda X, dev: HarmonicSVGP(K.Matern(2.5, 0.9), groups.Reflection(2), 2, gauss(0.1), device=dev),
        "vish": lambda X, dev: VISH(K.Matern(1.5, 1.0), 3, gauss(0.1), device=dev),
        "vish-phases": lambda X, dev: VISH(K.Matern(1.5, 1.0), None, gauss(0.1), device=dev,
                                           features=PhaseTruncatedHarmonics(3, 3, 2, seed=0)),
        "harmonics+orthogonal": lambda X, dev: OrthogonalSVGP(K.Matern(1.5, 0.8), HarmonicFeatures(3), 2,
                                                              gauss(0.1), device=dev),
    }


def _model(name: str) -> Case:
    """The model's bound, its parameters after initialisation, the gradient of its objective and its
    predictive mean and variance."""

    def case(device, rng):
        X = rng.standard_normal((12, 2))
        y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(12)
        Xs = rng.standard_normal((4, 2))
        model = _builders()[name](X, device).fit(X, y, optimize=False)
        if model.device != device:
            raise AssertionError(f"the model runs on {model.device!r}, not {device!r}")
        theta = model.parameter_vector()
        value, grad = model.objective(theta, X, y)
        return [np.array([model.elbo(), value]), theta, grad, *model.predict_f(Xs)]

    return case


def _vish_lift_stage(device, rng):
    """Two iterations of VISH's lift stage (its subsample resident on a device) and two of its
    spectrum stage: the fitted parameters and the bound."""
    from .. import kernels as K
    from ..models import VISH

    X = rng.standard_normal((40, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(40)
    model = VISH(K.Matern(1.5, 1.0, input_scale=np.array([1.0, 1.2])), 3, device=device)
    model.fit(X, y, lift_maxiter=2, maxiter=2)
    return [model.parameter_vector(), np.array([model.elbo()])]


def _decoupled_steps(device, rng):
    """Four minibatch steps of OrthogonalSVGP with inducing points and orthogonal inputs (on a device
    the step is resident there: the bound, its backward pass and q's Adam): the fitted parameters and
    each step's ELBO estimate."""
    X = rng.standard_normal((30, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(30)
    model = _builders()["points+orthogonal"](X, device)
    model.fit_svi(X, y, batch_size=10, iterations=4, lr=0.02, seed=0)
    return [model.parameter_vector(), np.array(model.trace)]


KERNEL_CASES: dict[str, Case] = {
    **{f"gegenbauer + clenshaw, alpha = {a}": _gegenbauer(a) for a in (0.0, 0.5, 3.5)},
    **{f"matern code {c}{', same' if s else ''}": _matern(c, s) for c in (0, 1, 2) for s in (False, True)},
    **{f"series columns, alpha = {a}": _series(a) for a in (0.0, 3.5)},
    **{f"harmonics d = {d}, L = {L}, {n} points": _harmonics(d, L, n)
       for d, L, n in ((2, 6, 11), (3, 4, 11), (5, 3, 11), (9, 3, 37), (9, 4, 16))},
    "cholesky, solve_triangular, gram_update": _dense,
    "stream_rows (double-buffered, 5 chunks)": _stream_rows,
}

MODEL_CASES: dict[str, Case] = {
    **{f"statistics pass, {k}": _statistics(k) for k in ("all levels", "even levels", "phases")},
    **{f"model {name}": _model(name) for name in
       ("points+orthogonal", "activated", "hvgp", "vish", "vish-phases", "harmonics+orthogonal")},
    "model vish, lift stage fitted": _vish_lift_stage,
    "model points+orthogonal, minibatch steps": _decoupled_steps,
}

#: every case, kernels first
CASES: dict[str, Case] = {**KERNEL_CASES, **MODEL_CASES}


@dataclass
class ParityResult:
    """One case on one device: ``error`` as in the module docstring, ``seconds`` the device run's
    wall time (the first run of a kernel includes its compilation)."""

    case: str
    device: str
    error: float
    ok: bool
    seconds: float
    note: str = ""


def _error(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} on the device, {b.shape} on the CPU")
    if a.size == 0:
        return 0.0
    if not np.all(np.isfinite(a)):
        return float("inf")
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def compare(name: str, device: str, seed: int = 0, tol: float = TOLERANCE) -> ParityResult:
    """Run case ``name`` on the CPU and on ``device`` (``"sim"`` or ``"gpu"``) from ``seed``."""
    case = CASES[name]
    reference = case("cpu", np.random.default_rng(seed))
    impl = getattr(_ops(device).matern_values, "__self__", None)  # the CUDA operations behind the table
    small = getattr(impl, "host_entries", None)
    t0 = time.perf_counter()
    try:
        if small is not None:
            impl.host_entries = 0  # every problem on the device's kernels, however small
        outputs = case(device, np.random.default_rng(seed))
    finally:
        if small is not None:
            impl.host_entries = small
    seconds = time.perf_counter() - t0
    if len(outputs) != len(reference):
        raise ValueError(f"{name}: {len(outputs)} outputs on {device}, {len(reference)} on the CPU")
    error = max(_error(a, b) for a, b in zip(outputs, reference))
    return ParityResult(name, device, error, bool(error <= tol), seconds)


def run_cases(device: str, names=None, seed: int = 0, tol: float = TOLERANCE) -> list[ParityResult]:
    """:func:`compare` for every case (or ``names``); a case that raises is a failed result whose
    note says why, so one broken kernel does not hide the others."""
    results = []
    for name in names if names is not None else CASES:
        try:
            results.append(compare(name, device, seed, tol))
        except Exception as exc:  # reported, not raised: the check goes on to the next case
            results.append(ParityResult(name, device, float("nan"), False, 0.0, f"{type(exc).__name__}: {exc}"))
    return results
