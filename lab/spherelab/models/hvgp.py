r"""The harmonic variational Gaussian process (HVGP, Sun et al. 2021 §4.2).

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

import contextlib
from typing import Any, Iterator, Sequence

import numpy as np
from scipy.linalg import solve_triangular

from .._state import Fields
from .._validation import check_allocation, check_data, check_finite_array, check_int, check_nonnegative, check_seed
from ..bounds.hvgp import HINT_BLOCK, BlockBound, block_bound_whitened, block_predictive
from ..bounds.statistics import streamed_statistics
from ..bounds.sums import GradientSums
from ..groups import Antipodal, Group, harmonic_decomposition
from ..kernels import ZonalKernel
from ..likelihoods import Gaussian
from ..linalg import cholesky_or_explain, inverse_factor
from ..parameters import Param, kernel_params, likelihood_params
from ..rows.hvgp import DeviceBlocks
from . import saved
from .base import entry
from .sparse import SparseModel

__all__ = ["HarmonicSVGP"]


class BlockTril(Param):
    """A list of lower-triangular blocks (one per component), packed block after block."""

    def shape(self, value=None) -> tuple:
        return tuple(L.shape[0] for L in (self.get() if value is None else value))

    def validate(self, value) -> list:
        sizes = self.shape()
        if len(value) != len(sizes):
            raise ValueError(f"{self.name} must be a list of {len(sizes)} blocks, got {len(value)}")
        out = []
        for c, (L, m) in enumerate(zip(value, sizes)):
            L = np.asarray(L, dtype=np.float64)
            if L.shape != (m, m) or not np.all(np.isfinite(L)):
                raise ValueError(f"{self.name}[{c}] must be a finite ({m}, {m}) matrix, got shape {L.shape}")
            out.append(np.tril(L))
        return out

    def size(self, shape: tuple | None = None) -> int:
        return sum(m * (m + 1) // 2 for m in (self.shape() if shape is None else shape))

    def pack(self) -> np.ndarray:
        return np.concatenate([L[np.tril_indices(L.shape[0])] for L in self.get()])

    def value_of(self, u: np.ndarray, shape: tuple | None = None) -> list:
        out, i = [], 0
        for m in self.shape() if shape is None else shape:
            L = np.zeros((m, m))
            L[np.tril_indices(m)] = u[i:i + m * (m + 1) // 2]
            out.append(L)
            i += m * (m + 1) // 2
        return self.validate(out)

    def chain(self, grad, u: np.ndarray) -> np.ndarray:
        return np.concatenate([np.asarray(g)[np.tril_indices(np.shape(g)[0])] for g in grad])


def _tied_scales_ok(group, kernel: ZonalKernel) -> bool:
    # training moves an ARD input_scale away from any tie: the group must commute with every
    # diagonal scaling, not just the current one
    scale = np.asarray(kernel.input_scale)
    if isinstance(group, Antipodal) or scale.ndim == 0:
        return True
    probe = np.diag(1.0 + np.arange(group.dim) / (group.dim + 1.0))
    return all(np.allclose(R @ probe, probe @ R, atol=1e-12) for R in group.generators)


class HarmonicSVGP(SparseModel):
    r"""The harmonic variational GP (HVGP, Sun et al. 2021 §4.2): one block of inducing inputs per
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
    device
        ``"cpu"`` (default), ``"gpu"`` or ``"auto"`` (:func:`spherelab.backend.resolve`).

    Notes
    -----
    Trainable (analytic gradients, :meth:`elbo_and_gradient`): ``ms``, ``Ls`` (per block),
    ``Z`` (per block), the kernel's variance, shape parameters, bias and input scale, and the
    Gaussian noise variance. With a trivial group (T = 1) this is the whitened SVGP.

    References
    ----------
    Sun, Shi, Wilson, Grosse (2021), "Scalable variational Gaussian processes via harmonic kernel
    decomposition", §3-4.

    Examples
    --------
    >>> import spherelab as sl
    >>> from spherelab.groups import Reflection
    >>> X, y = sl.datasets.mirror_symmetric(300, noise=0.1, seed=0)
    >>> model = sl.HarmonicSVGP(sl.kernels.Matern(2.5, 1.0), Reflection(2), 4).fit(X, y, maxiter=20)
    >>> len(model.components), model.predict_f(X[:3])[0].shape   # four blocks of four inducing inputs
    (4, (3,))
    """

    fields = SparseModel.fields + Fields(
        config=("kernel", "group", "sizes", "likelihood", "jitter"),
        fitted=("Z", "ms", "Ls", "input_dim=_input_dim"),
        held=("held=_held",),
        transient=("components",))

    def __init__(self, kernel: ZonalKernel, group, num_inducing_per_block: int | Sequence[int] = 64,
                 likelihood=None, *, inducing_inputs: Sequence[Any] | None = None, jitter: float = 1e-6,
                 device: str = "cpu") -> None:
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
        if isinstance(num_inducing_per_block, (int, np.integer, float, bool, str)) or num_inducing_per_block is None:
            sizes = [check_int(num_inducing_per_block, "num_inducing_per_block", minimum=1)] * C
        else:
            if isinstance(num_inducing_per_block, (str, bytes)) or not hasattr(num_inducing_per_block, "__iter__"):
                raise TypeError(f"num_inducing_per_block must be an integer or one per block, got "
                                f"{num_inducing_per_block!r}")
            sizes = [check_int(m, "num_inducing_per_block", minimum=1) for m in num_inducing_per_block]
            if len(sizes) != C:
                raise ValueError(f"num_inducing_per_block must have one entry per block ({C}), got {len(sizes)}")
        check_allocation(16.0 * sum(float(m) ** 2 for m in sizes), f"num_inducing_per_block = {sizes[:4]}",
                         "use fewer inducing inputs per block")
        self.sizes = sizes
        self._set_likelihood(likelihood)
        self._set_device(device)
        self.Z = None
        if inducing_inputs is not None:
            Z = [check_finite_array(z, f"inducing_inputs[{c}]", ndim=2).copy() for c, z in enumerate(inducing_inputs)]
            if len(Z) != C or any(z.shape[0] != m for z, m in zip(Z, sizes)):
                raise ValueError(f"inducing_inputs must be {C} arrays with {sizes} rows")
            self.Z = Z
        self.jitter = check_nonnegative(jitter, "jitter")
        self.ms = self.Ls = None
        self.optimizer_result = None

    @classmethod
    def _load_state(cls, state):
        return saved.load_hvgp(cls, state)

    @property
    def num_blocks(self) -> int:
        """C, the number of (real) components."""
        return len(self.components)

    def _num_inducing(self) -> int:
        return int(sum(self.sizes))

    # ---- set-up ---------------------------------------------------------------------------
    def _check_data(self, X, y):
        X, y = super()._check_data(X, y)
        if isinstance(self.group, Group) and X.shape[1] != self.group.dim:
            raise ValueError(f"X has {X.shape[1]} columns but the group acts on {self.group.dim}")
        return X, y

    def initialise(self, X: np.ndarray, seed: int = 0) -> "HarmonicSVGP":
        """Inducing inputs (distinct random training rows per block unless given) and q at the
        prior (:math:`\\mu_c = 0`, :math:`L_c = I`)."""
        rng = np.random.default_rng(check_seed(seed))
        if self.Z is None:
            total = self._num_inducing()
            pick = rng.choice(X.shape[0], total, replace=total > X.shape[0])
            offs = np.cumsum([0, *self.sizes])
            self.Z = [X[pick[offs[c] : offs[c + 1]]].copy() for c in range(self.num_blocks)]
        elif any(z.shape[1] != X.shape[1] for z in self.Z):
            raise ValueError(f"inducing_inputs must have {X.shape[1]} columns like X")
        self._input_dim = X.shape[1]
        self.ms = [np.zeros(m) for m in self.sizes]
        self.Ls = [np.eye(m) for m in self.sizes]
        return self

    _held: tuple | None = None  # (X, y, their device copy or None) while a fit holds its rows

    @contextlib.contextmanager
    def holding_rows(self, X, y) -> Iterator[None]:
        """A fit's rows, copied to the model's device once on entry where its evaluations run there
        (:class:`~spherelab.rows.hvgp.DeviceBlocks`)."""
        self._held = DeviceBlocks(self).hold(X, y)
        try:
            yield
        finally:
            self._held = None

    def _collapsed_elbo_and_gradient(self, X, y):
        # on the rows floor one pass's statistics serve the optimum and the bound (None: the dense bound's)
        out = DeviceBlocks(self).evaluate(self._check_inputs(X), y, X.shape[0], collapsed=True)
        return out if out is not None else super()._collapsed_elbo_and_gradient(X, y)

    @entry("fit", threads="rows")
    def optimal_q(self, X: Any, y: Any, chunk_size: int = 4096) -> "HarmonicSVGP":
        r"""Set q to the optimum of the ELBO for a Gaussian likelihood at the current kernel,
        noise and inducing inputs, among block-independent posteriors.

        With :math:`A` the stacked :math:`L_{k,c}^{-1}k_c(Z_c, X)` (``(Σm, N)``, accumulated over
        row chunks), the mean terms and the covariance terms of the whitened bound separate:
        :math:`\mu = (I + AA^\top/\sigma^2)^{-1}Ay/\sigma^2` (all blocks jointly: the data couple
        them) and :math:`L_cL_c^\top = (I + A_cA_c^\top/\sigma^2)^{-1}` per block. Costs
        :math:`O(N(\sum m)^2 + (\sum m)^3)`: for initialisation and tests, not for huge models.
        When the training inputs are closed under the group the cross blocks of
        :math:`AA^\top` vanish (Sun et al. 2021 Thm. 4.2) and this is the unrestricted optimum.
        """
        if not isinstance(self.likelihood, Gaussian):
            raise TypeError("optimal_q needs a Gaussian likelihood")
        chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
        X, y = self._check_data(X, y)
        if self.ms is None:
            self.initialise(X)
        Lks = self._factors()
        offs = np.cumsum([0, *self.sizes])
        M = int(offs[-1])

        def columns(Xc):
            return np.concatenate([solve_triangular(Lk, comp.K(Z, Xc, ops=self.ops), lower=True)
                                   for comp, Z, Lk in zip(self.components, self.Z, Lks)], axis=0)

        st = streamed_statistics(columns, X, y, chunk_size=chunk_size, ops=self.ops)
        AAt, Ay = st.G, st.c
        s2 = self.likelihood.variance
        P = np.eye(M) + AAt / s2
        mu = np.linalg.solve(P, Ay / s2)
        for c in range(self.num_blocks):
            sl_c = slice(offs[c], offs[c + 1])
            self.ms[c] = mu[sl_c].copy()
            self.Ls[c] = inverse_factor(P[sl_c, sl_c])
        self._X, self._y = X, y
        return self

    def _matrices(self, X):
        Kuus = [self._with_jitter(comp.K(Z, ops=self.ops)) for comp, Z in zip(self.components, self.Z)]
        Kufs = [comp.K(Z, X, ops=self.ops) for comp, Z in zip(self.components, self.Z)]
        return Kuus, Kufs, self.kernel.diag(X)

    def bound(self, X, y, num_data: int | None = None) -> BlockBound:
        """:func:`block_bound_whitened` at the current parameters on (X, y)."""
        Kuus, Kufs, kff = self._matrices(X)
        return block_bound_whitened(Kuus, Kufs, kff, self.ms, self.Ls, y, self.likelihood,
                                    X.shape[0] if num_data is None else num_data)

    @entry(threads="rows")
    def elbo_and_gradient(self, X, y, num_data: int | None = None) -> tuple[float, dict[str, Any]]:
        """The ELBO (minibatch estimate if ``num_data`` > len(y)) and its gradient with respect to
        every parameter: ``ms``, ``Ls``, ``Z`` (lists per block), the kernel's hyper-parameters
        and ``noise``."""
        X = self._check_inputs(X)
        out = DeviceBlocks(self).evaluate(X, y, X.shape[0] if num_data is None else num_data)  # the rows floor
        if out is not None:
            return out
        res = self.bound(X, y, num_data)
        kern = self.kernel
        acc = GradientSums.for_kernel(kern)
        add = acc.add
        dZ = []
        for c, (comp, Z) in enumerate(zip(self.components, self.Z)):
            d1, dZ1, _ = comp.gradients_with_inputs(self._jitter_backward(res.dKuu[c]), Z, ops=self.ops)
            d2, dZ2, _ = comp.gradients_with_inputs(res.dKuf[c], Z, X, ops=self.ops)
            add(d1)
            add(d2)
            dZ.append(dZ1 + dZ2)
        add(kern.diag_gradients(res.dkff, X))
        g: dict[str, Any] = {"q_mu": np.concatenate(res.dm), "q_sqrt": res.dL, "Z": np.concatenate(dZ),
                             "noise": res.dnoise}
        g.update(acc.result())
        return res.value, g

    # ---- parameters -----------------------------------------------------------------------
    def _registry(self) -> list[Param]:
        offs = np.cumsum([0, *self.sizes])

        def set_means(v):
            self.ms = [np.array(v[offs[c]:offs[c + 1]]) for c in range(self.num_blocks)]

        def set_Z(v):
            self.Z = list(np.split(np.asarray(v), offs[1:-1]))

        reg = [Param("q_mu", lambda: np.concatenate(self.ms), set_means),
               BlockTril("q_sqrt", lambda: self.Ls, lambda v: setattr(self, "Ls", v)),
               Param("Z", lambda: np.concatenate(self.Z), set_Z)]
        return reg + kernel_params(self.kernel) + likelihood_params(self.likelihood)

    def _initialised(self) -> bool:
        return self.ms is not None

    @entry("read", threads="rows")
    def elbo(self, X: Any = None, y: Any = None) -> float:
        """The ELBO on all of (X, y) (default: the training data)."""
        self._check_fitted()
        X, y = check_data(*self._training_data(X, y))  # finite, one target per row: named errors
        return self.bound(self._check_inputs(X), y).value

    # ---- prediction -----------------------------------------------------------------------
    def _factors(self):
        return [cholesky_or_explain(self._with_jitter(comp.K(Z, ops=self.ops)), f"k_c(Z_c, Z_c) of block {c}",
                                    HINT_BLOCK.format(c=c))
                for c, (comp, Z) in enumerate(zip(self.components, self.Z))]

    @entry("predict", threads="rows")
    def predict_components(self, X: Any, chunk_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        r"""Per-block predictive means and variances of :math:`f_c`, ``(C, N)`` each: the
        additive parts of Sun et al. 2021 Fig. 9 (their sum is :meth:`predict_f`)."""
        self._check_fitted()
        chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
        X = self._check_inputs(X)
        means = np.zeros((self.num_blocks, X.shape[0]))
        varis = np.zeros_like(means)
        Kuus = [self._with_jitter(comp.K(Z, ops=self.ops)) for comp, Z in zip(self.components, self.Z)]
        for s in range(0, X.shape[0], chunk_size):
            Xc = X[s : s + chunk_size]
            Kufs = [comp.K(Z, Xc, ops=self.ops) for comp, Z in zip(self.components, self.Z)]
            pred = block_predictive(Kuus, Kufs, self.ms, self.Ls)
            means[:, s : s + chunk_size] = pred.means
            varis[:, s : s + chunk_size] = [comp.diag(Xc) for comp in self.components] + pred.reductions
        return means, np.maximum(varis, 0.0)

    @entry("predict", threads="rows")
    def predict_f(self, X: Any, chunk_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of f, ``(N,)`` each (chunked over rows)."""
        means, varis = self.predict_components(X, chunk_size)
        return means.sum(0), varis.sum(0)

    def __repr__(self) -> str:
        return f"HarmonicSVGP({self.kernel!r}, {self.group!r}, blocks={self.num_blocks}, m={self.sizes})"
