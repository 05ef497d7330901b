r"""The harmonic variational Gaussian process (HVGP, seed 002 §4.2).

A kernel invariant under a cyclic group splits into mutually orthogonal components,
:math:`k = \sum_c k_c` (:func:`~spherelab.groups.harmonic_decomposition`), so
:math:`f = \sum_c f_c` with independent :math:`f_c \sim GP(0, k_c)`. Block c carries its own m
inducing inputs :math:`Z_c` and :math:`u_c = f_c(Z_c)`; the prior over :math:`u = (u_1..u_C)` is
block-diagonal, :math:`K_{uu} = \mathrm{blockdiag}(k_c(Z_c, Z_c))`, and so is the posterior
:math:`q(u) = \prod_c N(u_c; L_{k,c}\mu_c, L_{k,c}L_cL_c^\top L_{k,c}^\top)` (whitened:
:math:`L_{k,c} = \mathrm{chol}\,k_c(Z_c, Z_c)`). The predictive at x sums the blocks,

.. math:: \mu(x) = \sum_c a_c(x)^\top\mu_c, \qquad
          \nu(x) = k(x, x) - \sum_c \|a_c(x)\|^2 + \sum_c \|L_c^\top a_c(x)\|^2,
          \qquad a_c(x) = L_{k,c}^{-1}k_c(Z_c, x),

and the ELBO is :math:`\tfrac{N}{|B|}\sum_{n \in B}E_q\log p(y_n\mid f_n) - \sum_c
\mathrm{KL}[N(\mu_c, L_cL_c^\top)\,\|\,N(0, I)]`. A :math:`C \times m` model costs
:math:`O(Cm^3)` for the Cholesky factors instead of :math:`O(C^3m^3)` for an SVGP with
:math:`Cm` points, plus :math:`|G|` kernel evaluations per block for the orbit sums.

Gradients follow GPy's contract: :func:`block_bound_whitened` returns the derivatives with
respect to each block's :math:`K_{uu}`, :math:`K_{uf}` and :math:`k_{ff}`; the components
(:meth:`~spherelab.groups.HarmonicComponent.gradients_with_inputs`) chain them to the inducing
inputs and the base kernel's hyper-parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy.linalg import solve_triangular

from ._validation import check_data, check_finite_array, check_int
from ._blas import resolve_threads
from ._fitting import FitMixin, FlatReader
from .bounds import cholesky_or_explain
from .decoupled import (
    _inverse_factor,
    gaussian_noise_gradient,
    kl_whitened,
    whitened_forward,
    whitened_kernel_backward,
    whitened_q_backward,
)
from .groups import Antipodal, Group, harmonic_decomposition
from .kernels import ZonalKernel
from .likelihoods import Bernoulli, Gaussian

__all__ = ["BlockBound", "block_bound_whitened", "HarmonicSVGP"]

_HINT = ("k_c(Z_c, Z_c) of block {c} is singular: inducing inputs coincide or lie where this "
         "component vanishes (e.g. on the mirror of a reflection for an odd component). Move "
         "them apart, use fewer per block, or raise jitter.")


@dataclass
class BlockBound:
    """Value and derivatives of :func:`block_bound_whitened` (lists hold one entry per block)."""

    value: float
    mean: np.ndarray
    var: np.ndarray
    dKuu: list
    dKuf: list
    dkff: np.ndarray
    dm: list
    dL: list
    dnoise: float


def block_bound_whitened(Kuus: Sequence[np.ndarray], Kufs: Sequence[np.ndarray], kff: np.ndarray,
                         ms: Sequence[np.ndarray], Ls: Sequence[np.ndarray], y: np.ndarray, likelihood,
                         num_data: int) -> BlockBound:
    r"""The HVGP ELBO on a batch with block-independent whitened posteriors, and its derivatives.

    Parameters
    ----------
    Kuus, Kufs
        Per block :math:`k_c(Z_c, Z_c)` ``(m_c, m_c)`` and :math:`k_c(Z_c, X_B)` ``(m_c, B)``.
    kff ``(B,)``
        Prior variances :math:`k(x, x) = \sum_c k_c(x, x)` at the batch.
    ms, Ls
        Per block :math:`q(\tilde u_c) = N(m_c, L_cL_c^\top)` (lower triangles used).
    y ``(B,)``, likelihood, num_data
        Targets, a likelihood with ``variational_expectations``, and N (the data term is scaled
        by N / B).

    Returns
    -------
    BlockBound
        Equal to :func:`~spherelab.decoupled.orthogonal_bound_whitened` with K = 0 on the
        block-diagonal :math:`K_{uu}`, stacked :math:`K_{uf}` and block-diagonal L (tested).
    """
    B = kff.shape[0]
    scale = num_data / B
    mean = np.zeros(B)
    var = np.array(kff, dtype=np.float64, copy=True)
    fwd = []
    for c, (Kuu, Kuf, L) in enumerate(zip(Kuus, Kufs, Ls)):
        L = np.tril(L)
        Lk, At, LtA = whitened_forward(Kuu, Kuf, L, f"k_c(Z_c, Z_c) of block {c}", _HINT.format(c=c))
        mean += At.T @ ms[c]
        var += np.einsum("mn,mn->n", LtA, LtA) - np.einsum("mn,mn->n", At, At)
        fwd.append((Lk, At, LtA, L))
    e, gmu, gvar = likelihood.variational_expectations(y, mean, np.maximum(var, 1e-300))
    value = scale * float(e.sum()) - sum(kl_whitened(m, f[3]) for m, f in zip(ms, fwd))
    gmu = scale * gmu
    gvar = scale * gvar
    dKuu, dKuf, dm, dL = [], [], [], []
    for m, (Lk, At, LtA, L) in zip(ms, fwd):
        dmc, dLc, dAt = whitened_q_backward(m, L, At, LtA, gmu, gvar)
        dKufc, dKuuc = whitened_kernel_backward(Lk, At, dAt)
        dKuu.append(dKuuc)
        dKuf.append(dKufc)
        dm.append(dmc)
        dL.append(dLc)
    dnoise = gaussian_noise_gradient(likelihood, y, mean, var, scale)
    return BlockBound(float(value), mean, var, dKuu, dKuf, gvar.copy(), dm, dL, dnoise)


def _tied_scales_ok(group, kernel: ZonalKernel) -> bool:
    # training moves an ARD input_scale away from any tie: the group must commute with every
    # diagonal scaling, not just the current one
    scale = np.asarray(kernel.input_scale)
    if isinstance(group, Antipodal) or scale.ndim == 0:
        return True
    probe = np.diag(1.0 + np.arange(group.dim) / (group.dim + 1.0))
    return all(np.allclose(R @ probe, probe @ R, atol=1e-12) for R in group.generators)


class HarmonicSVGP(FitMixin):
    r"""The harmonic variational GP (HVGP, seed 002 §4.2): one block of inducing inputs per
    component of the harmonic kernel decomposition, independent whitened posteriors per block.

    Parameters
    ----------
    kernel
        A :class:`~spherelab.kernels.ZonalKernel` invariant under ``group``.
    group
        A :class:`~spherelab.groups.Group` acting on the data (reflections, rotations, products)
        or :class:`~spherelab.groups.Antipodal` (even/odd degrees on the sphere). The real form of
        the decomposition is used: C = ∏(⌊T_j/2⌋ + 1) blocks.
    num_inducing_per_block
        m, the inducing inputs in each block (an int, or one per block).
    likelihood
        :class:`~spherelab.likelihoods.Gaussian` (default) or
        :class:`~spherelab.likelihoods.Bernoulli`.
    inducing_inputs
        Optional list of ``(m_c, D)`` initial :math:`Z_c`; default: distinct random training rows
        per block, chosen in :meth:`fit`.
    jitter
        Added to each :math:`k_c(Z_c, Z_c)` as ``jitter * mean(diag)``.
    blas_threads
        BLAS threads inside :meth:`fit` and :meth:`fit_adam` (``"auto"``: one thread up to 1024
        inducing variables in total; see :class:`~spherelab.OrthogonalSVGP`).

    Trainable (analytic gradients, :meth:`elbo_and_gradient`): ``ms``, ``Ls`` (per block),
    ``Z`` (per block), the kernel's variance, shape parameters, bias and input scale, and the
    Gaussian noise variance. With a trivial group (T = 1) this is the whitened SVGP.

    References
    ----------
    Sun, Shi, Wilson, Grosse (2021), "Scalable variational Gaussian processes via harmonic kernel
    decomposition", §3-4 (``shared/seeds/002``).
    """

    def __init__(self, kernel: ZonalKernel, group, num_inducing_per_block: int | Sequence[int] = 64,
                 likelihood=None, inducing_inputs: Sequence[Any] | None = None, jitter: float = 1e-6,
                 blas_threads: Any = "auto") -> None:
        if not isinstance(kernel, ZonalKernel):
            raise TypeError(f"kernel must be a spherelab ZonalKernel, got {kernel!r}")
        if not isinstance(group, (Group, Antipodal)):
            raise TypeError(f"group must be a spherelab.groups.Group or Antipodal, got {group!r}")
        self.kernel, self.group = kernel, group
        self.components = harmonic_decomposition(kernel, group, real=True)
        if not _tied_scales_ok(group, kernel):
            raise ValueError(
                "this group mixes input coordinates, so an array input_scale would lose the "
                "invariance as it trains; give the kernel a scalar input_scale"
            )
        C = len(self.components)
        if np.ndim(num_inducing_per_block) == 0:
            sizes = [check_int(num_inducing_per_block, "num_inducing_per_block", minimum=1)] * C
        else:
            sizes = [check_int(m, "num_inducing_per_block", minimum=1) for m in num_inducing_per_block]
            if len(sizes) != C:
                raise ValueError(f"num_inducing_per_block must have one entry per block ({C}), got {len(sizes)}")
        self.sizes = sizes
        self.likelihood = likelihood if likelihood is not None else Gaussian(1.0)
        if not isinstance(self.likelihood, (Gaussian, Bernoulli)):
            raise TypeError(f"likelihood must be Gaussian or Bernoulli, got {self.likelihood!r}")
        self.Z = None
        if inducing_inputs is not None:
            Z = [check_finite_array(z, f"inducing_inputs[{c}]", ndim=2).copy() for c, z in enumerate(inducing_inputs)]
            if len(Z) != C or any(z.shape[0] != m for z, m in zip(Z, sizes)):
                raise ValueError(f"inducing_inputs must be {C} arrays with {sizes} rows")
            self.Z = Z
        self.jitter = float(jitter)
        if not (self.jitter >= 0 and np.isfinite(self.jitter)):
            raise ValueError(f"jitter must be a finite number >= 0, got {jitter!r}")
        self.ms = self.Ls = None
        self.optimizer_result = None
        resolve_threads(blas_threads, 0)  # validate early
        self.blas_threads = blas_threads

    @property
    def num_blocks(self) -> int:
        """C, the number of (real) components."""
        return len(self.components)

    @property
    def num_inducing(self) -> int:
        """Total inducing variables :math:`\\sum_c m_c`."""
        return int(sum(self.sizes))

    def _num_inducing(self) -> int:
        return self.num_inducing

    # ---- set-up ---------------------------------------------------------------------------
    def _check_data(self, X, y):
        X, y = check_data(X, y)
        if isinstance(self.group, Group) and X.shape[1] != self.group.dim:
            raise ValueError(f"X has {X.shape[1]} columns but the group acts on {self.group.dim}")
        if isinstance(self.likelihood, Bernoulli):
            self.likelihood.check_targets(y)
        return X, y

    def initialise(self, X: np.ndarray, seed: int = 0) -> "HarmonicSVGP":
        """Inducing inputs (distinct random training rows per block unless given) and q at the
        prior (:math:`\\mu_c = 0`, :math:`L_c = I`)."""
        rng = np.random.default_rng(seed)
        if self.Z is None:
            total = self.num_inducing
            pick = rng.choice(X.shape[0], total, replace=total > X.shape[0])
            offs = np.cumsum([0, *self.sizes])
            self.Z = [X[pick[offs[c] : offs[c + 1]]].copy() for c in range(self.num_blocks)]
        elif any(z.shape[1] != X.shape[1] for z in self.Z):
            raise ValueError(f"inducing_inputs must have {X.shape[1]} columns like X")
        self.ms = [np.zeros(m) for m in self.sizes]
        self.Ls = [np.eye(m) for m in self.sizes]
        return self

    def optimal_q(self, X: Any, y: Any, chunk_size: int = 4096) -> "HarmonicSVGP":
        r"""Set q to the optimum of the ELBO for a Gaussian likelihood at the current kernel,
        noise and inducing inputs, among block-independent posteriors.

        With :math:`A` the stacked :math:`L_{k,c}^{-1}k_c(Z_c, X)` (``(Σm, N)``, accumulated over
        row chunks), the mean terms and the covariance terms of the whitened bound separate:
        :math:`\mu = (I + AA^\top/\sigma^2)^{-1}Ay/\sigma^2` (all blocks jointly: the data couple
        them) and :math:`L_cL_c^\top = (I + A_cA_c^\top/\sigma^2)^{-1}` per block. Costs
        :math:`O(N(\sum m)^2 + (\sum m)^3)`: for initialisation and tests, not for huge models.
        When the training inputs are closed under the group the cross blocks of
        :math:`AA^\top` vanish (seed 002 Thm. 4.2) and this is the unrestricted optimum.
        """
        if not isinstance(self.likelihood, Gaussian):
            raise TypeError("optimal_q needs a Gaussian likelihood")
        X, y = self._check_data(X, y)
        if self.ms is None:
            self.initialise(X)
        Lks = self._factors()
        offs = np.cumsum([0, *self.sizes])
        M = int(offs[-1])
        AAt = np.zeros((M, M))
        Ay = np.zeros(M)
        for s in range(0, X.shape[0], chunk_size):
            Xc = X[s : s + chunk_size]
            A = np.concatenate([solve_triangular(Lk, comp.K(Z, Xc), lower=True)
                                for comp, Z, Lk in zip(self.components, self.Z, Lks)], axis=0)
            AAt += A @ A.T
            Ay += A @ y[s : s + chunk_size]
        s2 = self.likelihood.variance
        P = np.eye(M) + AAt / s2
        mu = np.linalg.solve(P, Ay / s2)
        for c in range(self.num_blocks):
            sl_c = slice(offs[c], offs[c + 1])
            self.ms[c] = mu[sl_c].copy()
            self.Ls[c] = _inverse_factor(P[sl_c, sl_c])
        self._X, self._y = X, y
        return self

    def _matrices(self, X):
        Kuus = [self._with_jitter(comp.K(Z)) for comp, Z in zip(self.components, self.Z)]
        Kufs = [comp.K(Z, X) for comp, Z in zip(self.components, self.Z)]
        return Kuus, Kufs, self.kernel.diag(X)

    def bound(self, X, y, num_data: int | None = None) -> BlockBound:
        """:func:`block_bound_whitened` at the current parameters on (X, y)."""
        Kuus, Kufs, kff = self._matrices(X)
        return block_bound_whitened(Kuus, Kufs, kff, self.ms, self.Ls, y, self.likelihood,
                                    X.shape[0] if num_data is None else num_data)

    def elbo_and_gradient(self, X, y, num_data: int | None = None) -> tuple[float, dict[str, Any]]:
        """The ELBO (minibatch estimate if ``num_data`` > len(y)) and its gradient with respect to
        every parameter: ``ms``, ``Ls``, ``Z`` (lists per block), the kernel's hyper-parameters
        and ``noise``."""
        X = check_finite_array(X, "X", ndim=2)
        res = self.bound(X, y, num_data)
        kern = self.kernel
        hyp = ["variance", *kern.shape_params, "bias", "input_scale"]
        acc = {k: np.zeros_like(np.asarray(getattr(kern, k), dtype=np.float64)) for k in hyp}

        def add(d):
            for k, v in d.items():
                if k in acc:
                    acc[k] = acc[k] + np.asarray(v)

        dZ = []
        for c, (comp, Z) in enumerate(zip(self.components, self.Z)):
            d1, dZ1, _ = comp.gradients_with_inputs(self._jitter_backward(res.dKuu[c]), Z)
            d2, dZ2, _ = comp.gradients_with_inputs(res.dKuf[c], Z, X)
            add(d1)
            add(d2)
            dZ.append(dZ1 + dZ2)
        add(kern.diag_gradients(res.dkff, X))
        g: dict[str, Any] = {"ms": res.dm, "Ls": res.dL, "Z": dZ, "noise": res.dnoise}
        g.update({k: (float(v) if np.ndim(v) == 0 else v) for k, v in acc.items()})
        return res.value, g

    # ---- parameter vector -----------------------------------------------------------------
    def _pack(self) -> np.ndarray:
        parts = []
        for m, L in zip(self.ms, self.Ls):
            parts += [m, L[np.tril_indices(m.size)]]
        parts += [Z.ravel() for Z in self.Z]
        parts.append(self._pack_hypers())
        return np.concatenate(parts)

    def _unpack(self, theta: np.ndarray) -> None:
        r = FlatReader(theta)
        for c, m in enumerate(self.sizes):
            self.ms[c], self.Ls[c] = r.vector(m), r.tril(m)
        for c, Z in enumerate(self.Z):
            self.Z[c] = r.vector(Z.size).reshape(Z.shape)
        self._unpack_hypers(r.rest())

    def _grad_vector(self, g: dict[str, Any], theta: np.ndarray) -> np.ndarray:
        parts = []
        for dm, dL in zip(g["ms"], g["Ls"]):
            parts += [dm, dL[np.tril_indices(dm.size)]]
        parts += [dZ.ravel() for dZ in g["Z"]]
        parts.append(self._hyper_gradient(g, theta))
        return np.concatenate(parts)

    def _q_size(self) -> int:
        return sum(m + m * (m + 1) // 2 for m in self.sizes)

    def _initialised(self) -> bool:
        return self.ms is not None

    def elbo(self, X: Any = None, y: Any = None) -> float:
        """The ELBO on all of (X, y) (default: the training data)."""
        X = self._X if X is None else check_finite_array(X, "X", ndim=2)
        y = self._y if y is None else np.asarray(y, dtype=np.float64)
        return self.bound(X, y).value

    # ---- prediction -----------------------------------------------------------------------
    def _check_fitted(self):
        if self.ms is None:
            raise RuntimeError("call fit() (or initialise()) first")

    def _factors(self):
        return [cholesky_or_explain(self._with_jitter(comp.K(Z)), f"k_c(Z_c, Z_c) of block {c}", _HINT.format(c=c))
                for c, (comp, Z) in enumerate(zip(self.components, self.Z))]

    def predict_components(self, X: Any, chunk_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        r"""Per-block predictive means and variances of :math:`f_c`, ``(C, N)`` each: the
        additive parts of seed 002 Fig. 9 (their sum is :meth:`predict_f`)."""
        self._check_fitted()
        X = check_finite_array(X, "X", ndim=2)
        Lks = self._factors()

        means = np.zeros((self.num_blocks, X.shape[0]))
        varis = np.zeros_like(means)
        for s in range(0, X.shape[0], chunk_size):
            Xc = X[s : s + chunk_size]
            for c, (comp, Z, Lk) in enumerate(zip(self.components, self.Z, Lks)):
                At = solve_triangular(Lk, comp.K(Z, Xc), lower=True)
                LtA = np.tril(self.Ls[c]).T @ At
                means[c, s : s + chunk_size] = At.T @ self.ms[c]
                varis[c, s : s + chunk_size] = comp.diag(Xc) - np.einsum("mn,mn->n", At, At) + np.einsum("mn,mn->n", LtA, LtA)
        return means, np.maximum(varis, 0.0)

    def predict_f(self, X: Any, chunk_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of f, ``(N,)`` each (chunked over rows)."""
        means, varis = self.predict_components(X, chunk_size)
        return means.sum(0), varis.sum(0)

    def predict_y(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of y."""
        return self.likelihood.predict_y(*self.predict_f(X))

    def __repr__(self) -> str:
        return f"HarmonicSVGP({self.kernel!r}, {self.group!r}, blocks={self.num_blocks}, m={self.sizes})"
