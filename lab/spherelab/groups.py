r"""Finite cyclic transformation groups of the input space and the harmonic kernel
decomposition (Sun et al. 2021, §3).

A transformation :math:`G` is T-cyclic if :math:`G^T = \mathrm{id}`. For a kernel invariant under
G, :math:`k(Gx, Gx') = k(x, x')`, the *kernel Fourier series* along the orbit of the second input,

.. math:: k_t(x, x') = \sum_{s=0}^{T-1} F_{t,s}\,k(x, G^s x'), \qquad
          F_{t,s} = \tfrac1T e^{-i2\pi ts/T}

(Sun et al. 2021 eq. 5), splits k into T Hermitian positive semi-definite kernels with
:math:`\sum_t k_t = k`, mutually orthogonal RKHSs and the shift property
:math:`k_t(x, Gx') = e^{i2\pi t/T}k_t(x, x')` (Prop. 3.3). The real form pairs
:math:`k_t + k_{T-t} = \tfrac2T\sum_s\cos(2\pi ts/T)\,k(x, G^sx')` (§3.4). Commuting generators
:math:`G_1..G_J` of orders :math:`T_1..T_J` give the multi-way decomposition indexed by
:math:`t = (t_1..t_J)` with :math:`\prod_j F^{(j)}_{t_j,s_j}` (§3.5).

Our kernels act in data space through the lift :math:`\tilde x = [x/s, b]`:
:math:`k = r r'\kappa(\hat x^\top\hat x')` depends on the data only through :math:`\tilde x^\top\tilde x'`,
so it is invariant under any orthogonal map of the data coordinates that commutes with the
input scaling :math:`\mathrm{diag}(1/s)` — coordinate reflections always; rotations of a
coordinate plane (or reflections in a rotated basis) when the scales involved are equal.
:meth:`Group.check_invariance` enforces this.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from ._listing import own_names
from ._state import Fields, Saveable
from ._validation import check_finite_array, check_int
from .backend.ops import Operations
from .kernels import Parity, ZonalKernel

__all__ = ["Group", "Reflection", "Rotation", "Product", "Antipodal", "HarmonicComponent", "harmonic_decomposition"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports


class Group(Saveable):
    r"""A product of commuting cyclic transformations of :math:`\mathbb R^D`, each an orthogonal
    matrix :math:`R_j` with :math:`R_j^{T_j} = I` (subclasses build them)."""

    #: the generators are built from each subclass's saved fields (its constructor's arguments)
    fields = Fields(transient=("dim", "generators", "orders"), cache={"powers=_powers": ("generators",)})

    def __init__(self, generators: Sequence[np.ndarray], orders: Sequence[int], dim: int) -> None:
        self.dim = check_int(dim, "dim", minimum=1)
        self.generators = [np.asarray(R, dtype=np.float64) for R in generators]
        self.orders = tuple(int(T) for T in orders)
        for R, T in zip(self.generators, self.orders):
            if R.shape != (self.dim, self.dim) or not np.allclose(R @ R.T, np.eye(self.dim), atol=1e-12):
                raise ValueError("every generator must be an orthogonal (dim, dim) matrix")
            if not np.allclose(np.linalg.matrix_power(R, T), np.eye(self.dim), atol=1e-10):
                raise ValueError(f"a generator is not {T}-cyclic (R^{T} != I)")
        for A, B in itertools.combinations(self.generators, 2):
            if not np.allclose(A @ B, B @ A, atol=1e-12):
                raise ValueError("the generators must commute (Sun et al. 2021 eq. 16)")

    @property
    def size(self) -> int:
        """:math:`|G| = \\prod_j T_j`, the number of components of the decomposition."""
        return int(np.prod(self.orders)) if self.orders else 1

    def indices(self) -> list[tuple[int, ...]]:
        """All multi-indices :math:`(t_1..t_J)` in lexicographic order."""
        return list(itertools.product(*[range(T) for T in self.orders]))

    def matrix(self, s: Sequence[int]) -> np.ndarray:
        """:math:`G^s = \\prod_j R_j^{s_j}`, ``(D, D)`` (cached; read-only)."""
        key = tuple(int(k) % T for k, T in zip(s, self.orders))
        cache = self.fields.cached(self, "powers", dict)
        if key not in cache:
            out = np.eye(self.dim)
            for R, k in zip(self.generators, key):
                out = out @ np.linalg.matrix_power(R, k)
            out.setflags(write=False)
            cache[key] = out
        return cache[key]

    def apply(self, X: Any, s: Sequence[int]) -> np.ndarray:
        """:math:`G^s` applied to every row of ``X`` ``(N, D)``."""
        X = check_finite_array(X, "X", ndim=2)
        if X.shape[1] != self.dim:
            raise ValueError(f"X must have {self.dim} columns for this group, got {X.shape[1]}")
        return X @ self.matrix(s).T

    def check_invariance(self, kernel: ZonalKernel) -> None:
        """Raise ``ValueError`` unless every generator commutes with the kernel's input scaling
        (then :math:`k(Gx, Gx') = k(x, x')` exactly)."""
        scale = np.broadcast_to(np.asarray(kernel.input_scale, dtype=np.float64), (self.dim,))
        S = np.diag(1.0 / scale)
        for R in self.generators:
            if not np.allclose(R @ S, S @ R, rtol=1e-12, atol=1e-12):
                raise ValueError(
                    "the kernel is not invariant under this group: a generator mixes input "
                    "coordinates with different input_scale values; use equal scales on the "
                    "coordinates it mixes (e.g. a scalar input_scale)"
                )


class Reflection(Group):
    r"""Negation of chosen coordinate groups, each an independent 2-cyclic generator
    (multi-way, :math:`2^J` components).

    Parameters
    ----------
    dim
        D, the number of inputs.
    groups
        Sequence of coordinate-index lists; generator j negates the coordinates ``groups[j]``
        (default: each coordinate on its own).
    basis
        Optional ``(D, D)`` orthogonal matrix (e.g. the data's PCA axes as columns): the
        negations act on the coordinates ``basis.T @ x``.
    """

    fields = Group.fields + Fields(config=("dim", "groups", "basis"))

    def __init__(self, dim: int, groups: Sequence[Sequence[int]] | None = None, basis: Any = None) -> None:
        dim = check_int(dim, "dim", minimum=1)
        try:
            groups = [[j] for j in range(dim)] if groups is None else [
                [check_int(j, "groups") for j in g] for g in groups]
        except TypeError:
            raise TypeError(f"groups must be lists of coordinate indices (integers), got {groups!r}") from None
        Q = np.eye(dim) if basis is None else check_finite_array(basis, "basis", ndim=2)
        if Q.shape != (dim, dim) or not np.allclose(Q.T @ Q, np.eye(dim), atol=1e-10):
            raise ValueError("basis must be an orthogonal (dim, dim) matrix (columns: the axes)")
        gens = []
        seen: set[int] = set()
        for g in groups:
            if not g or any(not 0 <= j < dim for j in g) or seen & set(g):
                raise ValueError(f"groups must be disjoint, non-empty lists of indices in [0, {dim}), got {groups}")
            seen |= set(g)
            D = np.ones(dim)
            D[g] = -1.0
            gens.append(Q @ np.diag(D) @ Q.T)
        self.groups, self.basis = groups, Q
        super().__init__(gens, [2] * len(gens), dim)


    @classmethod
    def pca(cls, X: Any, num_axes: int | None = None) -> "Reflection":
        """Reflections along the leading ``num_axes`` principal axes of ``X`` (centred), one
        generator each (default: all axes)."""
        X = check_finite_array(X, "X", ndim=2)
        Xc = X - X.mean(0)
        _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
        D = X.shape[1]
        k = D if num_axes is None else check_int(num_axes, "num_axes", minimum=1)
        Q = Vt.T if Vt.shape[0] == D else np.linalg.qr(np.c_[Vt.T, np.eye(D)])[0][:, :D]
        return cls(D, [[j] for j in range(min(k, D))], basis=Q)


class Rotation(Group):
    r"""Rotation by :math:`2\pi/T` in the plane of coordinates ``plane = (i, j)`` (T-cyclic)."""

    fields = Group.fields + Fields(config=("dim", "T", "plane"))

    def __init__(self, dim: int, T: int, plane: tuple[int, int] = (0, 1)) -> None:
        dim = check_int(dim, "dim", minimum=2)
        T = check_int(T, "T", minimum=1)
        if isinstance(plane, (str, bytes)) or not hasattr(plane, "__len__") or len(plane) != 2:
            raise TypeError(f"plane must be two distinct coordinates (i, j), got {plane!r}")
        i, j = (check_int(p, "plane") for p in plane)
        if i == j or not (0 <= i < dim and 0 <= j < dim):
            raise ValueError(f"plane must be two distinct coordinates in [0, {dim}), got {plane}")
        R = np.eye(dim)
        c, s = np.cos(2 * np.pi / T), np.sin(2 * np.pi / T)
        R[i, i], R[i, j], R[j, i], R[j, j] = c, -s, s, c
        self.T, self.plane = T, (i, j)
        super().__init__([R], [T], dim)



class Product(Group):
    """The multi-way product of commuting groups (Sun et al. 2021 §3.5): generators concatenated."""

    fields = Group.fields + Fields(config=("groups=factors",))

    def __init__(self, *groups: Group) -> None:
        if not groups:
            raise ValueError("Product needs at least one group")
        dim = groups[0].dim
        if any(g.dim != dim for g in groups):
            raise ValueError("all groups must act on the same number of inputs")
        self.factors = list(groups)
        super().__init__([R for g in groups for R in g.generators], [T for g in groups for T in g.orders], dim)

    @classmethod
    def _load_state(cls, state):
        groups = state.value("groups")
        if not isinstance(groups, list) or not groups or not all(isinstance(g, Group) for g in groups):
            raise state.fail("groups", "a non-empty list of saved groups", groups)
        return cls(*groups)


class Antipodal(Saveable):
    r"""The antipodal map :math:`\hat x \mapsto -\hat x` of the sphere (T = 2), acting on the
    lifted points :math:`\hat x` of :math:`\tilde x = [x/s, b]`: every zonal kernel is invariant,
    and its two components are the even- and odd-degree parts
    (:class:`~spherelab.kernels.Parity`). Unlike :class:`Group` it has no data-space matrix when
    the bias is positive."""

    orders = (2,)
    size = 2
    fields = Fields()

    def check_invariance(self, kernel: ZonalKernel) -> None:
        """Always invariant (zonal kernels are invariant under every orthogonal map of the sphere)."""

    def __repr__(self) -> str:
        return "Antipodal()"


class HarmonicComponent:
    r"""One component :math:`k_t` of the harmonic kernel decomposition (or, with
    ``real=True``, the real pair :math:`k_t + k_{-t}`), callable like a kernel:
    ``k_t(X, X2)`` returns ``(N, N2)`` (complex unless real).

    Parameters
    ----------
    kernel, group
        The base kernel (must be invariant, :meth:`Group.check_invariance`) and the group.
    index
        The multi-index :math:`t`.
    real
        Return the real form :math:`k_t + k_{-t}` (just :math:`k_t` when :math:`t = -t`).
    """

    def __init__(self, kernel: ZonalKernel, group: Group, index: Sequence[int], real: bool = True) -> None:
        group.check_invariance(kernel)
        self.kernel, self.group = kernel, group
        self.index = tuple(int(t) % T for t, T in zip(index, group.orders))
        if len(self.index) != len(group.orders):
            raise ValueError(f"index must have {len(group.orders)} entries")
        self.real = bool(real)
        self.partner = tuple((-t) % T for t, T in zip(self.index, group.orders))

    def _phase(self, s: Sequence[int]) -> float:
        return 2.0 * np.pi * sum(t * k / T for t, k, T in zip(self.index, s, self.group.orders))

    def weights(self) -> tuple[list[tuple[int, ...]], np.ndarray]:
        r"""The orbit elements :math:`s` and the weights :math:`w_s` of
        :math:`k_t(x, x') = \sum_s w_s\,k(x, G^s x')` (real or complex); terms whose weight
        vanishes (e.g. :math:`\cos(\pi s/2)` at odd s for a quarter-turn pair) are left out, so
        they cost no kernel evaluation. The identity :math:`s = 0` always comes first."""
        n = self.group.size
        idx = self.group.indices()
        phase = np.array([self._phase(s) for s in idx])
        if self.real:
            w = (1.0 if self.partner == self.index else 2.0) * np.cos(phase) / n
        else:
            w = np.exp(-1j * phase) / n
        keep = np.abs(w) > 1e-13 * np.abs(w).max()
        return [s for s, k in zip(idx, keep) if k], w[keep]

    def _stack(self, X: np.ndarray, idx) -> np.ndarray:
        # k(x, G^s x') = k(G^-s x, x'): transform the (few) rows of X, not the columns
        return np.concatenate([X @ self.group.matrix(s) for s in idx], axis=0)

    def K(self, X: Any, X2: Any = None, *, ops: Operations | str = "cpu") -> np.ndarray:
        """``(N, N2)`` values of the component (``X2=None``: ``k_t(X, X)``, exact on the diagonal),
        the kernel's values computed by ``ops``."""
        X = check_finite_array(X, "X", ndim=2)
        idx, w = self.weights()
        n = X.shape[0]
        if X2 is None:
            # the s = 0 term in the kernel's own symmetric mode (t = 1 exactly on the diagonal)
            out = w[0] * self.kernel.K(X, ops=ops)
            if len(idx) > 1:
                Ks = self.kernel.K(self._stack(X, idx[1:]), X, ops=ops).reshape(len(idx) - 1, n, n)
                out = out + np.tensordot(w[1:], Ks, axes=1)
            return out
        X2 = check_finite_array(X2, "X2", ndim=2)
        Ks = self.kernel.K(self._stack(X, idx), X2, ops=ops).reshape(len(idx), n, X2.shape[0])
        return np.tensordot(w, Ks, axes=1)

    def diag(self, X: Any) -> np.ndarray:
        r""":math:`k_t(x, x) = \sum_s w_s k(x, G^s x)`, ``(N,)``."""
        X = check_finite_array(X, "X", ndim=2)
        idx, w = self.weights()
        r, U = self.kernel.lift(X)
        out = w[0] * r * r * self.kernel.at_one()
        for ws, s in zip(w[1:], idx[1:]):
            r2, U2 = self.kernel.lift(self.group.apply(X, s))
            out = out + ws * r * r2 * self.kernel.shape(np.clip(np.einsum("ij,ij->i", U, U2), -1.0, 1.0))
        return out

    def gradients_with_inputs(self, dL_dK: Any, X: Any, X2: Any = None, *,
                              ops: Operations | str = "cpu") -> tuple[dict[str, Any], np.ndarray, Any]:
        r"""Chain :math:`\partial L/\partial K_t` (real form only) into the base kernel's
        hyper-parameters and both inputs, as
        :meth:`~spherelab.kernels.ZonalKernel.gradients_with_inputs` does:
        :math:`\partial L/\partial k(G^{-s}X, X_2) = w_s\,\partial L/\partial K_t`, and the rows
        :math:`G^{-s}x` chain back by :math:`(G^{-s})^\top`.

        Returns
        -------
        (dict, dX ``(N, D)``, dX2 ``(N2, D)`` or ``None`` when ``X2`` is ``None``)
        """
        if not self.real:
            raise NotImplementedError("gradients are implemented for the real form (real=True)")
        X = check_finite_array(X, "X", ndim=2)
        G = check_finite_array(dL_dK, "dL_dK", ndim=2)
        idx, w = self.weights()
        same = X2 is None
        X2 = X if same else check_finite_array(X2, "X2", ndim=2)
        if G.shape != (X.shape[0], X2.shape[0]):
            raise ValueError(f"dL_dK must have shape {(X.shape[0], X2.shape[0])}, got {G.shape}")
        rest = idx[1:] if same else idx
        wr = w[1:] if same else w
        hyp: dict[str, Any] = {}
        dX = np.zeros_like(X)
        dX2 = np.zeros_like(X2)
        if same:
            hyp, dX, _ = self.kernel.gradients_with_inputs(w[0] * G, X, ops=ops)
        if rest:
            Gs = np.concatenate([ws * G for ws in wr], axis=0)
            h, dXs, dX2 = self.kernel.gradients_with_inputs(Gs, self._stack(X, rest), X2, ops=ops)
            n = X.shape[0]
            for j, s in enumerate(rest):
                dX = dX + dXs[j * n : (j + 1) * n] @ self.group.matrix(s).T
            hyp = h if not hyp else {k: hyp[k] + h[k] for k in hyp}
        if same:
            return hyp, dX + dX2, None
        return hyp, dX, dX2

    __call__ = K

    def __repr__(self) -> str:
        form = "real pair" if self.real and self.partner != self.index else "component"
        return f"HarmonicComponent(t={self.index}, {form}, kernel={self.kernel!r})"


def harmonic_decomposition(kernel: ZonalKernel, group: Group, real: bool = True) -> list[HarmonicComponent]:
    r"""The harmonic kernel decomposition :math:`k = \sum_t k_t` (Sun et al. 2021 Thm. 3.5).

    With ``real=True`` the components are the real pairs :math:`k_t + k_{-t}`, one per class
    :math:`\{t, -t\}` (:math:`\lfloor T/2\rfloor + 1` for a single T-cyclic generator); with
    ``real=False`` all :math:`|G|` complex Hermitian components.

    With :class:`Antipodal` the components are the even- and odd-degree parts of the kernel
    (:class:`~spherelab.kernels.Parity`, ordinary kernels).

    Returns
    -------
    list of :class:`HarmonicComponent` (or :class:`~spherelab.kernels.Parity`), each callable as
    ``k_t(X, X2)``.
    """
    if not isinstance(kernel, ZonalKernel):
        raise TypeError(f"kernel must be a spherelab kernel, got {kernel!r}")
    if isinstance(group, Antipodal):
        return [Parity(kernel, even=True), Parity(kernel, even=False)]
    if not isinstance(group, Group):
        raise TypeError(f"group must be a spherelab.groups.Group or Antipodal, got {group!r}")
    group.check_invariance(kernel)
    comps, seen = [], set()
    for t in group.indices():
        if real:
            partner = tuple((-a) % T for a, T in zip(t, group.orders))
            if partner in seen:
                continue
            seen.add(t)
        comps.append(HarmonicComponent(kernel, group, t, real=real))
    return comps
