r"""Additive kernels: a sum of zonal kernels, each on the sphere of its own group of input columns.

Group c holds the columns :math:`g_c` of the inputs; its kernel lifts them to
:math:`\tilde x_c = [x_{g_c} / s_c, b_c]` on :math:`S^{|g_c|}` (one column: the circle, whose
harmonics are a Fourier series; a pair: :math:`S^2`), and

.. math:: k(x, x') = \sum_c r_c r_c'\,\kappa_c(\hat x_c^\top \hat x_c'),

each component with its own variance, shape parameters, bias and input scale (Duvenaud, Nickisch
& Rasmussen 2011 for additive GPs; Dutordoir et al. 2020 Table 1 for the additive exact GP on
power). Each component's spherical-harmonic features keep a diagonal :math:`K_{uu}` and are
orthogonal to the other components' (their covariance is zero), so VISH's collapsed bound, its
passes and its file format carry over (:class:`~spherelab.features.AdditiveHarmonics`).

Conventions shared by the models: the lift returns per-component radii ``r`` ``(N, C)`` and unit
points ``(N, sum_c d_c)`` (component c's block at :attr:`Additive.offsets`), ``at_one()`` is the
``(C,)`` vector of :math:`\kappa_c(1)`, and hyper-parameters are named ``c{index}_{name}``
(``c0_variance``, ``c2_input_scale``), the gradients keyed the same.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any, Sequence

import numpy as np

from .._state import Saveable
from .._validation import check_finite_array, check_int
from .base import ZonalKernel

__all__ = ["Additive"]

_NAME = re.compile(r"^c(\d+)_(\w+)$")


@functools.lru_cache(maxsize=1024)  # read at every get and set of a hyper-parameter, by the optimisers too
def _parse(name: str) -> tuple[int, str] | None:
    """``c<index>_<name>`` as ``(index, name)``, or None."""
    m = _NAME.match(name)
    return None if m is None else (int(m.group(1)), m.group(2))


def _check_groups(groups: Any) -> tuple[tuple[int, ...], ...]:
    if isinstance(groups, (str, bytes)) or not hasattr(groups, "__iter__"):
        raise TypeError(f"groups must be a sequence of column-index sequences, got {groups!r}")
    out = []
    for i, g in enumerate(groups):
        g = (g,) if isinstance(g, (int, np.integer)) else g
        try:
            cols = tuple(check_int(c, f"groups[{i}] entries", minimum=0) for c in g)
        except TypeError:
            raise TypeError(f"groups[{i}] must be a sequence of column indices (ints), got {g!r}") from None
        if not cols:
            raise ValueError(f"groups[{i}] is empty: every component needs at least one column")
        if len(set(cols)) != len(cols):
            raise ValueError(f"groups[{i}] = {cols} repeats a column")
        out.append(cols)
    if not out:
        raise ValueError("groups is empty: an additive kernel needs at least one component")
    seen: dict[tuple, int] = {}
    for i, g in enumerate(out):
        key = tuple(sorted(g))
        if key in seen:
            raise ValueError(f"groups[{i}] = {g} repeats groups[{seen[key]}]: each group of columns once")
        seen[key] = i
    return tuple(out)


class Additive(Saveable):
    r"""A sum of zonal kernels on sub-spheres (module docstring).

    Parameters
    ----------
    components
        One :class:`~spherelab.kernels.ZonalKernel` per group, distinct objects (each trains its
        own hyper-parameters); an input scale that is an array has one entry per column of its group.
    groups
        The columns of each component: ints, or sequences of ints (``[0, 1, (0, 1)]``).

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> k = sl.kernels.Additive.from_groups(sl.kernels.Matern(1.5), [0, 1, (0, 1)])
    >>> X = np.random.default_rng(0).normal(size=(4, 2))
    >>> parts = sum(c.K(X[:, list(g)]) for c, g in zip(k.components, k.groups))
    >>> bool(np.allclose(k.K(X), parts)), k.parameter_names[:3]
    (True, ('c0_variance', 'c0_lengthscale', 'c0_bias'))
    """

    def __init__(self, components: Sequence[ZonalKernel], groups: Sequence[Any]) -> None:
        groups = _check_groups(groups)
        components = list(components) if hasattr(components, "__iter__") else components
        if not isinstance(components, list) or not all(isinstance(k, ZonalKernel) for k in components):
            raise TypeError(f"components must be a list of spherelab zonal kernels, got {components!r}")
        if len(components) != len(groups):
            raise ValueError(f"{len(components)} components for {len(groups)} groups: give one kernel per group")
        if len({id(k) for k in components}) != len(components):
            raise ValueError("components must be distinct kernel objects (a shared kernel would train as one); "
                             "use Additive.from_groups(kernel, groups), which copies it")
        for i, (k, g) in enumerate(zip(components, groups)):
            scale = np.asarray(k.input_scale)
            if scale.ndim == 1 and scale.size != len(g):
                raise ValueError(f"components[{i}].input_scale has {scale.size} entries but its group {g} has "
                                 f"{len(g)} columns")
        self.components = components
        self.groups = groups

    @classmethod
    def from_groups(cls, kernel: ZonalKernel, groups: Sequence[Any]) -> "Additive":
        """One copy of ``kernel`` per group (an array ``input_scale`` is replaced by its mean)."""
        if not isinstance(kernel, ZonalKernel):
            raise TypeError(f"kernel must be a spherelab zonal kernel, got {kernel!r}")
        groups = _check_groups(groups)
        parts = []
        for g in groups:
            k = copy.deepcopy(kernel)
            scale = np.asarray(kernel.input_scale)
            if scale.ndim == 1:
                k.input_scale = float(scale.mean())
            parts.append(k)
        return cls(parts, groups)

    # ---- structure ------------------------------------------------------------------------
    @property
    def num_components(self) -> int:
        return len(self.groups)

    @property
    def dims(self) -> tuple[int, ...]:
        """The ambient dimension of each component's sphere, ``|g_c| + 1``."""
        return tuple(len(g) + 1 for g in self.groups)

    @property
    def offsets(self) -> np.ndarray:
        """Start of each component's block in the lifted rows, ``(C + 1,)``."""
        return np.concatenate([[0], np.cumsum(self.dims)]).astype(np.int64)

    @property
    def min_columns(self) -> int:
        """The inputs need at least this many columns (one past the largest index a group names)."""
        return 1 + max(max(g) for g in self.groups)

    def _columns(self, X: Any, name: str = "X") -> np.ndarray:
        X = check_finite_array(X, name, ndim=2)
        if X.shape[1] < self.min_columns:
            raise ValueError(f"{name} has {X.shape[1]} columns but the additive kernel's groups use column "
                             f"{self.min_columns - 1}")
        return X

    # ---- hyper-parameters, keyed c{i}_{name} ----------------------------------------------
    def _named(self, names_of) -> tuple[str, ...]:
        return tuple(f"c{i}_{p}" for i, k in enumerate(self.components) for p in names_of(k))

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return self._named(lambda k: k.parameter_names)

    @property
    def spectral_parameter_names(self) -> tuple[str, ...]:
        return self._named(lambda k: k.spectral_parameter_names)

    def _split(self, name: str) -> tuple[ZonalKernel, str]:
        parsed = _parse(name) if isinstance(name, str) else None
        if parsed is None or parsed[0] >= len(self.components) or \
                parsed[1] not in self.components[parsed[0]].parameter_names:
            raise AttributeError(f"the additive kernel has no hyper-parameter {name!r} (names: c<index>_<name>, "
                                 f"e.g. {self.parameter_names[0]!r})")
        return self.components[parsed[0]], parsed[1]

    def get_hyper(self, name: str) -> Any:
        kernel, p = self._split(name)
        return getattr(kernel, p)

    def set_hyper(self, name: str, value: Any) -> None:
        kernel, p = self._split(name)
        setattr(kernel, p, value)

    @property
    def hyperparameters(self) -> dict[str, Any]:
        return {p: self.get_hyper(p) for p in self.parameter_names}

    def _prefixed(self, i: int, grads: dict[str, Any]) -> dict[str, Any]:
        return {f"c{i}_{k}": v for k, v in grads.items() if k != "X"}

    # ---- the lift -------------------------------------------------------------------------
    def check_lift(self, X: Any, name: str = "X") -> None:
        """Each component's :meth:`~spherelab.kernels.ZonalKernel.check_lift` on its columns."""
        X = self._columns(X, name)
        for k, g in zip(self.components, self.groups):
            k.check_lift(X[:, list(g)], f"{name}[:, {list(g)}]")

    def lift(self, X: Any, name: str = "X", row_offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(r (N, C), X_hat (N, sum_c d_c))``: each component's radii and unit points."""
        X = self._columns(X, name)
        rs, hs = [], []
        for k, g in zip(self.components, self.groups):
            r, h = k.lift(X[:, list(g)], f"{name}[:, {list(g)}]", row_offset)
            rs.append(r)
            hs.append(h)
        return np.stack(rs, axis=1), np.concatenate(hs, axis=1)

    def lift_backward(self, X: np.ndarray, dXt: np.ndarray) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial\tilde x` ``(N, sum_c d_c)`` into ``X`` and every component's lift."""
        out: dict[str, Any] = {"X": np.zeros(np.shape(X))}
        o = self.offsets
        for i, (k, g) in enumerate(zip(self.components, self.groups)):
            part = k.lift_backward(X[:, list(g)], dXt[:, o[i]:o[i + 1]])
            out["X"][:, list(g)] += part["X"]
            out.update(self._prefixed(i, part))
        return out

    def lift_zeros(self) -> dict[str, Any]:
        """A zero of each lift parameter's gradient."""
        out = {}
        for i, k in enumerate(self.components):
            out.update(self._prefixed(i, k.lift_zeros()))
        return out

    def radii_backward(self, X: np.ndarray, r: np.ndarray, Xh: np.ndarray, d: Any) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial r_c^2` (``d``: ``(C,)`` for every row alike, or
        ``(N, C)``) into the lifts."""
        d = np.broadcast_to(np.asarray(d, dtype=np.float64), r.shape)
        o = self.offsets
        dXt = np.concatenate([2.0 * (d[:, i] * r[:, i])[:, None] * Xh[:, o[i]:o[i + 1]]
                              for i in range(self.num_components)], axis=1)
        return self.lift_backward(X, dXt)

    def lift_kept(self, xp: Any, X: Any) -> tuple[Any, Any, Any]:
        """Each component's :meth:`~spherelab.kernels.ZonalKernel.lift_kept` on a device's rows:
        radii ``(N, C)``, unit points ``(N, sum_c d_c)`` and the count of rows rejected."""
        parts = [k.lift_kept(xp, X[:, list(g)]) for k, g in zip(self.components, self.groups)]
        return (xp.stack([p[0] for p in parts], axis=1), xp.concatenate([p[1] for p in parts], axis=1),
                sum(p[2] for p in parts))

    def prior_rows(self, r: np.ndarray) -> np.ndarray:
        r""":math:`k(x_n, x_n) = \sum_c \kappa_c(1) r_{c,n}^2` from the radii ``(N, C)``."""
        return (r * r) @ self.at_one()

    # ---- values ---------------------------------------------------------------------------
    def at_one(self) -> np.ndarray:
        r""":math:`\kappa_c(1)` per component, ``(C,)``."""
        return np.array([k.at_one() for k in self.components])

    def at_one_vjp(self, dv: Any) -> dict[str, float]:
        r"""Chain :math:`\partial L/\partial\kappa_c(1)` ``(C,)`` into the spectral parameters."""
        out = {}
        for i, k in enumerate(self.components):
            out.update({f"c{i}_{p}": float(dv[i]) * g for p, g in k.at_one_gradients().items()})
        return out

    def top_degree(self) -> int | None:
        tops = [k.top_degree() for k in self.components]
        return None if any(t is None for t in tops) else max(tops)

    def K(self, X: Any, X2: Any = None, *, ops="cpu") -> np.ndarray:
        r"""Gram matrix :math:`\sum_c k_c(X_{g_c}, X2_{g_c})`, ``(N, N2)``."""
        X = self._columns(X)
        X2 = None if X2 is None else self._columns(X2, "X2")
        out = None
        for k, g in zip(self.components, self.groups):
            part = k.K(X[:, list(g)], None if X2 is None else X2[:, list(g)], ops=ops)
            out = part if out is None else out + part
        return out

    __call__ = K

    def diag(self, X: Any) -> np.ndarray:
        r""":math:`k(x, x)`, ``(N,)``."""
        return self.prior_rows(self.lift(X)[0])

    def gradients(self, dL_dK: Any, X: Any, X2: Any = None, *, ops="cpu") -> dict[str, Any]:
        """Chain :math:`\\partial L/\\partial K` into every component's hyper-parameters."""
        return self.gradients_with_inputs(dL_dK, X, X2, ops=ops)[0]

    def gradients_with_inputs(self, dL_dK: Any, X: Any, X2: Any = None, *, ops="cpu"):
        """:meth:`gradients` with :math:`\\partial L/\\partial X` and :math:`\\partial L/\\partial X_2`
        (``None`` for ``X2=None``, as :meth:`ZonalKernel.gradients_with_inputs`)."""
        X = self._columns(X)
        X2 = None if X2 is None else self._columns(X2, "X2")
        out: dict[str, Any] = {}
        dX = np.zeros(X.shape)
        dX2 = None if X2 is None else np.zeros(X2.shape)
        for i, (k, g) in enumerate(zip(self.components, self.groups)):
            cols = list(g)
            grads, d1, d2 = k.gradients_with_inputs(dL_dK, X[:, cols], None if X2 is None else X2[:, cols], ops=ops)
            out.update(self._prefixed(i, grads))
            dX[:, cols] += d1
            if dX2 is not None:
                dX2[:, cols] += d2
        return out, dX, dX2

    def diag_gradients(self, dL_ddiag: Any, X: Any) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial k(x_n, x_n)` into every component."""
        X = self._columns(X)
        out = {}
        for i, (k, g) in enumerate(zip(self.components, self.groups)):
            out.update(self._prefixed(i, k.diag_gradients(dL_ddiag, X[:, list(g)])))
        return out

    # ---- persistence ----------------------------------------------------------------------
    def _save_state(self) -> dict[str, Any]:
        return {"components": list(self.components), "groups": [list(g) for g in self.groups]}

    @classmethod
    def _load_state(cls, state):
        return cls(**state.kwargs())

    def cache_key(self) -> tuple:
        return ("Additive", tuple(k.cache_key() for k in self.components), self.groups)

    def __repr__(self) -> str:
        parts = ", ".join(f"{list(g)}: {k!r}" for k, g in zip(self.components, self.groups))
        return f"Additive({{{parts}}})"
