r"""Real orthonormal spherical harmonics on :math:`S^{d-1}` in any dimension :math:`d \ge 2`.

Construction (explicit, no precomputed tables)
----------------------------------------------
We use the Gelfand–Tsetlin (hyperspherical) basis, written in Cartesian, homogeneous form so
that no angle, no division by a partial norm and no table is ever needed. Peel the coordinates
off one at a time: with :math:`\rho_k^2 = x_1^2 + \dots + x_k^2`, a *solid* harmonic of degree
:math:`m_k` in :math:`x_1..x_k` is

.. math:: H^{(k)}_{m_k, \mu}(x_1..x_k) = A^{(k)}_{n,\lambda}\; \rho_k^{\,n}\,
          C_n^{\lambda}\!\big(x_k / \rho_k\big)\; H^{(k-1)}_{m_{k-1}, \mu}(x_1..x_{k-1}),
          \qquad n = m_k - m_{k-1},\ \lambda = m_{k-1} + \tfrac{k-2}{2},

for :math:`0 \le m_{k-1} \le m_k`, starting from the circle
:math:`H^{(2)}_0 = 1`, :math:`H^{(2)}_{m,\cos} + i H^{(2)}_{m,\sin} = \sqrt2 (x_1 + i x_2)^m`.
Because the surface measure factorises as
:math:`d\bar\sigma_{k-1} = \omega_k (1-t^2)^{(k-3)/2} dt\, d\bar\sigma_{k-2}` with
:math:`t = x_k`, orthonormality of the product reduces to the orthogonality of
:math:`C_n^\lambda` for the weight :math:`(1-t^2)^{\lambda - 1/2}`, which fixes

.. math:: A^{(k)}_{n,\lambda} = \big(\omega_k\, h_n^\lambda\big)^{-1/2}, \qquad
          h_n^\lambda = \frac{\pi\, 2^{1-2\lambda}\,\Gamma(n + 2\lambda)}
                             {n!\,(n + \lambda)\,\Gamma(\lambda)^2}.

The branching rule :math:`N(\ell, k) = \sum_{m \le \ell} N(m, k-1)` shows the products span each
degree. On the unit sphere :math:`\rho_d = 1` and the :math:`d`-level products are the orthonormal
harmonics :math:`\phi_{\ell j}` (normalised measure, :math:`\phi_{0} = 1`); d = 2 gives
:math:`\sqrt2\cos\ell\theta, \sqrt2\sin\ell\theta`.

Stability: each factor :math:`\rho^n C_n^\lambda(x_k/\rho)` is evaluated by the homogeneous form of
the normalised recurrence (:math:`G_{j+1} = ((2j+2\lambda) x_k G_j - j\rho^2 G_{j-1})/(j + 2\lambda)`,
:math:`|G_j| \le \rho^j \le 1`) and multiplied by a constant computed in log space; the product of
the factors is bounded by the addition theorem, :math:`\sum_j \phi_{\ell j}(x)^2 = N(\ell, d)`, so
no intermediate overflows or cancels. The tests check the addition theorem to 1e-11 up to d = 17
and orthonormality by exact product quadrature.

Each feature is a product of at most :math:`\min(L, d-1)` non-trivial factors (every factor with
:math:`n \ge 1` uses up at least one degree), so evaluation costs :math:`O(M \min(L, d-1))` per
point plus :math:`O(d L^2)` for the factor tables, run in parallel over chunks of points.

References: Dai & Xu (2013) *Approximation theory and harmonic analysis on spheres and balls*,
Thm. 1.5.1 (hyperspherical basis); Avery (1989); Dutordoir, PhD report App. A; ``docs/design.md`` §1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_allocation, check_degree, check_dim, check_finite_array, check_points_on_sphere
from ..backend.ops import Operations, as_operations
from ..threads import policy
from .harmonics_jit import columns_kernel, eval_kernel, vjp_kernel
from .harmonics_plan import Plan, build_plan, labels
from .special import cumulative_num_harmonics, num_harmonics

__all__ = ["SphericalHarmonics"]



#: most features one SphericalHarmonics may have: building the plan is Python-level work that
#: grows with M (measured: 1.1e7 features, 24 s and 1.2 GB here) and one output row is ~100 MB
MAX_FEATURES = 12_000_000
























class SphericalHarmonics:
    r"""All real orthonormal spherical harmonics of degree :math:`0..L` on :math:`S^{d-1}`.

    Calling the object on an ``(N, d)`` array of unit vectors returns the ``(N, M)`` matrix
    :math:`\Phi_{n, m} = \phi_m(x_n)`, :math:`M = \sum_{\ell \le L} N(\ell, d)`, columns ordered
    by degree. The harmonics are orthonormal for the normalised surface measure
    (:math:`\int \phi_m \phi_{m'} d\bar\sigma = \delta_{mm'}`, :math:`\phi_0 = 1`) and satisfy the
    addition theorem :math:`\sum_j \phi_{\ell j}(x)\phi_{\ell j}(x') = Z_\ell(x^\top x')`.
    Nothing is precomputed or downloaded: any (d, L) whose output fits in memory works at once.

    Parameters
    ----------
    dim
        Ambient dimension :math:`d \ge 2` (points live on :math:`S^{d-1} \subset R^d`).
    max_degree
        Largest degree L (inclusive), L >= 0.

    Attributes
    ----------
    degrees : numpy.ndarray
        ``(M,)`` degree of each column.
    num_features : int
        M.

    Examples
    --------
    >>> import numpy as np, spherelab
    >>> Y = spherelab.SphericalHarmonics(9, 4)
    >>> Y.num_features
    660
    >>> X = np.random.default_rng(0).normal(size=(5, 9))
    >>> Phi = Y(X / np.linalg.norm(X, axis=1, keepdims=True))
    >>> Phi.shape
    (5, 660)

    References
    ----------
    Dai & Xu (2013), Thm. 1.5.1; Dutordoir, PhD report App. A; see the module docstring for the construction.
    """

    def __init__(self, dim: int, max_degree: int) -> None:
        self.dim = check_dim(dim)
        self.max_degree = check_degree(max_degree)
        M = cumulative_num_harmonics(self.max_degree, self.dim)
        P = max(1, min(self.max_degree, self.dim - 1))
        # the plan's arrays and the temporaries of its construction: measured 110 bytes per
        # feature at the peak (P = 3), i.e. about 36 + 4P, x 2.5
        plan_bytes = 2.5 * M * (36 + 4 * P)
        if M >= 2**31 or M > MAX_FEATURES:
            raise ValueError(
                f"SphericalHarmonics(dim={self.dim}, max_degree={self.max_degree}) would produce "
                f"{M:,} features (more than {MAX_FEATURES:,}; one row of the output alone takes "
                f"{8 * M / 2**30:,.2f} GiB); reduce max_degree or dim (see spherelab.num_harmonics)"
            )
        check_allocation(plan_bytes, f"SphericalHarmonics(dim={self.dim}, max_degree={self.max_degree}) "
                         f"({M:,} features)", "reduce max_degree or dim (see spherelab.num_harmonics)")
        self._plan = build_plan(self.dim, self.max_degree)
        self.labels: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def plan(self) -> Plan:
        """The constants and slot plan the evaluation kernels run on (device operations take it)."""
        return self._plan

    @property
    def degrees(self) -> np.ndarray:
        """Degree of each column, shape ``(M,)``, non-decreasing."""
        return self._plan.degrees

    @property
    def multi_indices(self) -> np.ndarray:
        r"""Gelfand–Tsetlin label of each column, shape ``(M, d - 1)``: the degrees
        :math:`(m_d \ge m_{d-1} \ge \dots \ge m_2)` of the feature restricted to the nested
        spheres in :math:`(x_1..x_k)`, :math:`k = d, \dots, 2` (so column 0 is the degree).
        See :attr:`trig` for the cos/sin label in the :math:`(x_1, x_2)` plane. On
        :math:`S^2`, :math:`m_2` is the usual order :math:`|m|` about the :math:`x_3` axis."""
        return self._label_arrays()[0]

    @property
    def trig(self) -> np.ndarray:
        """``(M,)`` 0 where the feature is a cosine in the azimuth of (x_1, x_2), 1 for a sine."""
        return self._label_arrays()[1]

    def _label_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        # built on first use only: (M, d - 1) integers can be large in high dimension
        if self.labels is None:
            self.labels = labels(self.dim, self.max_degree)
        return self.labels

    @property
    def num_features(self) -> int:
        """Total number of harmonics M."""
        return int(self._plan.degrees.shape[0])

    def degree_slice(self, degree: int) -> slice:
        """Columns holding the harmonics of one degree."""
        degree = check_degree(degree, "degree")
        if degree > self.max_degree:
            raise ValueError(f"degree must be <= max_degree = {self.max_degree}, got {degree}")
        start = cumulative_num_harmonics(degree - 1, self.dim) if degree > 0 else 0
        return slice(start, start + num_harmonics(degree, self.dim))

    def __repr__(self) -> str:
        return (
            f"SphericalHarmonics(dim={self.dim}, max_degree={self.max_degree}, "
            f"num_features={self.num_features})"
        )

    def solid_vjp(self, X: Any, W: Any, *, ops: Operations | str = "cpu") -> np.ndarray:
        r"""Vector-Jacobian product with the *solid* harmonics :math:`H_m(x) = |x|^{\ell_m}
        \phi_m(\hat x)` (homogeneous polynomials): row n of the result is
        :math:`\nabla_x \sum_m W_{nm} H_m(x_n)`, shape ``(N, d)``.

        On the unit sphere the tangential gradient of :math:`\phi_m` is
        :math:`\nabla H_m - \ell_m \phi_m x`. Computed by reverse-mode differentiation of the
        evaluation (products and factor recurrences), O(M min(L, d-1)^2 + d L^2) per point.

        Parameters
        ----------
        X
            ``(N, d)`` points (any non-zero norm; the solid harmonics are evaluated as given).
        W
            ``(N, M)`` weights.
        ops
            The operations (or the name of the device) that compute it.
        """
        Xa = check_finite_array(X, "X", ndim=2)
        if Xa.shape[1] != self.dim:
            raise ValueError(f"X must have {self.dim} columns, got shape {Xa.shape}")
        Wa = check_finite_array(W, "W", ndim=2)
        if Wa.shape != (Xa.shape[0], self.num_features):
            raise ValueError(f"W must have shape {(Xa.shape[0], self.num_features)}, got {Wa.shape}")
        if Xa.shape[0] == 0:
            return np.empty(Xa.shape)
        return as_operations(ops).harmonics_vjp(np.ascontiguousarray(Xa), np.ascontiguousarray(Wa), self._plan)

    def __call__(
        self,
        X: Any,
        *,
        out: np.ndarray | None = None,
        atol: float = 1e-6,
        ops: Operations | str = "cpu",
    ) -> np.ndarray:
        r"""Evaluate every harmonic at every point.

        Parameters
        ----------
        X
            ``(N, d)`` array of unit vectors (rows with ``|norm - 1| > atol`` are rejected;
            the rest are renormalised exactly).
        out
            Optional C-contiguous float64 ``(N, M)`` array to write into.
        atol
            Tolerance on the row norms.
        ops
            The operations (or the name of the device) that evaluate them
            (:func:`spherelab.backend.resolve`).

        Returns
        -------
        numpy.ndarray
            ``(N, M)`` float64 matrix :math:`\Phi`.
        """
        Xn = check_points_on_sphere(X, self.dim, "X", atol=atol)
        N, M = Xn.shape[0], self.num_features
        if out is None:
            check_allocation(8.0 * N * M, f"the output ({N:,} x {M:,} float64)",
                             "evaluate X in chunks of rows and pass out=")
            out = np.empty((N, M))
        elif (
            not isinstance(out, np.ndarray)
            or out.shape != (N, M)
            or out.dtype != np.float64
            or not out.flags.c_contiguous
        ):
            raise ValueError(f"out must be a C-contiguous float64 array of shape {(N, M)}")
        if N == 0:
            return out
        return as_operations(ops).harmonics(Xn, self._plan, out)


def harmonics_cpu(X: np.ndarray, plan: Plan, out: np.ndarray) -> np.ndarray:
    """The CPU implementation of the ``harmonics`` operation: every feature of ``plan`` at the
    validated unit rows ``X`` into ``out`` ``(N, M)``."""
    # about 4 flops per feature and point (products of factors), see spherelab.threads
    with policy(X.shape[0] * plan.degrees.shape[0] * 4):
        eval_kernel(X, plan.max_degree, plan.const, plan.index, plan.buffer_size, out)
    return out


def harmonic_columns_cpu(X: np.ndarray, plan: Plan, scale: np.ndarray) -> np.ndarray:
    r"""The CPU implementation of ``harmonic_columns``: ``(M, N)``, column n the features of
    ``plan`` at the unit row ``X[n]`` times ``scale[n]`` (:math:`K_{uf}` of VISH when ``scale``
    holds the radii of the lift)."""
    out = np.empty((plan.degrees.shape[0], X.shape[0]))
    with policy(X.shape[0] * plan.degrees.shape[0] * 4):
        columns_kernel(X, plan.max_degree, plan.const, plan.index, plan.buffer_size, scale, out)
    return out


def harmonics_vjp_cpu(X: np.ndarray, W: np.ndarray, plan: Plan) -> np.ndarray:
    r"""The CPU implementation of ``harmonics_vjp``: ``(N, d)``, row n the gradient of
    :math:`\sum_m W_{nm}H_m` at ``X[n]`` (solid harmonics)."""
    out = np.empty(X.shape)
    with policy(X.shape[0] * plan.degrees.shape[0] * 8):
        vjp_kernel(X, plan.max_degree, plan.const, plan.index, plan.buffer_size, W, out)
    return out


