r"""Spherical inducing features with a diagonal :math:`K_{uu}` (VISH, Dutordoir et al. 2020 §3;
Eleftheriadis et al. §5):
:math:`u_m = \langle f, \psi_m\rangle_{\mathcal H}` for functions :math:`\psi_m` on
:math:`S^{d-1}`, orthonormal in :math:`L^2` and each of a single degree :math:`\ell(m)`, so that

.. math:: [K_{uf}]_{mn} = r_n\,\psi_m(\hat x_n), \qquad K_{uu} = \mathrm{diag}(1/\lambda_{\ell(m)})

(``docs/design.md`` §3). :class:`SphericalFeatures` writes the protocol once; the functions are
every spherical harmonic up to degree L (:class:`HarmonicFeatures`) or at most P orthonormalised
zonal functions per degree (:class:`~spherelab.features.PhaseTruncatedHarmonics`).

Functions of a degree where the kernel's spectrum vanishes carry no prior variance and are
dropped when the model binds the kernel (structural zeros, e.g. the odd levels >= 3 of the
arc-cosine kernels), so :math:`K_{uu}` stays finite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._state import Fields
from .._validation import check_dim, check_finite_array, check_int
from ..backend.ops import Operations
from ..kernels import ZonalKernel
from ..sphere.harmonics import SphericalHarmonics
from .base import Features
from .device_columns import HarmonicColumns

__all__ = ["SphericalFeatures", "Evaluation", "HarmonicFeatures"]


@dataclass
class Evaluation:
    """The features at data-space inputs: ``X`` ``(N, D)``, the lift's radii ``r`` ``(N,)`` and
    unit points ``Xh`` ``(N, d)``, and every function at them, ``values`` ``(N, M_all)``
    (before dropping the levels without prior mass)."""

    X: np.ndarray
    r: np.ndarray
    Xh: np.ndarray
    values: np.ndarray

    def rows(self, start: int, stop: int) -> "Evaluation":
        """The evaluation of rows ``start:stop`` (views)."""
        return Evaluation(self.X[start:stop], self.r[start:stop], self.Xh[start:stop], self.values[start:stop])


class SphericalFeatures(Features):
    """Base of the diagonal-:math:`K_{uu}` features. Subclasses provide ``dim``, ``max_degree``,
    ``all_degrees`` (``(M_all,)``), :meth:`unit_values` and :meth:`lift_vjp`, and, when
    trainable, :meth:`lift_vjp_with_params` and the parameter access."""

    dim: int
    max_degree: int
    _keep: np.ndarray | None = None

    # ---- to implement ---------------------------------------------------------------------
    @property
    def all_degrees(self) -> np.ndarray:
        """Degree of every function, ``(M_all,)``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def unit_values(self, Xh: np.ndarray, out: np.ndarray | None = None, *,
                    ops: Operations | str = "cpu") -> np.ndarray:
        """Every function at unit points ``Xh`` ``(N, d)``: ``(N, M_all)``, evaluated by ``ops``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def lift_vjp(self, Xh: np.ndarray, values: np.ndarray, W: np.ndarray, *,
                 ops: Operations | str = "cpu") -> np.ndarray:
        r""":math:`\sum_m W_{nm}\nabla_{\tilde x}\psi_m(\tilde x_n)` ``(N, d)`` for the homogeneous
        extensions :math:`\psi_m(\tilde x) = r\,\psi_m(\tilde x / r)`, at the unit points."""
        raise NotImplementedError  # pragma: no cover - abstract

    def lift_vjp_with_params(self, Xh, values, W, r, *, ops: Operations | str = "cpu") -> tuple[np.ndarray, np.ndarray]:
        r""":meth:`lift_vjp` and the gradient of the own parameters for :math:`K_{uf} = r\\psi`
        (weights ``W`` on :math:`K_{uf}^\\top`); default: no parameters."""
        return self.lift_vjp(Xh, values, W, ops=ops), np.zeros(0)

    # ---- the protocol, written once -------------------------------------------------------
    def bind(self, kernel: ZonalKernel) -> None:
        r"""Keep the functions of the degrees with :math:`\lambda_\ell > 0`."""
        lam = kernel.spectrum(self.dim, self.max_degree)
        keep = np.flatnonzero(lam[self.all_degrees] > 0)
        if keep.size == 0:
            raise ValueError("the kernel has no prior mass on any degree <= max_degree")
        keep.setflags(write=False)  # (a device keeps one copy: ops.device_constant)
        self._keep = None if keep.size == self.all_degrees.size else keep

    def _keep_from(self, state) -> np.ndarray | None:
        """The saved ``_keep`` of :meth:`bind`, checked against these features (load)."""
        keep = state.array("keep", shape=(None,), integer=True, optional=True)
        if keep is not None:
            n = self.all_degrees.size
            if keep.size == 0 or np.any(np.diff(keep) <= 0) or keep[0] < 0 or keep[-1] >= n:
                raise state.fail("keep", f"increasing indices in [0, {n}) of the functions kept")
            keep.setflags(write=False)
        return keep

    @property
    def kept(self) -> np.ndarray | slice:
        """Index of the functions kept by :meth:`bind` (all before it)."""
        return slice(None) if self._keep is None else self._keep

    @property
    def num_features(self) -> int:
        return int(self.all_degrees[self.kept].size)

    @property
    def degrees(self) -> np.ndarray:
        """Degree of each kept feature, ``(M,)``."""
        return self.all_degrees[self.kept]

    def spans(self, kernel: ZonalKernel) -> bool:
        r"""Whether the features span the kernel's whole prior, so that the variance they leave
        out, :math:`\mathrm{tr}(K_{ff} - Q_{ff})`, is zero at every input (only every harmonic
        up to the last degree of a spectrum that ends can)."""
        return False

    def Kuu_inverse_diag(self, kernel: ZonalKernel) -> np.ndarray:
        r""":math:`K_{uu}^{-1}` diagonal, :math:`\lambda_{\ell(m)}` per feature, ``(M,)``."""
        return kernel.spectrum(self.dim, self.max_degree)[self.degrees]

    def Kuu(self, kernel: ZonalKernel, *, ops: Operations | str = "cpu") -> np.ndarray:
        """``(M, M)`` diagonal (from the spectrum: on the host)."""
        return np.diag(1.0 / self.Kuu_inverse_diag(kernel))

    def evaluate(self, kernel: ZonalKernel, X: Any, *, ops: Operations | str = "cpu") -> Evaluation:
        """Lift ``X`` ``(N, D)`` with the kernel and evaluate every function (one pass, by ``ops``)."""
        X = check_finite_array(X, "X", ndim=2)
        if X.shape[1] + 1 != self.dim:
            raise ValueError(f"X has {X.shape[1]} columns but the features live on S^{self.dim - 1} "
                             f"(expected {self.dim - 1} inputs)")
        r, Xh = kernel.lift(X)
        return Evaluation(X, r, Xh, self.unit_values(Xh, ops=ops))

    def Kuf_from(self, ev: Evaluation) -> np.ndarray:
        """:math:`K_{uf}` ``(M, N)`` from an :meth:`evaluate` result."""
        return (ev.values[:, self.kept] * ev.r[:, None]).T

    def columns_into(self, ev: Evaluation, a: int, b: int, out: np.ndarray) -> None:
        """Rows ``a:b`` of :math:`K_{uf}^\\top` from an :meth:`evaluate` result, written into ``out`` ``(b - a, M)``."""
        np.multiply(ev.values[a:b, self.kept], ev.r[a:b, None], out=out)

    def spectrum_vjp(self, kernel: ZonalKernel, dlam: np.ndarray, dv: Any = 0.0) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial\lambda_m` per kept feature ``(M,)`` and
        :math:`\partial L/\partial\kappa(1)` into the kernel's spectral hyper-parameters (summed by
        degree, :meth:`~spherelab.kernels.ZonalKernel.spectrum_vjp`)."""
        L = self.max_degree
        return kernel.spectrum_vjp(self.dim, L, np.bincount(self.degrees, weights=dlam, minlength=L + 1), float(dv))

    def device_Kuf(self, ops, Xh: Any, r: Any) -> Any:
        r""":math:`K_{uf}` ``(M, N)`` from lifted rows already on ``ops``' device (unit points
        ``Xh`` ``(N, d)``, radii ``r`` ``(N,)``), as a device array: the columns of the device's
        statistics pass. Default: computed on the host and copied."""
        Xh_host, r_host = ops.to_host(Xh), ops.to_host(r)
        return ops.to_device(self.Kuf_from(Evaluation(Xh_host, r_host, Xh_host, self.unit_values(Xh_host, ops=ops))))

    def Kuf(self, kernel: ZonalKernel, X: Any, *, ops: Operations | str = "cpu") -> np.ndarray:
        r"""``(M, N)``: :math:`r_n\psi_m(\hat x_n)`."""
        return self.Kuf_from(self.evaluate(kernel, X, ops=ops))

    def Kuu_gradients(self, kernel: ZonalKernel, G: np.ndarray, *, ops: Operations | str = "cpu") -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial K_{uu}` into the spectral hyper-parameters:
        :math:`\partial L/\partial\lambda_\ell = -\sum_{m:\ell(m)=\ell} G_{mm}/\lambda_\ell^2`."""
        lam = self.Kuu_inverse_diag(kernel)
        return self.spectrum_vjp(kernel, -np.diag(G) / lam ** 2)

    def _weights(self, G: np.ndarray, ev: Evaluation) -> np.ndarray:
        if self._keep is None:  # every function kept: G^T itself (no copy when it is C-ordered)
            return np.ascontiguousarray(np.asarray(G).T)
        W = np.zeros_like(ev.values)
        W[:, self.kept] = np.asarray(G).T
        return W

    def Kuf_gradients(self, kernel: ZonalKernel, G: np.ndarray, X: Any,
                      evaluation: Evaluation | None = None, *, ops: Operations | str = "cpu") -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial K_{uf}` (``(M, N)``) into the inputs ``X``, the lift
        (``bias``, ``input_scale``) and, for trainable features, their parameters:
        :math:`r\psi_m(\tilde x/r)` is homogeneous of degree one in the lifted point.
        ``evaluation`` (from :meth:`evaluate` at the same X) saves re-evaluating the functions."""
        ev = self.evaluate(kernel, X, ops=ops) if evaluation is None else evaluation
        W = self._weights(G, ev)
        if self.trainable:
            dXt, gp = self.lift_vjp_with_params(ev.Xh, ev.values, W, ev.r, ops=ops)
        else:
            dXt, gp = self.lift_vjp(ev.Xh, ev.values, W, ops=ops), None
        out = kernel.lift_backward(ev.X, dXt)
        if gp is not None:
            out["directions"] = gp
        return out

    def param_vjp(self, G: np.ndarray, ev: Evaluation, *, ops: Operations | str = "cpu") -> np.ndarray:
        r"""The own parameters' gradient alone for :math:`\partial L/\partial K_{uf}` = ``G``
        ``(M, N)`` at an :meth:`evaluate` result (empty for untrainable features)."""
        if not self.trainable:
            return np.zeros(0)
        return self.lift_vjp_with_params(ev.Xh, ev.values, self._weights(G, ev), ev.r, ops=ops)[1]

    def param_gradient(self, grads: dict[str, Any]) -> np.ndarray:
        return np.asarray(grads.get("directions", np.zeros(self.get_params().size))).ravel()


class HarmonicFeatures(SphericalFeatures):
    r"""Every real spherical harmonic of degree :math:`0..L` on :math:`S^{d-1}` as inducing
    features (VISH, Dutordoir, Durrande & Hensman 2020, §3): :math:`M = \sum_{\ell\le L}N(\ell, d)`
    before the levels without prior mass are dropped. Nothing to train; the kernel's spectral
    hyper-parameters reach :math:`K_{uu}` through
    :meth:`~spherelab.kernels.ZonalKernel.spectrum_gradients`, the lift and the inputs reach
    :math:`K_{uf}` through the solid harmonics. With orthogonal inducing points
    (:class:`~spherelab.OrthogonalSVGP`) this is VISH with the decoupled posterior of Tiao, thesis.

    Parameters
    ----------
    max_degree
        L.
    dim
        d = inputs + 1; default: set by the model from the data (:meth:`initialise`).

    Examples
    --------
    >>> import spherelab as sl
    >>> X, y = sl.datasets.synthetic_regression(200, 2, seed=0)
    >>> model = sl.VISH(sl.kernels.Matern(1.5), features=sl.features.HarmonicFeatures(3)).fit(X, y)
    >>> model.features.num_features      # (L + 1)^2 on S^2
    16
    """

    fields = Fields(config=("max_degree", "dim=built_dim"), fitted=("keep=_keep",), transient=("harmonics",),
                    cache={"one_minus_degree=_one_minus_degree": ("max_degree", "dim")})

    def __init__(self, max_degree: int, dim: int | None = None) -> None:
        self.max_degree = check_int(max_degree, "max_degree", minimum=0)
        self.harmonics: SphericalHarmonics | None = None
        self._keep = None
        if dim is not None:
            self.initialise(check_dim(dim), None)

    def initialise(self, dim: int, rng: Any = None) -> None:
        """Build the harmonics on :math:`S^{d-1}` (d = inputs + 1)."""
        if self.harmonics is None or self.harmonics.dim != dim:
            self.harmonics = SphericalHarmonics(dim, self.max_degree)
            self._keep = None

    @property
    def built_dim(self) -> int | None:
        """:attr:`dim` once the harmonics are built, else None."""
        return None if self.harmonics is None else self.harmonics.dim

    @classmethod
    def _load_state(cls, state):
        features = cls(state.int("max_degree", minimum=0), state.int("dim", minimum=2, optional=True))
        if features.harmonics is None:
            if not state.is_null("keep"):
                raise state.fail("keep", "null for features not yet initialised")
        else:
            features._keep = features._keep_from(state)
        return features

    def _ready(self) -> SphericalHarmonics:
        if self.harmonics is None:
            raise RuntimeError("HarmonicFeatures need the dimension: pass dim=, or let a model "
                               "initialise them from the data")
        return self.harmonics

    @property
    def dim(self) -> int:  # type: ignore[override]
        return self._ready().dim

    @property
    def all_degrees(self) -> np.ndarray:
        return self._ready().degrees

    def unit_values(self, Xh: np.ndarray, out: np.ndarray | None = None, *,
                    ops: Operations | str = "cpu") -> np.ndarray:
        return self._ready()(Xh, out=out, ops=ops)

    def spans(self, kernel: ZonalKernel) -> bool:
        top = kernel.top_degree()
        return top is not None and top <= self.max_degree

    def has_device_columns(self, kernel) -> bool:
        return True

    def device_columns(self, kernel, ops) -> HarmonicColumns:
        return HarmonicColumns(self)

    def device_Kuf(self, ops, Xh: Any, r: Any) -> Any:
        A = ops.harmonic_columns(Xh, self._ready().plan, r)
        return A if self._keep is None else A[ops.device_constant(self._keep)]

    def device_Kuf_vjp(self, ops, Xh: Any, G: Any, K: Any, r: Any) -> Any:
        r""":math:`\partial L/\partial\tilde x` ``(N, d)`` of the lifted rows for
        :math:`\partial L/\partial K_{fu}` = ``G`` ``(N, M)``: :meth:`lift_vjp` with the unit rows
        ``Xh`` ``(N, d)``, ``G``, the columns ``K`` = :math:`K_{fu}` ``(N, M)`` of :meth:`device_Kuf`
        and the radii ``r`` ``(N,)`` already on ``ops``' device (the backward pass of
        :meth:`device_Kuf`), as a device array. The homogeneity term takes :math:`\psi_m = K_{nm}/r_n`
        from the columns, so the harmonics are not evaluated again (rows of radius 0, which the
        lift rejected, get none)."""
        xp, plan = ops.array_namespace(), self._ready().plan
        if self._keep is None:
            W = xp.ascontiguousarray(G)
            h = ops.device_constant(self._homogeneity())
        else:  # the dropped functions get no weight
            keep = ops.device_constant(self._keep)
            W = xp.zeros((G.shape[0], plan.degrees.shape[0]))
            W[:, keep] = G
            h = ops.device_constant(self._homogeneity()[self._keep])
        grad = ops.device_harmonics_vjp(Xh, W, plan)
        inv_r = xp.where(r > 0, 1.0 / xp.where(r > 0, r, 1.0), 0.0)
        grad += Xh * (((G * K) @ h) * inv_r)[:, None]
        return grad

    def lift_vjp(self, Xh: np.ndarray, values: np.ndarray, W: np.ndarray, *,
                 ops: Operations | str = "cpu") -> np.ndarray:
        r"""With the solid harmonic :math:`H_m = r^{\ell}\phi_m`,
        :math:`\nabla\psi_m = \nabla H_m(\hat x) + (1 - \ell_m)\phi_m(\hat x)\hat x`."""
        grad = self._ready().solid_vjp(Xh, W, ops=ops)
        grad += Xh * ((W * values) @ self._homogeneity())[:, None]
        return grad

    def _homogeneity(self) -> np.ndarray:
        r""":math:`1 - \ell_m` per function (read-only, computed once per set of harmonics)."""
        def compute():
            w = 1.0 - self._ready().degrees
            w.setflags(write=False)
            return w

        return self.fields.cached(self, "one_minus_degree", compute)

    def __repr__(self) -> str:
        dim = "?" if self.harmonics is None else self.harmonics.dim
        return f"HarmonicFeatures(max_degree={self.max_degree}, dim={dim})"
