r"""HVGP's blocks on the rows floor (:class:`~spherelab.HarmonicSVGP`, Gaussian likelihood).

Sun et al. (2021, §4.2) give each component of the harmonic kernel decomposition its own block of
inducing variables, independent a posteriori. With :math:`L_J = \mathrm{blockdiag}(L_{k,c})`,
:math:`L_{k,c} = \mathrm{chol}\,k_c(Z_c, Z_c)`, the whitened block-independent posterior is the
whitened SVGP on the stacked :math:`u = [u_1; \dots; u_C]` with a block-diagonal :math:`L`, so its
Gaussian bound depends on the rows only through :math:`\Phi = AA^\top` and :math:`\beta = Ay`,
:math:`A = L_J^{-1}K_{uf}` (:func:`~spherelab.bounds.gaussian_stats_bound_whitened` with K = 0; its
derivatives by :math:`L` and :math:`K_{uu}` are read on the diagonal blocks).

The rows are held for the rows floor's loop once per fit (:class:`~spherelab.rows.whitened.ResidentRows`:
copied to a device, or on the CPU the host's arrays, in cache-sized chunks dealt to the cores, so
that no N x M matrix is formed); every block's columns come from one
kernel launch at all the blocks' orbit points (:class:`~spherelab.features.device_columns.OrbitColumns`).
An evaluation sends the joint :math:`K_{uu}` (block-diagonal, built on the host with each block's
jitter) and the orbit points; the factor, the statistics, q's optimum (collapsed), the bound, its
backward pass and the rows' chain run on the device (:func:`~spherelab.rows.whitened.resident_bound`), and
one copy comes back; nothing of size N crosses. Each block's :math:`K_{uu}` chain runs on the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import block_diag

from ..bounds.sums import GradientSums
from ..features.device_columns import OrbitColumns
from ..groups import Group
from ..likelihoods import Gaussian
from ..linalg import add_jitter, jitter_backward
from .whitened import ResidentRows, chain_sums, host_chunk_rows, resident_bound, split_flat

__all__ = ["DeviceBlocks"]


class DeviceBlocks:
    """The device's evaluation of a :class:`~spherelab.HarmonicSVGP` ``model``: a strategy the model
    composes (made per call; the rows a fit holds stay in the model's ``_held`` field). It gives the
    rows floor the hooks :mod:`spherelab.rows.whitened` reads of a model (its kernel, device,
    likelihood and jitter, and the orbit columns) and runs the evaluation itself."""

    #: the most entries (rows x orbit points) of a pass's columns kept for its backward pass
    keep_entries = 1 << 24
    #: entries (rows x orbit points) of a chunk's columns on the CPU: 16 MiB, cache-sized as the
    #: decoupled models' (:attr:`~spherelab.OrthogonalSVGP.chunk_entries`)
    chunk_entries = 1 << 21

    def __init__(self, model) -> None:
        self.model = model
        self.kernel, self.ops, self.likelihood, self.jitter = model.kernel, model.ops, model.likelihood, model.jitter

    #: on the CPU, the rows per inducing variable from which the rows floor evaluates the bound:
    #: below, the dense bound's block-diagonal algebra (T m^3, not the floor's (T m)^3) costs less
    #: than streaming saves (claim rows-floor in benchmarks/RESULTS.md: equal between 2 and 4 at 8
    #: blocks of 64; 3, as the decoupled models' statistics path)
    host_rows_per_inducing = 3

    def applies(self, n: int) -> bool:
        """Whether an evaluation on ``n`` rows runs on the rows floor (:meth:`ResidentRows.holds`):
        rows held on the model's device, or on the CPU the host's arrays, their chunks dealt to the
        cores, from :attr:`host_rows_per_inducing` rows per inducing variable (a minibatch below it
        takes the dense bound, whose N x M is its own few rows)."""
        if ResidentRows.applies(self):
            return True
        return ResidentRows.holds(self) and n >= self.host_rows_per_inducing * sum(self.model.sizes)

    def chunk_rows(self, n: int | None = None) -> int:
        """Rows per chunk on the CPU (:func:`~spherelab.rows.whitened.host_chunk_rows`): at most
        ``chunk_entries`` entries of the orbit columns, at least one chunk per core for ``n`` rows."""
        return host_chunk_rows(self.chunk_entries, self.column_width(), int(sum(self.model.sizes)), n)

    def has_device_blocks(self) -> bool:
        """Whether the device's column blocks apply: a Gaussian likelihood, a kernel with a compiled
        shape (the orbit columns are the kernel's own) and a group acting on the inputs
        (:class:`~spherelab.groups.Antipodal`'s even and odd parts are spectral, not orbit sums of
        the inputs)."""
        return (isinstance(self.likelihood, Gaussian) and self.kernel.fused_code() is not None
                and isinstance(self.model.group, Group))

    def column_width(self) -> int:
        """Orbit points over all blocks (the widest of a device chunk's temporaries)."""
        m = self.model
        return int(sum(len(comp.weights()[0]) * size for comp, size in zip(m.components, m.sizes)))

    def column_blocks(self) -> list:
        """One :class:`~spherelab.features.device_columns.OrbitColumns` at the current inputs."""
        return [OrbitColumns(self.model.components, self.model.Z, self.kernel, self.ops)]

    def column_parameters(self, own: dict) -> np.ndarray:
        """The rows' gradient of the stacked inducing inputs ``(M, D)``."""
        return own["Z"]

    def hold(self, X, y) -> tuple:
        """What a fit holds of its rows ``(X, y)``: them, and their copy on the device when it applies."""
        return (X, y, ResidentRows(self, X, np.asarray(y, dtype=np.float64)) if self.applies(X.shape[0]) else None)

    def _rows(self, X, y) -> ResidentRows:
        held = self.model._held
        if held is not None and held[2] is not None and held[0] is X and held[1] is y:
            return held[2]
        return ResidentRows(self, X, np.asarray(y, dtype=np.float64))

    def evaluate(self, X, y, num_data: int, collapsed: bool = False) -> tuple[float, dict[str, Any]] | None:
        r"""The bound on rows ``(X, y)`` and its gradient, every parameter (the dict of
        :meth:`~spherelab.HarmonicSVGP.elbo_and_gradient`), in one copy back
        (:func:`~spherelab.rows.whitened.resident_bound`); ``collapsed``: at the optimal q for the
        other parameters, which it also sets (:meth:`~spherelab.HarmonicSVGP.optimal_q`). None where
        the rows floor does not take these rows (:meth:`applies`), or where the device's factor
        failed: the model's dense bound decides (its jitter, its errors)."""
        if not self.applies(X.shape[0]):
            return None
        m, ops = self.model, self.ops
        rows = self._rows(X, y).rows
        offs = np.cumsum([0, *m.sizes])
        blocks = [slice(a, b) for a, b in zip(offs[:-1], offs[1:])]
        M = int(offs[-1])

        def inducing():
            return block_diag(*[add_jitter(comp.K(Z, ops=ops), self.jitter) for comp, Z in zip(m.components, m.Z)])

        if collapsed:
            res = resident_bound(self, rows, M, num_data, optimum=blocks, inducing=inducing)
        else:
            q = (np.concatenate(m.ms), np.zeros(0), block_diag(*[np.tril(L) for L in m.Ls]), np.zeros((0, 0)))
            res = resident_bound(self, rows, M, num_data, q=tuple(ops.to_device(a) for a in q), inducing=inducing)
        if res is None:
            return None
        sums, dZ_rows, _ = chain_sums(self, res.blocks, res.sums, res.dkff, X.shape[1])
        acc = GradientSums.for_kernel(self.kernel)
        acc.add(sums)
        dZ = []
        for b, comp, Z in zip(blocks, m.components, m.Z):
            d, dZc, _ = comp.gradients_with_inputs(jitter_backward(res.dKpp[b, b], self.jitter), Z, ops=ops)
            acc.add(d)
            dZ.append(dZc)
        mean, _, L, _ = split_flat(res.q, M, 0)  # the optimal q (collapsed), or q's gradient
        if collapsed:
            m.ms, m.Ls = [mean[b].copy() for b in blocks], [L[b, b].copy() for b in blocks]
            dm, dL = None, None
        else:
            dm, dL = mean, [L[b, b] for b in blocks]
        g: dict[str, Any] = {"q_mu": dm, "q_sqrt": dL, "Z": np.concatenate(dZ) + dZ_rows, "noise": res.dnoise}
        g.update(acc.result())
        return res.value, g
