r"""Zonal kernels on :math:`S^{d-1}`: shape :math:`\kappa(t)`, spectrum :math:`\lambda_\ell`, and
their derivatives; each is also a covariance function in data space.

Conventions (``docs/design.md`` §1–3): :math:`\kappa(t) = \sum_\ell \lambda_\ell Z_\ell(t)`,
:math:`\kappa(1) = \sum_\ell \lambda_\ell N(\ell, d)` = ``variance`` (for every kernel whose series
converges). In data space an input :math:`x \in R^D` is lifted to
:math:`\tilde x = [x / s, b] \in R^{D+1}` (``input_scale`` s, ``bias`` b), :math:`r = \|\tilde x\|`,
:math:`\hat x = \tilde x / r`, and

.. math:: k(x, x') = r\, r'\, \kappa(\hat x^\top \hat x').

Every kernel has the sphere's view (``shape``, ``spectrum`` and their gradients) and the data
space's (``K``, ``diag`` and ``gradients``: GPy's contract, dL/dK chained into every hyper-parameter,
``bias`` and ``input_scale`` included).

Spectra are exact where the maths allows: the arc-cosine kernels are
:math:`\lambda_\ell = c_p\,\sigma_\ell^2` with :math:`\sigma_\ell` the coefficients of the unit
:math:`\max(0, t)^p` (:math:`\kappa_p(\hat x^\top \hat x') \propto
E_w[\sigma(w^\top x)\sigma(w^\top x')]` and Funk–Hecke), so they are non-negative by construction;
Matérn, deep arc-cosine and NTK spectra come from the quadrature of :mod:`spherelab.sphere.funk_hecke`
(geometric convergence, ~1e-15).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._state import Hyper, Saveable
from .._validation import (
    MAX_MAGNITUDE,
    check_allocation,
    check_cosines,
    check_degree,
    check_dim,
    check_finite_array,
    check_nonnegative,
    check_scale,
    check_variance,
)
from ..backend.ops import Operations, as_operations
from ..sphere.lift import lift_backward_rows, lift_extent, lift_rows, lift_rows_kept, lifted_row_gradients
from ..threads import entry_point
from .gram import gram_work, shape_backward

__all__ = ["ZonalKernel"]


#: the thread policy for a Gram-matrix computation of the size of its arguments
_gram = entry_point(gram_work)


class ZonalKernel(Saveable):
    """Base class. A new kernel implements the unit-variance hooks :meth:`unit_shape`,
    :meth:`unit_shape_dt` and :meth:`unit_spectrum` (and, with shape parameters,
    :meth:`unit_shape_gradients` and :meth:`unit_spectrum_gradients`); ``variance``, ``bias`` and
    ``input_scale`` are handled here."""

    #: names of the shape's own hyper-parameters (besides variance, bias, input_scale)
    shape_params: tuple[str, ...] = ()

    # validated on every assignment (spherelab._state.Hyper)
    variance = Hyper(check_variance, "prior variance at unit radius, in [1e-150, 1e150]")
    bias = Hyper(check_nonnegative, "last coordinate of the lift [x / input_scale, bias], >= 0")
    input_scale = Hyper(check_scale, "positive scalar or (D,) array dividing the inputs")

    def __init__(self, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0) -> None:
        self.variance = variance
        self.bias = bias
        self.input_scale = input_scale

    # ---- the hooks a new kernel implements (called with validated cosines and the caller's ops;
    # the public methods validate and apply ``variance``) ------------------------------------
    def unit_shape(self, t: np.ndarray, ops: Operations | str) -> np.ndarray:
        r"""To implement: :math:`\kappa(t)/\sigma^2`, same shape as ``t``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def unit_shape_dt(self, t: np.ndarray, ops: Operations | str) -> np.ndarray:
        r"""To implement: :math:`d(\kappa/\sigma^2)/dt`."""
        raise NotImplementedError  # pragma: no cover - abstract

    def unit_shape_gradients(self, t: np.ndarray, ops: Operations | str) -> dict[str, np.ndarray]:
        r""":math:`\partial(\kappa/\sigma^2)/\partial\theta` by :attr:`shape_params` name."""
        return {}

    def unit_shape_all(self, t: np.ndarray, ops: Operations | str) -> tuple[np.ndarray, np.ndarray, dict]:
        """``(unit_shape, unit_shape_dt, unit_shape_gradients)`` at once; a kernel fuses them where
        they share work."""
        return self.unit_shape(t, ops), self.unit_shape_dt(t, ops), self.unit_shape_gradients(t, ops)

    def unit_spectrum(self, dim: int, L: int) -> np.ndarray:
        r"""To implement: :math:`\lambda_{0..L}/\sigma^2` on :math:`S^{d-1}`, ``(L + 1,)``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def unit_spectrum_gradients(self, dim: int, L: int) -> dict[str, np.ndarray]:
        r""":math:`\partial(\lambda_\ell/\sigma^2)/\partial\theta` by :attr:`shape_params` name."""
        return {}

    def unit_spectrum_floor(self, dim: int, L: int) -> np.ndarray:
        """Per level, the size below which a numerical spectrum is noise (0: a closed form)."""
        return np.zeros(L + 1)

    def cache_key(self) -> tuple:
        """The class and :attr:`shape_params`: equal keys, equal spectra (caches and ``==`` read it)."""
        return (type(self).__name__,) + tuple(getattr(self, p) for p in self.shape_params)

    # ---- sphere view ------------------------------------------------------------------
    @property
    def spectral_parameter_names(self) -> tuple[str, ...]:
        """The hyper-parameters the shape and the spectrum depend on: ``variance``, then :attr:`shape_params`."""
        return ("variance", *self.shape_params)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """Every hyper-parameter, in the order registries and gradients list them: the spectral ones,
        then the lift's ``bias`` and ``input_scale``."""
        return (*self.spectral_parameter_names, "bias", "input_scale")

    @property
    def hyperparameters(self) -> dict[str, Any]:
        """All hyper-parameters by name (``input_scale`` may be an array)."""
        return {p: getattr(self, p) for p in self.parameter_names}

    def get_hyper(self, name: str) -> Any:
        """The hyper-parameter ``name`` (one of :attr:`parameter_names`): the registries' one access,
        shared with composite kernels (:class:`~spherelab.kernels.Additive`)."""
        if name not in self.parameter_names:
            raise AttributeError(f"{type(self).__name__} has no hyper-parameter {name!r}")
        return getattr(self, name)

    def set_hyper(self, name: str, value: Any) -> None:
        """Assign the hyper-parameter ``name`` (validated)."""
        if name not in self.parameter_names:
            raise AttributeError(f"{type(self).__name__} has no hyper-parameter {name!r}")
        setattr(self, name, value)

    def shape(self, t: Any, *, ops: Operations | str = "cpu") -> np.ndarray:
        r""":math:`\kappa(t)` (includes ``variance``), same shape as ``t`` (cosines in [-1, 1]);
        ``ops``: the operations (or the device's name) that evaluate the series shapes."""
        return self.variance * self.unit_shape(check_cosines(t), ops)

    def shape_dt(self, t: Any, *, ops: Operations | str = "cpu") -> np.ndarray:
        r""":math:`d\kappa/dt`."""
        return self.variance * self.unit_shape_dt(check_cosines(t), ops)

    def shape_gradients(self, t: Any, *, ops: Operations | str = "cpu") -> dict[str, np.ndarray]:
        r""":math:`\partial\kappa(t)/\partial\theta` for ``variance`` and the shape parameters."""
        t = check_cosines(t)
        grads = {k: self.variance * v for k, v in self.unit_shape_gradients(t, ops).items()}
        grads["variance"] = self.unit_shape(t, ops)
        return grads

    def top_degree(self) -> int | None:
        """The last degree with prior mass when the spectrum ends there (``None``: it never ends)."""
        return None

    def at_one(self) -> float:
        r""":math:`\kappa(1)`, the prior variance at unit radius (exact where the shape is a
        truncated series)."""
        return float(self.shape(np.ones(1))[0])

    def at_one_gradients(self) -> dict[str, float]:
        r""":math:`\partial\kappa(1)/\partial\theta` for ``variance`` and the shape parameters."""
        return {k: float(v[0]) for k, v in self.shape_gradients(np.ones(1)).items()}

    def spectrum(self, dim: int, max_degree: int) -> np.ndarray:
        r"""Eigenvalues :math:`\lambda_0..\lambda_L` on :math:`S^{d-1}` (``(L + 1,)``)."""
        dim, L = check_dim(dim), check_degree(max_degree)
        return self.variance * self.unit_spectrum(dim, L)

    def spectrum_floor(self, dim: int, max_degree: int) -> np.ndarray:
        r"""Per level, the size below which :meth:`spectrum`'s value is numerical noise (the
        quadrature's convergence and rounding, ``(L + 1,)``, in the units of the spectrum); 0 for
        spectra in closed form. Show or analyse only levels with ``spectrum > spectrum_floor``.

        Examples
        --------
        >>> import spherelab as sl
        >>> k = sl.kernels.Matern(2.5, 1.0)
        >>> lam, floor = k.spectrum(9, 40), k.spectrum_floor(9, 40)
        >>> bool((lam >= 0).all()), bool((lam[:10] > floor[:10]).all())
        (True, True)
        """
        dim, L = check_dim(dim), check_degree(max_degree)
        return self.variance * self.unit_spectrum_floor(dim, L)

    def spectrum_gradients(self, dim: int, max_degree: int) -> dict[str, np.ndarray]:
        r""":math:`\partial\lambda_\ell/\partial\theta` for ``variance`` and the shape
        parameters."""
        dim, L = check_dim(dim), check_degree(max_degree)
        grads = {k: self.variance * v for k, v in self.unit_spectrum_gradients(dim, L).items()}
        grads["variance"] = self.unit_spectrum(dim, L)
        return grads

    def spectrum_vjp(self, dim: int, max_degree: int, dlam: Any, dat_one: float = 0.0) -> dict[str, float]:
        r"""Chain :math:`\partial L/\partial\lambda_\ell` (``(L + 1,)``) and :math:`\partial L/\partial\kappa(1)`
        into the spectral hyper-parameters (:attr:`spectral_parameter_names`): the one home of
        :math:`\sum_\ell \bar\lambda_\ell\,\partial\lambda_\ell/\partial\theta
        + \bar\kappa(1)\,\partial\kappa(1)/\partial\theta`."""
        sgrads = self.spectrum_gradients(dim, max_degree)
        vgrads = self.at_one_gradients() if dat_one else {}
        dlam = np.asarray(dlam, dtype=np.float64)
        return {p: float(dlam @ sgrads[p]) + dat_one * vgrads.get(p, 0.0) for p in self.spectral_parameter_names}

    # ---- data space -------------------------------------------------------------------
    def check_lift(self, X: np.ndarray, name: str = "X", rows: int = 65536) -> None:
        """Raise the errors :meth:`lift` would raise for ``X``, reading it once without lifting it
        (:func:`~spherelab.sphere.lift.lift_extent`, memory bounded whatever N): the lift overflows
        where a column's largest magnitude over its scale (or the bias) exceeds the limit, and a
        row vanishes only when the bias is 0 and the row's scaled entries are all 0. Only where one
        does are the rows lifted, ``rows`` at a time, for the message naming the first at fault."""
        X = check_finite_array(X, name, ndim=2)
        self.lift(X[:1], name)  # shapes, and the bias's own magnitude
        scale = np.broadcast_to(np.asarray(self.input_scale, dtype=np.float64), (X.shape[1],))
        top, vanishing = lift_extent(X, scale)
        if not (np.any(top > MAX_MAGNITUDE) or (self.bias == 0 and vanishing)):
            return
        for start in range(0, X.shape[0], rows):  # the rows at fault, with the lift's own message
            block = np.abs(X[start:start + rows])
            top = block.max(axis=0) / scale if block.size else np.zeros(0)
            if np.any(top > MAX_MAGNITUDE):
                self.lift(X[start:start + rows], name, row_offset=start)  # raises with the message
            if self.bias == 0 and np.any(np.all(block / scale == 0, axis=1)):
                self.lift(X[start:start + rows], name, row_offset=start)

    def lift(self, X: Any, name: str = "X", row_offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
        r"""``(r, X_hat)``: norms :math:`r = \|[x/s, b]\|` ``(N,)`` and the points on the
        sphere ``(N, D + 1)`` (``row_offset``: added to row numbers in error messages)."""
        X = check_finite_array(X, name, ndim=2)
        scale = np.asarray(self.input_scale)
        if scale.ndim == 1 and scale.shape[0] != X.shape[1]:
            raise ValueError(
                f"input_scale has {scale.shape[0]} entries but {name} has {X.shape[1]} columns"
            )
        with np.errstate(all="ignore"):  # overflow and vanishing rows are reported below
            r, Xh, big = lift_rows(np, X, scale, self.bias)
        top = float(np.max(big)) if big.size else 0.0
        if not top <= MAX_MAGNITUDE:
            raise ValueError(f"the lift [{name} / input_scale, bias] has entries up to {top:.3g}: the kernel's "
                             f"values r r' kappa would overflow float64 (limit {MAX_MAGNITUDE:g}); standardise "
                             "the inputs (spherelab.datasets.Standardizer), raise input_scale or lower bias")
        if np.any(r == 0):
            i = int(np.flatnonzero(r == 0)[0]) + row_offset
            raise ValueError(
                f"row {i} of {name} vanishes after the lift [x / input_scale, bias] "
                "(a zero row with bias = 0): use a positive bias"
            )
        return r, Xh

    def lift_zeros(self) -> dict[str, Any]:
        """A zero of each lift parameter's gradient (``bias``, ``input_scale``)."""
        return {"bias": 0.0, "input_scale": np.zeros_like(np.asarray(self.input_scale, dtype=np.float64))}

    def radii_backward(self, X: np.ndarray, r: np.ndarray, Xh: np.ndarray, d: Any) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial r_n^2` (``d``: a number for every row alike, or ``(N,)``)
        into ``X`` and the lift: :math:`\partial r^2/\partial\tilde x = 2 r\hat x`."""
        return self.lift_backward(X, 2.0 * (np.asarray(d, dtype=np.float64) * r)[:, None] * Xh)

    def prior_rows(self, r: np.ndarray) -> np.ndarray:
        r""":math:`k(x_n, x_n) = \kappa(1) r_n^2` from the lift's radii ``(N,)``."""
        return r * r * self.at_one()

    def at_one_vjp(self, dv: Any) -> dict[str, float]:
        r"""Chain :math:`\partial L/\partial\kappa(1)` into the spectral hyper-parameters."""
        return {k: float(dv) * g for k, g in self.at_one_gradients().items()}

    def lift_kept(self, xp: Any, X: Any) -> tuple[Any, Any, Any]:
        """:func:`~spherelab.sphere.lift.lift_rows_kept` of rows in the array module ``xp`` (a
        device's chunk): radii, unit points and the count of rows rejected."""
        scale = xp.asarray(np.asarray(self.input_scale, dtype=np.float64))
        return lift_rows_kept(xp, X, scale, self.bias)

    def fused_code(self) -> int | None:
        r"""Code of the compiled (fused) shape the Gram matrices and their backward run on (``None``:
        NumPy). A kernel that gives one also gives ``fused_values(ops, T, r1, r2, same=False,
        device=False)`` (the block :math:`r_i r_j\kappa(t_{ij})` from the unit rows' inner products
        ``T``) and ``fused_backward(ops, T, G, r1, r2, same=False, device=False)`` -> ``(A, B, sums)``
        (:meth:`gradients_with_inputs`' A and B, and its hyper-parameters' sums by name), on host
        arrays or, with ``device``, the device's (:mod:`spherelab.features.device_columns`)."""
        return None

    def _lift_pair(self, X: Any, X2: Any):  # (inside K and gradients_with_inputs: under their policy)
        r1, U1 = self.lift(X)
        if X2 is None:
            return r1, U1, r1, U1
        r2, U2 = self.lift(X2, "X2")
        if U2.shape[1] != U1.shape[1]:
            raise ValueError(f"X has {U1.shape[1] - 1} columns but X2 has {U2.shape[1] - 1}: they must match")
        return r1, U1, r2, U2

    @staticmethod
    def _check_gram_size(n1: int, n2: int) -> None:
        # the Gram matrix and about three temporaries of its size (inner products, shape values)
        check_allocation(4 * 8.0 * n1 * n2, f"a {n1:,} x {n2:,} Gram matrix",
                         "compute it in blocks of rows, or use a sparse model (VISH, OrthogonalSVGP)")

    @_gram
    def K(self, X: Any, X2: Any = None, *, ops: Operations | str = "cpu") -> np.ndarray:
        r"""Gram matrix :math:`k(X, X2)`, ``(N, N2)``, computed by ``ops`` (the operations of a
        model's device, or a device's name)."""
        r1, U1, r2, U2 = self._lift_pair(X, X2)
        self._check_gram_size(r1.shape[0], r2.shape[0])
        if self.fused_code() is not None:
            return self.fused_values(as_operations(ops), U1 @ U2.T, r1, r2, X2 is None)
        T = np.clip(U1 @ U2.T, -1.0, 1.0)
        if X2 is None:
            np.fill_diagonal(T, 1.0)
        return r1[:, None] * r2[None, :] * self.shape(T, ops=ops)

    __call__ = K

    def diag(self, X: Any) -> np.ndarray:
        r""":math:`k(x, x) = r^2 \kappa(1)`, ``(N,)``."""
        r, _ = self.lift(X)
        return r * r * float(self.shape(np.ones(1))[0])

    def diag_gradients(self, dL_ddiag: Any, X: Any) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial k(x_n, x_n)` (``(N,)``) into every hyper-parameter:
        :math:`k(x, x) = r^2\kappa(1)`, so the shape parameters enter through :math:`\kappa(1)` and
        ``bias``, ``input_scale`` through :math:`r^2 = \|[x/s, b]\|^2`."""
        g = check_finite_array(dL_ddiag, "dL_ddiag")
        r, Xh = self.lift(X)
        out: dict[str, Any] = {k: float(g @ (r * r)) * v for k, v in self.at_one_gradients().items()}
        lg = self.lift_backward(np.asarray(X, dtype=np.float64), 2.0 * self.at_one() * (g * r)[:, None] * Xh)
        out["bias"] = lg["bias"]
        out["input_scale"] = lg["input_scale"]
        return out

    def gradients(self, dL_dK: Any, X: Any, X2: Any = None, *, ops: Operations | str = "cpu") -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial K` into every hyper-parameter (GPy's contract).

        With :math:`K_{ij} = r_i r_j \kappa(t_{ij})`, :math:`t_{ij} = u_{ij}/(r_i r_j)`,
        :math:`u = \tilde x_i^\top \tilde x_j`, a lift parameter p enters through
        :math:`\partial r_i/\partial p` and :math:`\partial u_{ij}/\partial p`; entries with
        :math:`t = 1` exactly (the diagonal of :math:`k(X, X)`) have :math:`\partial t = 0` and
        skip :math:`\kappa'(1)`, which is infinite for the order-0 arc-cosine and Matérn-1/2.

        Returns
        -------
        dict
            Scalars for ``variance``, ``bias`` and the shape parameters; ``input_scale`` is a
            scalar or an array like the parameter.
        """
        return self.gradients_with_inputs(dL_dK, X, X2, ops=ops)[0]

    @_gram
    def gradients_with_inputs(self, dL_dK: Any, X: Any, X2: Any = None, *,
                              ops: Operations | str = "cpu") -> tuple[dict[str, Any], np.ndarray, Any]:
        r""":meth:`gradients` together with :math:`\partial L/\partial X` and
        :math:`\partial L/\partial X_2`, sharing one evaluation of :math:`t`, :math:`\kappa`,
        :math:`\kappa'` and :math:`\partial\kappa/\partial\theta`.

        Through the lifted rows :math:`\tilde x_i = [x_i/s, b]`:
        :math:`\partial L/\partial\tilde x_i = \sum_j A_{ij} r_j\,\tilde x_i/r_i + \sum_j B_{ij}\tilde x_j`
        with :math:`A = G\odot(\kappa - t\kappa')` and :math:`B = G\odot\kappa'`; ``bias``,
        ``input_scale`` and the inputs then follow from :meth:`lift_backward`.

        Returns
        -------
        (dict, dX ``(N, D)``, dX2 ``(N2, D)`` or ``None``)
            With ``X2=None`` (``K(X)``) ``dX`` is the total over both arguments and ``dX2`` is
            ``None``.
        """
        X = check_finite_array(X, "X", ndim=2)
        same = X2 is None
        X2 = X if same else check_finite_array(X2, "X2", ndim=2)
        G = check_finite_array(dL_dK, "dL_dK", ndim=2)
        if G.shape != (X.shape[0], X2.shape[0]):
            raise ValueError(f"dL_dK must have shape {(X.shape[0], X2.shape[0])}, got {G.shape}")
        r1, U1, r2, U2 = self._lift_pair(X, None if same else X2)
        if self.fused_code() is not None:  # one compiled pass for A, B and the hyper-parameter sums
            A, B, out = self.fused_backward(as_operations(ops), U1 @ U2.T, G, r1, r2, same)
        else:
            A, B, out = shape_backward(self, G, U1 @ U2.T, r1, r2, same, ops)
        dXt1, dXt2 = lifted_row_gradients(A, B, r1, U1, r2, U2)
        if same:
            dXt1 = dXt1 + dXt2
        g1 = self.lift_backward(X, dXt1)
        out["bias"] = g1["bias"]
        out["input_scale"] = g1["input_scale"]
        if same:
            return out, g1["X"], None
        g2 = self.lift_backward(X2, dXt2)
        out["bias"] += g2["bias"]
        out["input_scale"] = out["input_scale"] + g2["input_scale"]
        return out, g1["X"], g2["X"]

    def lift_backward(self, X: np.ndarray, dXt: np.ndarray) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial\tilde x` (``(N, D + 1)``, the unnormalised lifted
        rows :math:`\tilde x = [x / s, b]`) into ``X``, ``bias`` and ``input_scale``."""
        return lift_backward_rows(X, dXt, self.input_scale)

    #: structural (non-trainable) attributes shown by repr
    structure: tuple[str, ...] = ()

    def _save_state(self) -> dict[str, Any]:
        """The constructor's arguments: the structural ones and every hyper-parameter
        (:mod:`spherelab.persistence`; the constructor validates each on load)."""
        return {**{s: getattr(self, s) for s in self.structure}, **self.hyperparameters}

    def __repr__(self) -> str:
        items = {s: getattr(self, s) for s in self.structure}
        items.update(self.hyperparameters)
        args = ", ".join(f"{k}={v!r}" for k, v in items.items())
        return f"{type(self).__name__}({args})"
