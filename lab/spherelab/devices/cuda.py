r"""The host side of the ``"gpu"`` and ``"sim"`` devices: the operations of the device table, launching
the CUDA kernels of :mod:`.cuda_kernels` (compiled from the same device functions as the CPU kernels).

``"gpu"``: CuPy arrays, cuBLAS / cuSOLVER for the dense algebra. ``"sim"``: the same kernels in
numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1`` set before Numba is imported) on NumPy
arrays, with NumPy / SciPy standing in for CuPy — how CI proves the GPU path without a GPU.
Importing this module imports ``numba.cuda``; :mod:`.ops` does so only when a CUDA device is
asked for.
"""

from __future__ import annotations

import functools
import threading
import warnings

import numpy as np

from ..kernels import matern_jit
from ..linalg import NumericalFailure
from ..sphere import gegenbauer_src
from ..sphere.gegenbauer_jit import clenshaw_cpu
from ..sphere.harmonics import harmonics_cpu, harmonics_vjp_cpu
from ..sphere.series_columns import series_columns_backward_cpu, series_columns_cpu
from . import cuda_kernels as kernels
from .transfer import CupyArrays, HostArrays, staged_rows

__all__ = ["CudaOperations"]

#: numba-cuda warns of "low occupancy" below this many blocks (its heuristic, fixed in its launch
#: configuration); a small problem launches a small grid on purpose
_FEW_BLOCKS = 128
_LOW_OCCUPANCY = r"Grid size \d+ will likely result in GPU under-utilization"
_configuring = threading.Lock()


class CudaOperations:
    """The host side of the CUDA devices: the array interface (:class:`~.transfer.CupyArrays`,
    or its NumPy stand-in in the simulator), the triangular solver and the launch configuration.

    The operations of the table take and return host (NumPy) arrays, so every model runs on the
    device unchanged with its O(M^3) algebra on the host; :meth:`device_harmonics` and
    :meth:`stream_rows` keep the data on the device for a pass over host rows."""

    def __init__(self, device: str) -> None:
        self.device = device
        if device == "gpu":
            from cupyx.scipy.linalg import solve_triangular

            kernels.load_typing_registries()
            self.arrays, self._solve = CupyArrays(), solve_triangular
            self.threads, self.max_blocks = 256, 4096
        else:
            # the simulator runs every thread in Python, a block's threads side by side and every
            # device-function call under one module lock: two threads of a block took 3x and four
            # 20x (erratically, 11-377 s for one fit) the time of one. So one thread per block and
            # two blocks, run one after the other: the grid-stride loops and per-thread scratch rows
            # still see two threads
            from scipy.linalg import solve_triangular

            # NaN passes through, as cuSOLVER's solve leaves it (the callers read it in their copy back)
            self.arrays, self._solve = HostArrays(), functools.partial(solve_triangular, check_finite=False)
            self.threads, self.max_blocks = 1, 2
        self.xp = self.arrays.xp
        self.to_device, self.to_host = self.arrays.to_device, self.arrays.to_host
        self._launches: dict = {}  # (kernel, blocks) -> its launch configuration, small grids only
        self._constants: dict = {}  # id(a) -> (a, its device copy): device_constant

    def _grid(self, n: int) -> tuple[int, int]:
        blocks = max(1, min(self.max_blocks, -(-n // self.threads)))
        return blocks, self.threads

    def _launch(self, kernel, n: int):
        """``kernel`` configured for ``n`` items of work (grid-stride loops). A grid of fewer than
        :data:`_FEW_BLOCKS` blocks is configured once, with numba-cuda's low-occupancy warning
        silenced (a small problem is not the user's mistake), and reused: the warning is raised
        when a configuration is built, and the simulator's kernels configure themselves in place."""
        blocks, threads = self._grid(n)
        if blocks >= _FEW_BLOCKS or self.device == "sim":
            return kernel[blocks, threads]
        launch = self._launches.get((kernel, blocks))
        if launch is None:
            with _configuring, warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=_LOW_OCCUPANCY)
                launch = self._launches[kernel, blocks] = kernel[blocks, threads]
        return launch

    def device_constant(self, a):
        """A read-only host array on the device, copied once while it lives (a copy from pageable
        host memory waits for the device's queue: once per launch otherwise); a writable one is
        copied every time, since it may change in place."""
        if not isinstance(a, np.ndarray) or a.flags.writeable:
            return self.to_device(a)
        held = self._constants.get(id(a))
        if held is None or held[0] is not a:
            if len(self._constants) >= 64:  # arrays of features gone: keep the few in use
                self._constants.clear()
            held = self._constants[id(a)] = (a, self.to_device(a))
        return held[1]

    def _plan_arrays(self, plan):
        return self.device_constant(plan.const), self.device_constant(plan.index)

    def _flat(self, t):
        t = self.xp.asarray(t, dtype=self.xp.float64)
        return self.xp.ascontiguousarray(t.reshape(-1)), t.shape

    # ---- kernels ---------------------------------------------------------------------------
    def gegenbauer_table(self, L, alpha, t):
        flat, shape = self._flat(t)
        out = self.xp.empty((flat.shape[0], int(L) + 1))
        if flat.shape[0]:
            self._launch(kernels.table_kernel, flat.shape[0])(flat, int(L), 2.0 * float(alpha), out)
        return self.to_host(out).reshape(shape + (int(L) + 1,))

    def gegenbauer_derivative_table(self, L, alpha, t):
        flat, shape = self._flat(t)
        out = self.xp.empty((flat.shape[0], int(L) + 1))
        if flat.shape[0]:
            self._launch(kernels.derivative_kernel, flat.shape[0])(flat, int(L), float(alpha), out)
        return self.to_host(out).reshape(shape + (int(L) + 1,))

    def _clenshaw_tables(self, coeffs, alpha):
        """The series' coefficients and Clenshaw's recurrence tables as device arrays, and B_1."""
        c = np.ascontiguousarray(np.asarray(coeffs, dtype=np.float64))
        L = c.shape[0] - 1
        a_tab, b_tab = np.zeros(L + 1), np.zeros(L + 2)
        b_1 = gegenbauer_src.clenshaw_tables(L, 2.0 * float(alpha), a_tab, b_tab)  # host: L divisions
        return [self.xp.asarray(a) for a in (c, a_tab, b_tab)], b_1

    def clenshaw(self, coeffs, alpha, t, derivative=False):
        if self._small(t):  # the decoupled models' M x M blocks of activated units: see host_entries
            flat = np.ascontiguousarray(t, dtype=np.float64).reshape(-1)
            c = np.ascontiguousarray(coeffs, dtype=np.float64)
            out = clenshaw_cpu(c, float(alpha), flat, derivative)
            return (out[0].reshape(t.shape), out[1].reshape(t.shape)) if derivative else out.reshape(t.shape)
        flat, shape = self._flat(t)
        values = self.xp.empty(flat.shape[0])
        derivs = self.xp.empty(flat.shape[0] if derivative else 1)
        if flat.shape[0]:
            tables, b_1 = self._clenshaw_tables(coeffs, alpha)
            self._launch(kernels.clenshaw_kernel, flat.shape[0])(flat, *tables, b_1, bool(derivative), values, derivs)
        values, derivs = self.to_host(values), self.to_host(derivs)
        if derivative:
            return values.reshape(shape), derivs.reshape(shape)
        return values.reshape(shape)

    def _matern_values(self, T, r1, r2, code, lengthscale, variance, same):
        xp = self.xp
        T = xp.ascontiguousarray(xp.asarray(T, dtype=xp.float64))
        out = xp.empty(T.shape)
        if T.size:
            self._launch(kernels.matern_values_kernel, T.size)(T, xp.asarray(r1), xp.asarray(r2), int(code),
                                                      1.0 / lengthscale, float(variance), bool(same), out)
        return out

    def _matern_backward(self, T, G, r1, r2, code, lengthscale, variance, same):
        xp = self.xp
        T = xp.ascontiguousarray(xp.asarray(T, dtype=xp.float64))
        G = xp.ascontiguousarray(xp.asarray(G, dtype=xp.float64))
        A, B = xp.empty(T.shape), xp.empty(T.shape)
        row_var, row_l = xp.zeros(T.shape[0]), xp.zeros(T.shape[0])
        if T.size:  # one thread per row of T: callers put the long side first
            self._launch(kernels.matern_backward_kernel, T.shape[0])(T, G, xp.asarray(r1), xp.asarray(r2), int(code),
                                                            1.0 / lengthscale, float(variance), bool(same),
                                                            A, B, row_var, row_l)
        return A, B, row_var.sum(), row_l.sum()

    #: host-in/host-out Matern and Clenshaw problems up to this many entries run on the host's
    #: compiled kernels: a launch, two copies and a synchronisation cost more than their arithmetic
    #: (the decoupled models' P x P inducing blocks: 3 Matern backward calls took 3.4 ms of a 12 ms
    #: step on an H200, and 4 zonal series of 64 activated units 3.4 ms of another);
    #: the parity cases set it to 0, so that they prove the device's kernels
    host_entries = 1 << 16

    def _small(self, T) -> bool:
        return isinstance(T, np.ndarray) and T.size <= self.host_entries

    def matern_values(self, T, r1, r2, code, lengthscale, variance, same):
        if self._small(T):
            return matern_jit.matern_values(T, np.asarray(r1), np.asarray(r2), code, lengthscale, variance, same)
        return self.to_host(self._matern_values(T, r1, r2, code, lengthscale, variance, same))

    def matern_backward(self, T, G, r1, r2, code, lengthscale, variance, same):
        if self._small(T):
            return matern_jit.matern_backward(T, np.asarray(G, dtype=np.float64), np.asarray(r1), np.asarray(r2),
                                              code, lengthscale, variance, same)
        A, B, dvar, dlen = self._matern_backward(T, G, r1, r2, code, lengthscale, variance, same)
        return self.to_host(A), self.to_host(B), float(self.to_host(dvar)), float(self.to_host(dlen))

    def zonal_columns(self, T, r1, r2, code, lengthscale, variance):
        """:meth:`matern_values` of device arrays, left on the device."""
        return self._matern_values(T, r1, r2, code, lengthscale, variance, False)

    def zonal_columns_backward(self, T, G, r1, r2, code, lengthscale, variance):
        """:meth:`matern_backward` of device arrays, ``A`` and ``B`` left on the device, and the
        variance's and lengthscale's sums as 0-d device arrays (read when the caller copies back)."""
        return self._matern_backward(T, G, r1, r2, code, lengthscale, variance, False)

    def series_columns(self, T, r1, r2, coeffs, alpha):
        r""":math:`r_{1i} r_{2j}\sum_\ell c_\ell P_\ell(t_{ij})` of device arrays, left on the device
        (small host arrays on a GPU: the host's kernel, a host array back)."""
        if self.device == "gpu" and self._small(T):
            return series_columns_cpu(T, np.asarray(r1), np.asarray(r2), coeffs, alpha)
        xp = self.xp
        T = xp.ascontiguousarray(xp.asarray(T, dtype=xp.float64))
        out = xp.empty(T.shape)
        if T.size:
            tables, b_1 = self._clenshaw_tables(coeffs, alpha)
            self._launch(kernels.series_values_kernel, T.size)(T, xp.asarray(r1), xp.asarray(r2), *tables, b_1, out)
        return out

    def series_columns_backward(self, T, G, coeffs, alpha):
        """``(G (s - t s'), G s')`` of device arrays, left on the device (small host arrays on a GPU:
        the host's kernel)."""
        if self.device == "gpu" and self._small(T):
            return series_columns_backward_cpu(T, np.asarray(G), coeffs, alpha)
        xp = self.xp
        T = xp.ascontiguousarray(xp.asarray(T, dtype=xp.float64))
        G = xp.ascontiguousarray(xp.asarray(G, dtype=xp.float64))
        A, B = xp.empty(T.shape), xp.empty(T.shape)
        if T.size:
            tables, b_1 = self._clenshaw_tables(coeffs, alpha)
            self._launch(kernels.series_backward_kernel, T.size)(T, G, *tables, b_1, A, B)
        return A, B

    def device_solve(self, L, B, trans=0):
        return self._solve(L, B, lower=True, trans=trans)

    def factor_inverse(self, L):
        """:math:`(LL^\top)^{-1}` from two triangular solves against the identity, on the device."""
        Linv = self._solve(L, self.xp.eye(L.shape[0]), lower=True, trans=0)
        return Linv.T @ Linv

    def array_namespace(self):
        return self.xp

    def device_harmonics(self, X, plan):
        """Every feature of ``plan`` at unit rows ``X`` (a device array), as a device array
        ``(N, M)``: one thread per point (grid-stride), each with its own scratch row."""
        xp = self.xp
        n = X.shape[0]
        out = xp.empty((n, plan.degrees.shape[0]))
        if n:
            blocks, threads = self._grid(n)
            total = blocks * threads
            buf, rpow = xp.empty((total, plan.buffer_size)), xp.empty((total, plan.max_degree + 1))
            self._launch(kernels.harmonics_kernel, n)(X, plan.max_degree, *self._plan_arrays(plan), buf, rpow, out)
        return out

    def harmonic_columns(self, X, plan, scale):
        """``scale[n]`` times every feature at ``X[n]``, as columns ``(M, N)`` of a device array."""
        return (self.device_harmonics(X, plan) * scale[:, None]).T

    def harmonics(self, X, plan, out):
        """:meth:`device_harmonics` at host rows ``X``, written into the host array ``out`` (at most
        ``host_entries`` entries on a GPU: the host's kernel, as for the Matérn and series problems)."""
        if self.device == "gpu" and out.size <= self.host_entries:
            return harmonics_cpu(X, plan, out)
        values = self.device_harmonics(self.to_device(X), plan)
        if values is not out:
            out[...] = self.to_host(values)
        return out

    def device_harmonics_vjp(self, X, W, plan):
        """:meth:`harmonics_vjp` of device arrays ``X`` ``(N, d)``, ``W`` ``(N, M)``, left on the
        device: one thread per point, each with its own scratch rows."""
        xp = self.xp
        n, d = X.shape
        grad = xp.empty((n, d))
        if n:
            blocks, threads = self._grid(n)
            total = blocks * threads
            self._launch(kernels.harmonics_vjp_kernel, n)(
                X, W, plan.max_degree, *self._plan_arrays(plan),
                xp.empty((total, plan.buffer_size)), xp.empty((total, plan.buffer_size)),
                xp.ones((total, plan.max_degree + 1)), xp.empty((total, d + 1)), xp.empty((total, d)), grad)
        return grad

    def harmonics_vjp(self, X, W, plan):
        if self.device == "gpu" and np.size(W) <= self.host_entries:  # (host arrays in and out)
            return harmonics_vjp_cpu(X, W, plan)
        return self.to_host(self.device_harmonics_vjp(self.to_device(X), self.to_device(W), plan))

    def stream_rows(self, X, y, pieces):
        """Host rows a piece at a time through pinned double buffers (:func:`~.transfer.staged_rows`)."""
        return staged_rows(self.arrays, X, y, pieces)

    #: bytes of one chunk's columns in the device's statistics pass (see :meth:`pass_rows`)
    pass_bytes = 1 << 29

    def pass_rows(self, width):
        """Rows per chunk of the device's statistics pass: columns of about :attr:`pass_bytes`
        (512 MiB), a power of two between 2^14 and 2^19 rows. A GPU's Gram product on an
        (M, n) chunk needs n in the tens of thousands to reach its rate, and each chunk costs a few
        launches and an event; the CPU's cache-sized chunks (512-16 384 rows) would leave it idle.
        The sizes against the measured rate: ``benchmarks/gpu_check.py``'s chunk sweep."""
        rows = self.pass_bytes // (8 * max(int(width), 1))
        return int(min(1 << 19, max(1 << 14, 1 << max(int(rows).bit_length() - 1, 0))))

    # ---- dense algebra (cuBLAS / cuSOLVER on the GPU) ---------------------------------------
    def gram_update(self, G, c, A, y):
        """Host-side accumulation (the models' host columns): on the GPU the product runs on the
        device and only the P x P increment comes back."""
        if self.device == "sim":
            G += A @ A.T
            c += A @ y
            return
        Ad, yd = self.to_device(A), self.to_device(y)
        G += self.to_host(Ad @ Ad.T)
        c += self.to_host(Ad @ yd)

    def cholesky(self, A, name, hint):
        """cuSOLVER's Cholesky returns NaN instead of raising: the factor is checked explicitly,
        then retried with the same bounded jitter as the CPU's :func:`~spherelab.linalg.cholesky_or_explain`."""
        from ..linalg import JITTERS

        xp = self.xp
        A = self.to_device(A)
        if not bool(xp.all(xp.isfinite(A))):
            raise NumericalFailure(f"{name} ({A.shape[0]}x{A.shape[0]}) has non-finite entries. {hint}")
        scale = float(xp.max(xp.abs(xp.diag(A)))) if A.size else 1.0
        for jitter in JITTERS:
            B = A if jitter == 0.0 else A + jitter * scale * xp.eye(A.shape[0])
            try:
                L = xp.linalg.cholesky(B)
            except Exception:  # NumPy raises LinAlgError; cuSOLVER returns NaN instead
                continue
            if bool(xp.all(xp.isfinite(L))):
                return self.to_host(L)
        raise NumericalFailure(f"Cholesky of {name} ({A.shape[0]}x{A.shape[0]}) failed even with jitter "
                               f"{JITTERS[-1]:g} x max diagonal. {hint}")

    def solve_triangular(self, L, B, trans=0):
        return self.to_host(self._solve(self.to_device(L), self.to_device(B), lower=True, trans=trans))

    def table(self) -> dict:
        """The operations this device implements, by the names of :data:`spherelab.backend.OPERATIONS`."""
        names = ("harmonics", "harmonics_vjp", "device_harmonics_vjp", "gegenbauer_table",
                 "gegenbauer_derivative_table", "clenshaw",
                 "matern_values", "matern_backward", "gram_update", "cholesky", "solve_triangular",
                 "device_harmonics", "harmonic_columns", "stream_rows", "pass_rows", "to_device", "to_host",
                 "zonal_columns", "zonal_columns_backward", "series_columns", "series_columns_backward",
                 "device_solve", "factor_inverse", "array_namespace", "device_constant")
        return {name: getattr(self, name) for name in names}
