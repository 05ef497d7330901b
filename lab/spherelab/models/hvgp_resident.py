r"""HVGP's blocks resident on a device (:class:`~spherelab.HarmonicSVGP`, Gaussian likelihood).

Sun et al. (2021, §4.2) give each component of the harmonic kernel decomposition its own block of
inducing variables, independent a posteriori. With :math:`L_J = \mathrm{blockdiag}(L_{k,c})`,
:math:`L_{k,c} = \mathrm{chol}\,k_c(Z_c, Z_c)`, the whitened block-independent posterior is the
whitened SVGP on the stacked :math:`u = [u_1; \dots; u_C]` with a block-diagonal :math:`L`, so its
Gaussian bound depends on the rows only through :math:`\Phi = AA^\top` and :math:`\beta = Ay`,
:math:`A = L_J^{-1}K_{uf}` (:func:`~spherelab.bounds.gaussian_stats_bound_whitened` with K = 0; its
derivatives by :math:`L` and :math:`K_{uu}` are read on the diagonal blocks).

On a device other than the CPU the rows are copied there once per fit
(:class:`~spherelab.models.decoupled_resident.ResidentRows`); every block's columns come from one
kernel launch at all the blocks' orbit points (:class:`~spherelab.features.device_columns.OrbitColumns`).
An evaluation sends :math:`L_J` and the orbit points, copies back :math:`\Phi`, :math:`\beta` and two
numbers, runs the :math:`O(M^3)` bound on the host, sends its two P-sized derivatives and copies back
the rows' gradient sums: two copies back, nothing of size N.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np
from scipy.linalg import block_diag, solve_triangular

from ..bounds.decoupled import gaussian_stats_bound_whitened
from ..bounds.sums import GradientSums
from ..features.device_columns import OrbitColumns
from ..groups import Group
from ..likelihoods import Gaussian
from ..linalg import inverse_factor
from .decoupled_resident import ResidentRows

__all__ = ["DeviceBlocks"]


class DeviceBlocks:
    """The device's evaluation of :class:`~spherelab.HarmonicSVGP` (a mixin: the model's hooks for
    :class:`~spherelab.models.decoupled_resident.ResidentRows` and the evaluation itself)."""

    #: the most entries (rows x orbit points) of a pass's columns kept for its backward pass
    keep_entries = 1 << 24
    _held: tuple | None = None

    def _on_device(self) -> bool:
        """Whether evaluations run on the model's device: a device other than the CPU, a Gaussian
        likelihood, a kernel with a compiled shape (the orbit columns are the kernel's own) and a
        group acting on the inputs (:class:`~spherelab.groups.Antipodal`'s even and odd parts are
        spectral, not orbit sums of the inputs)."""
        return (self.ops.device != "cpu" and isinstance(self.likelihood, Gaussian)
                and self.kernel.fused_code() is not None and isinstance(self.group, Group))

    def column_width(self) -> int:
        """Orbit points over all blocks (the widest of a device chunk's temporaries)."""
        return int(sum(len(comp.weights()[0]) * m for comp, m in zip(self.components, self.sizes)))

    def column_blocks(self) -> list:
        """One :class:`~spherelab.features.device_columns.OrbitColumns` at the current inputs."""
        return [OrbitColumns(self.components, self.Z, self.kernel, self.ops)]

    def column_parameters(self, own: dict) -> np.ndarray:
        """The rows' gradient of the stacked inducing inputs ``(M, D)``."""
        return own["Z"]

    @contextlib.contextmanager
    def holding_rows(self, X, y) -> Iterator[None]:
        """A fit's rows copied to the device once, on entry, and used by every evaluation on them."""
        self._held = (X, y, ResidentRows(self, X, np.asarray(y, dtype=np.float64)) if self._on_device() else None)
        try:
            yield
        finally:
            self._held = None

    def _device_rows(self, X, y) -> ResidentRows:
        held = self._held
        if held is not None and held[2] is not None and held[0] is X and held[1] is y:
            return held[2]
        return ResidentRows(self, X, np.asarray(y, dtype=np.float64))

    def _device_elbo_and_gradient(self, X, y, num_data: int, collapsed: bool = False) -> tuple[float, dict[str, Any]]:
        r"""The bound on rows ``(X, y)`` and its gradient, every parameter (the dict of
        :meth:`~spherelab.HarmonicSVGP.elbo_and_gradient`); ``collapsed``: at the optimal q for
        the other parameters, which it also sets (:meth:`~spherelab.HarmonicSVGP.optimal_q`)."""
        rows = self._device_rows(X, y)
        Lks = self._factors()  # each block's factor, with its jitter and its error, on the host
        LJ = block_diag(*Lks)
        st = rows.statistics(self, LJ)
        offs = np.cumsum([0, *self.sizes])
        blocks = [slice(a, b) for a, b in zip(offs[:-1], offs[1:])]
        M, s2 = LJ.shape[0], self.likelihood.variance
        if collapsed:
            Lam = np.eye(M) + st.G / s2
            mu = np.linalg.solve(Lam, st.c / s2)
            self.ms = [mu[b].copy() for b in blocks]
            self.Ls = [inverse_factor(Lam[b, b]) for b in blocks]
        Lu = block_diag(*[np.tril(L) for L in self.Ls])
        res = gaussian_stats_bound_whitened(LJ, M, st.G, st.c, st.sum_diag, st.yy, X.shape[0],
                                            np.concatenate(self.ms), Lu, np.zeros(0), np.zeros((0, 0)), s2,
                                            num_data)
        Q = 2.0 * solve_triangular(LJ, res.dPhi, lower=True, trans=1)
        qb = solve_triangular(LJ, res.dbeta, lower=True, trans=1)
        sums, dZ_rows, _ = rows.row_sums(self, LJ, Q, qb, res.dkff)
        acc = GradientSums.for_kernel(self.kernel)
        acc.add(sums)
        dZ = []
        for b, comp, Z in zip(blocks, self.components, self.Z):
            d, dZc, _ = comp.gradients_with_inputs(self._jitter_backward(res.dKuu[b, b]), Z, ops=self.ops)
            acc.add(d)
            dZ.append(dZc)
        g: dict[str, Any] = {"q_mu": res.dm_u, "q_sqrt": [res.dL_u[b, b] for b in blocks],
                             "Z": np.concatenate(dZ) + dZ_rows, "noise": res.dnoise}
        g.update(acc.result())
        return res.value, g

    def _collapsed_elbo_and_gradient(self, X, y):
        if self._on_device():  # one pass's statistics serve the optimum and the bound
            return self._device_elbo_and_gradient(self._check_inputs(X), y, X.shape[0], collapsed=True)
        return super()._collapsed_elbo_and_gradient(X, y)
