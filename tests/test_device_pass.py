"""A pass over host rows with the chunks on the device (``stream_rows``): the double-buffered
control flow that a GPU runs — host chunks through pinned buffers on a copy stream, the compute
stream waiting on each upload, a slot reused only after the compute reading it — proved with the
NumPy stand-in of the CuPy interface, and VISH's device pass equal to the CPU's."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from spherelab import backend
from spherelab import kernels as K
from spherelab.bounds.vish import harmonic_statistics
from spherelab.devices.transfer import HostArrays, staged_rows

pytestmark = pytest.mark.equality  # sums in another order: run under several chunk sizes and thread counts

pytest.importorskip("numba.cuda")


class _Event:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def synchronize(self):
        self.log.append(("sync", self.name))


class _Stream:
    def __init__(self, log, name):
        self.log, self.name, self.count = log, name, 0

    def record(self):
        self.count += 1
        event = _Event(self.log, f"{self.name}{self.count}")
        self.log.append(("record", event.name))
        return event

    def wait_event(self, event):
        self.log.append((f"{self.name} waits", event.name))


class RecordingArrays(HostArrays):
    """The stand-in, logging every allocation, upload, record and wait in order."""

    def __init__(self):
        self.log, self.allocations = [], 0

    def stream(self):
        return _Stream(self.log, "copy")

    def compute_stream(self):
        return _Stream(self.log, "compute")

    def empty(self, shape):
        self.allocations += 1
        self.log.append(("allocate", shape[0]))
        return np.full(shape, np.nan)  # stale data would show

    def upload(self, dst, src, stream):
        self.log.append(("upload", stream.name, dst.shape[0]))
        dst[...] = src


def _problem(rng, n=23, p=4):
    return rng.standard_normal((n, 3)), rng.standard_normal(n), rng.standard_normal((p, 3))


def _consume(arrays, X, y, W, pieces):
    """The loop's side: each chunk's work done before the next chunk is asked for."""
    G, c, kept = 0.0, 0.0, []
    for k, (Xc, yc) in enumerate(staged_rows(arrays, X, y, pieces)):
        arrays.log.append(("compute chunk", k))
        A = W @ np.tanh(Xc).T
        G, c = G + A @ A.T, c + A @ yc
        kept.append(A.copy())
    return G, c, kept


def test_staged_rows_give_every_chunk_in_order(rng):
    X, y, W = _problem(rng)
    pieces = list(sl.bounds.statistics.row_chunks(23, 5))
    arrays = RecordingArrays()
    G, c, kept = _consume(arrays, X, y, W, pieces)
    A = W @ np.tanh(X).T
    assert np.allclose(G, A @ A.T, rtol=1e-13) and np.allclose(c, A @ y, rtol=1e-13)
    assert len(kept) == 5 and np.allclose(np.hstack(kept), A)
    # memory bounded by the chunk: two slots of (rows, y), whatever the number of chunks
    assert arrays.allocations == 2 * 2


def test_staged_rows_order_copies_and_compute(rng):
    X, y, W = _problem(rng)
    pieces = list(sl.bounds.statistics.row_chunks(23, 5))  # 5 chunks, the last one short (3 rows)
    arrays = RecordingArrays()
    _consume(arrays, X, y, W, pieces)
    log = arrays.log
    uploads = [entry for entry in log if entry[0] == "upload"]
    assert len(uploads) == 5 * 2 and all(u[1] == "copy" for u in uploads) and uploads[-1][2] == 3
    copies = [e[1] for e in log if e[0] == "record" and e[1].startswith("copy")]
    fences = [e[1] for i, e in enumerate(log) if e[0] == "record" and log[i - 1][0] == "allocate"]
    computes = [e[1] for e in log if e[0] == "record" and e[1].startswith("compute") and e[1] not in fences]
    assert len(copies) == len(computes) == 5 and len(fences) == 2  # one fence per slot's allocation
    # Freshly allocated device buffers come from the compute stream's memory pool: their first
    # upload waits for the compute stream to reach the allocation (an H200 run without this wait
    # wrote chunk 1's rows into chunk 0's still-used scratch: statistics off by 1e6 at M = 660).
    for i, entry in enumerate(log):
        if entry[0] == "allocate":
            first_upload = next(j for j in range(i, len(log)) if log[j][0] == "upload")
            waits = [e for e in log[i:first_upload] if e[0] == "copy waits"]
            recorded = [log.index(("record", w[1])) for w in waits]
            assert any(r > i for r in recorded), "an upload into new device memory does not wait for the compute stream"
    for k in range(5):
        # chunk k computes only after its upload, and its compute is recorded after it is queued ...
        assert log.index(("compute waits", copies[k])) < log.index(("compute chunk", k)) < log.index(
            ("record", computes[k]))
        if k + 1 < 5:  # ... and the next upload is queued after chunk k's compute, to overlap it
            assert log.index(("record", computes[k])) < log.index(("record", copies[k + 1]))
        if k >= 2:  # a slot is refilled only when its pinned buffers and its last reader are done
            refill = log.index(("record", copies[k]))
            assert log.index(("sync", copies[k - 2])) < refill
            assert log.index(("copy waits", computes[k - 2])) < refill


def test_vish_statistics_on_the_device_equal_the_cpu(cuda_device, rng, monkeypatch):
    X = rng.standard_normal((50, 2))
    y = np.sin(X[:, 0])
    kernel = K.Matern(1.5, 1.0, bias=0.7)
    feats = sl.HarmonicFeatures(4)
    feats.initialise(3, None)
    feats.bind(kernel)
    cpu = harmonic_statistics(kernel, feats, X, y, chunk_size=50)
    sim = backend.resolve(cuda_device)
    calls = []
    original = sim.harmonic_columns
    monkeypatch.setattr(sim, "harmonic_columns", lambda *a: calls.append(a[0].shape[0]) or original(*a))
    dev = harmonic_statistics(kernel, feats, X, y, chunk_size=16, ops=sim)
    assert calls == [16, 16, 16, 2]  # the CUDA kernel, chunk by chunk
    for name in ("G", "c", "yy", "sum_diag", "n"):
        assert np.allclose(getattr(dev, name), getattr(cpu, name), rtol=1e-12, atol=1e-12), name


def test_device_pass_with_dropped_levels_and_phases(cuda_device, rng):
    """Features keeping a subset of levels (the even part of a kernel) and features without a device
    kernel of their own (phases: computed on the host, copied) give the CPU's statistics."""
    X = rng.standard_normal((20, 2))
    y = np.cos(X[:, 1])
    sim = backend.resolve(cuda_device)
    for kernel, feats in [(K.Parity(K.Matern(2.5, 1.0), even=True), sl.HarmonicFeatures(4)),
                          (K.Matern(1.5, 1.0), sl.PhaseTruncatedHarmonics(3, 3, 2, seed=0))]:
        feats.initialise(3, None)
        feats.bind(kernel)
        assert feats.num_features < feats.all_degrees.size or not isinstance(feats, sl.HarmonicFeatures)
        cpu = harmonic_statistics(kernel, feats, X, y, chunk_size=20)
        dev = harmonic_statistics(kernel, feats, X, y, chunk_size=6, ops=sim)
        assert np.allclose(dev.G, cpu.G, rtol=1e-12, atol=1e-12) and np.allclose(dev.c, cpu.c, rtol=1e-12)


@pytest.mark.parametrize("dim, degree, n", [(9, 3, 37), (9, 4, 16), (3, 6, 50), (2, 5, 1), (5, 2, 0)])
def test_harmonic_columns_are_the_scaled_transposed_harmonics(cuda_device, rng, dim, degree, n):
    """``harmonic_columns`` (the statistics pass's layout): on the CPU bit for bit
    ``harmonics(X).T * scale`` — full blocks of 16 points and a partial one, 1 to 4 factors per
    feature — and the simulator's the same to rounding; the same for the blocked VJP."""
    plan = sl.SphericalHarmonics(dim, degree).plan
    X = sl.sample_sphere(n, dim, rng=rng) if n else np.zeros((0, dim))
    scale = rng.uniform(0.5, 2.0, n)
    cpu, sim = backend.resolve("cpu"), backend.resolve(cuda_device)
    H = cpu.harmonics(X, plan, np.empty((n, plan.degrees.size)))
    A = cpu.harmonic_columns(X, plan, scale)
    assert A.shape == (plan.degrees.size, n) and A.flags.c_contiguous
    assert np.array_equal(A, (H * scale[:, None]).T)
    if n:
        assert np.allclose(sim.to_host(sim.harmonic_columns(sim.to_device(X), plan, sim.to_device(scale))), A,
                           rtol=1e-13, atol=1e-13)
        # the CPU's VJP forms the factors' adjoints for blocks of 16 points; the simulator's kernel
        # point by point: the same sums in the same order
        W = rng.standard_normal((n, plan.degrees.size))
        Xs = X * scale[:, None]
        assert np.allclose(cpu.harmonics_vjp(Xs, W, plan), sim.harmonics_vjp(Xs, W, plan), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("where", ["cpu", "device"])
def test_pass_with_the_lift_on_the_device_rejects_bad_rows(cuda_device, where, rng):
    """The statistics pass lifts the raw rows where the columns are computed; a row that vanishes
    (bias 0) or overflows the lift is reported after the pass with the lift's own message and row
    number — no NaN reaches the sums, no warning is raised on the way."""
    import warnings

    ops = backend.resolve("cpu" if where == "cpu" else cuda_device)
    X = rng.standard_normal((40, 2))
    y = rng.standard_normal(40)
    feats = sl.HarmonicFeatures(3)
    feats.initialise(3, None)
    kernel = K.Matern(1.5, 1.0, bias=0.0)
    feats.bind(kernel)
    X[23] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="row 23 of X vanishes"):
            harmonic_statistics(kernel, feats, X, y, chunk_size=16, ops=ops)
        X[23] = [1e200, 0.0]
        kernel.bias = 1.0
        with pytest.raises(ValueError, match="overflow"):
            harmonic_statistics(kernel, feats, X, y, chunk_size=16, ops=ops)
    X[23] = [0.3, -0.2]  # and a clean pass equals the CPU's lift of every row
    stats = harmonic_statistics(kernel, feats, X, y, chunk_size=16, ops=ops)
    A = feats.Kuf(kernel, X)
    assert np.allclose(stats.G, A @ A.T, rtol=1e-12, atol=1e-12) and np.allclose(stats.c, A @ y, rtol=1e-12)
