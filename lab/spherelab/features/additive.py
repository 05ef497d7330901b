r"""Spherical-harmonic features of an additive kernel (:class:`~spherelab.kernels.Additive`):
every harmonic up to degree :math:`L_c` on each component's sphere.

Component c's features :math:`u_{c,m} = \langle f_c, \phi_{c,m}\rangle_{\mathcal H_c}` have
:math:`[K_{uf}]_{(c,m),n} = r_{c,n}\,\phi_{c,m}(\hat x_{c,n})` and prior variance
:math:`\lambda_{c,\ell(m)}`, and are uncorrelated with every other component's features (the
components are independent GPs), so :math:`K_{uu} = \mathrm{diag}(1/\lambda)` over the stacked
features and VISH's collapsed bound applies unchanged, at a cost linear in the number of
components (Dutordoir et al. 2020, §3, applied per component; the additive structure: Duvenaud,
Nickisch & Rasmussen 2011). With every harmonic of a truncated spectrum per component the model
is the exact GP with the sum kernel.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .._state import Fields
from .._validation import check_finite_array, check_int
from ..backend.ops import Operations
from .harmonic import Evaluation, HarmonicFeatures, SphericalFeatures

__all__ = ["AdditiveHarmonics"]


def _additive(kernel):
    from ..kernels.additive import Additive

    if not isinstance(kernel, Additive):
        raise TypeError(f"AdditiveHarmonics need an additive kernel (spherelab.kernels.Additive), got {kernel!r}")
    return kernel


class AdditiveHarmonics(SphericalFeatures):
    r"""Every spherical harmonic of degree :math:`0..L_c` on each component's sphere (module docstring).

    Parameters
    ----------
    degrees
        :math:`L_c`: one int for every component, or one per component.

    Examples
    --------
    >>> import spherelab as sl
    >>> X, y = sl.datasets.synthetic_regression(200, 2, seed=0)
    >>> k = sl.kernels.Additive.from_groups(sl.kernels.Matern(1.5), [0, 1, (0, 1)])
    >>> m = sl.VISH(k, features=sl.features.AdditiveHarmonics([6, 6, 3]))
    >>> with sl.models.capped(): m = m.fit(X, y)
    >>> m.features.num_features        # 13 + 13 on the circles, 16 on S^2
    42
    """

    fields = Fields(config=("degrees=degrees_given", "inputs=_inputs"), fitted=("parts",))

    def __init__(self, degrees: int | Sequence[int], inputs: int | None = None) -> None:
        if isinstance(degrees, (int, np.integer)) and not isinstance(degrees, bool):
            self.degrees_given: int | tuple[int, ...] = check_int(degrees, "degrees", minimum=0)
        else:
            if isinstance(degrees, (str, bytes)) or not hasattr(degrees, "__iter__"):
                raise TypeError(f"degrees must be an int or a sequence of ints (one per component), got {degrees!r}")
            self.degrees_given = tuple(check_int(L, f"degrees[{i}]", minimum=0) for i, L in enumerate(degrees))
            if not self.degrees_given:
                raise ValueError("degrees is empty: give one degree per component")
        self.parts: list[HarmonicFeatures] | None = None
        self._inputs: int | None = None if inputs is None else check_int(inputs, "inputs", minimum=1)

    @classmethod
    def _load_state(cls, state):
        degrees = state.value("degrees")
        features = cls(list(degrees) if isinstance(degrees, (list, tuple)) else degrees,
                       state.int("inputs", minimum=1, optional=True))
        parts = state.value("parts")
        if parts is not None:
            if not isinstance(parts, list) or not all(isinstance(p, HarmonicFeatures) and p.harmonics is not None
                                                      for p in parts):
                raise state.fail("parts", "a list of initialised HarmonicFeatures, or null")
            if features._inputs is None:
                raise state.fail("inputs", "the inputs' count of built parts")
            if isinstance(features.degrees_given, tuple) and len(parts) != len(features.degrees_given):
                raise state.fail("parts", f"{len(features.degrees_given)} parts, one per degree")
            if [p.max_degree for p in parts] != list(features._each(len(parts))):
                raise state.fail("parts", f"parts of degrees {list(features._each(len(parts)))}")
            features.parts = parts
        return features

    def _each(self, count: int) -> tuple[int, ...]:
        d = self.degrees_given
        if isinstance(d, int):
            return (d,) * count
        if len(d) != count:
            raise ValueError(f"degrees has {len(d)} entries but the additive kernel has {count} components")
        return d

    # ---- building -------------------------------------------------------------------------
    def initialise(self, dim: int, rng: Any = None) -> None:
        """Record the inputs' count (d = inputs + 1); the parts are built by :meth:`bind`."""
        if self._inputs != dim - 1:
            self._inputs, self.parts = dim - 1, None

    def bind(self, kernel) -> None:
        """Build (or keep) one :class:`HarmonicFeatures` per component and bind each to its kernel."""
        kernel = _additive(kernel)
        if self._inputs is not None and self._inputs < kernel.min_columns:
            raise ValueError(f"the data have {self._inputs} columns but the additive kernel's groups use column "
                             f"{kernel.min_columns - 1}")
        degrees = self._each(kernel.num_components)
        if self.parts is None or [p.dim for p in self.parts] != list(kernel.dims) \
                or [p.max_degree for p in self.parts] != list(degrees):
            self.parts = [HarmonicFeatures(L, dim=d) for L, d in zip(degrees, kernel.dims)]
        for p, k in zip(self.parts, kernel.components):
            p.bind(k)

    def _ready(self) -> list[HarmonicFeatures]:
        if self.parts is None:
            raise RuntimeError("AdditiveHarmonics are built from their additive kernel: let a model bind them "
                               "(VISH(kernel, features=...).fit), or call bind(kernel)")
        return self.parts

    # ---- sizes ----------------------------------------------------------------------------
    @property
    def max_degree(self) -> int:  # type: ignore[override]
        d = self.degrees_given
        return d if isinstance(d, int) else max(d)

    @property
    def dim(self) -> int:  # type: ignore[override]
        if self._inputs is None:
            raise RuntimeError("AdditiveHarmonics learn the inputs' count from the data: fit a model first")
        return self._inputs + 1

    def _blocks(self) -> list[tuple[int, int]]:
        """Each part's ``[start, stop)`` among all functions (kept or not)."""
        sizes = np.cumsum([0] + [p.all_degrees.size for p in self._ready()])
        return list(zip(sizes[:-1], sizes[1:]))

    @property
    def all_degrees(self) -> np.ndarray:
        return np.concatenate([p.all_degrees for p in self._ready()])

    @property
    def kept(self) -> np.ndarray:  # type: ignore[override]
        return np.concatenate([a + np.arange(p.all_degrees.size)[p.kept]
                               for p, (a, _) in zip(self._ready(), self._blocks())])

    @property
    def num_features(self) -> int:
        return sum(p.num_features for p in self._ready())

    @property
    def degrees(self) -> np.ndarray:
        return np.concatenate([p.degrees for p in self._ready()])

    @property
    def components(self) -> np.ndarray:
        """The component of each kept feature, ``(M,)``."""
        return np.concatenate([np.full(p.num_features, i) for i, p in enumerate(self._ready())])

    def component_slices(self) -> list[slice]:
        """Each component's kept features among all, in order: ``model.features.Kuf(...)[s]`` is component
        c's block for ``s = component_slices()[c]``."""
        sizes = np.cumsum([0] + [p.num_features for p in self._ready()])
        return [slice(a, b) for a, b in zip(sizes[:-1], sizes[1:])]

    def spans(self, kernel) -> bool:
        kernel = _additive(kernel)
        return all(p.spans(k) for p, k in zip(self._ready(), kernel.components))

    # ---- the protocol ---------------------------------------------------------------------
    def Kuu_inverse_diag(self, kernel) -> np.ndarray:
        kernel = _additive(kernel)
        return np.concatenate([p.Kuu_inverse_diag(k) for p, k in zip(self._ready(), kernel.components)])

    def spectrum_vjp(self, kernel, dlam: np.ndarray, dv: Any = 0.0) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial\lambda_m` ``(M,)`` and :math:`\partial L/\partial\kappa_c(1)`
        (``(C,)``) into every component's spectral hyper-parameters."""
        kernel = _additive(kernel)
        dv = np.broadcast_to(np.asarray(dv, dtype=np.float64), (kernel.num_components,))
        out: dict[str, Any] = {}
        for i, (p, k, s) in enumerate(zip(self._ready(), kernel.components, self.component_slices())):
            g = p.spectrum_vjp(k, dlam[s], float(dv[i]))
            out.update({f"c{i}_{name}": v for name, v in g.items()})
        return out

    def Kuu_gradients(self, kernel, G: np.ndarray, *, ops: Operations | str = "cpu") -> dict[str, Any]:
        lam = self.Kuu_inverse_diag(kernel)
        return self.spectrum_vjp(kernel, -np.diag(G) / lam ** 2)

    def evaluate(self, kernel, X: Any, *, ops: Operations | str = "cpu") -> Evaluation:
        """Lift ``X`` ``(N, D)`` onto every component's sphere and evaluate every function: radii
        ``(N, C)``, unit points ``(N, sum_c d_c)``, values ``(N, M_all)``."""
        kernel = _additive(kernel)
        X = check_finite_array(X, "X", ndim=2)
        if self._inputs is not None and X.shape[1] != self._inputs:
            raise ValueError(f"X has {X.shape[1]} columns but the features were built for {self._inputs}")
        r, Xh = kernel.lift(X)
        o = kernel.offsets
        values = np.concatenate([p.unit_values(Xh[:, o[i]:o[i + 1]], ops=ops) for i, p in enumerate(self._ready())],
                                axis=1)
        return Evaluation(X, r, Xh, values)

    def _radii(self, r: np.ndarray) -> np.ndarray:
        """Each kept feature's radius, ``(N, M)``."""
        return r[:, self.components]

    def Kuf_from(self, ev: Evaluation) -> np.ndarray:
        return (ev.values[:, self.kept] * self._radii(ev.r)).T

    def columns_into(self, ev: Evaluation, a: int, b: int, out: np.ndarray) -> None:
        np.multiply(ev.values[a:b, self.kept], self._radii(ev.r[a:b]), out=out)

    def device_Kuf(self, ops, Xh: Any, r: Any) -> Any:
        """The stacked parts' :meth:`HarmonicFeatures.device_Kuf`, on ``ops``' device."""
        xp, blocks = ops.array_namespace(), self._ready()
        o = np.concatenate([[0], np.cumsum([p.dim for p in blocks])])
        # (a device's kernels take contiguous rows: each component's columns are copied out)
        return xp.concatenate([p.device_Kuf(ops, xp.ascontiguousarray(Xh[:, o[i]:o[i + 1]]),
                                            xp.ascontiguousarray(r[:, i])) for i, p in enumerate(blocks)], axis=0)

    def Kuf_gradients(self, kernel, G: np.ndarray, X: Any, evaluation: Evaluation | None = None, *,
                      ops: Operations | str = "cpu") -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial K_{uf}` ``(M, N)`` into the inputs and every
        component's lift (each part's own chain on its columns, keys ``c{i}_bias``, ``c{i}_input_scale``)."""
        kernel = _additive(kernel)
        ev = self.evaluate(kernel, X, ops=ops) if evaluation is None else evaluation
        o, G = kernel.offsets, np.asarray(G)
        out: dict[str, Any] = {"X": np.zeros(ev.X.shape)}
        for i, (p, k, g, s, (a, b)) in enumerate(zip(self._ready(), kernel.components, kernel.groups,
                                                     self.component_slices(), self._blocks())):
            cols = list(g)
            sub = Evaluation(ev.X[:, cols], ev.r[:, i], ev.Xh[:, o[i]:o[i + 1]], ev.values[:, a:b])
            part = p.Kuf_gradients(k, G[s], sub.X, sub, ops=ops)
            out["X"][:, cols] += part.pop("X")
            out.update({f"c{i}_{name}": v for name, v in part.items()})
        return out

    def has_device_columns(self, kernel) -> bool:
        return False

    def __repr__(self) -> str:
        return f"AdditiveHarmonics(degrees={self.degrees_given!r})"
