"""The thread policy: size thresholds, the BLAS rule, overrides, nesting, validation."""

from __future__ import annotations

import os
import time

import numba
import numpy as np
import pytest
import spherelab as sl
from spherelab import chunks, threads
from threadpoolctl import threadpool_info

pytestmark = pytest.mark.equality  # sums in another order: run under several chunk sizes and thread counts


def blas_counts() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.fixture
def auto(monkeypatch):
    """The size-based policy on an idle machine (the suite itself runs with set_threads(1))."""
    previous = sl.get_threads()
    sl.set_threads("auto")
    monkeypatch.setattr(threads, "machine_busy", lambda: False)
    yield
    sl.set_threads(previous if previous is not None else "auto")


def test_numba_threads_follow_the_work(auto):
    full = numba.config.NUMBA_NUM_THREADS
    assert threads.numba_threads_for(threads.NUMBA_MIN_WORK / 10) == 1
    assert threads.numba_threads_for(threads.NUMBA_MIN_WORK * 10) == full
    with threads.policy(threads.NUMBA_MIN_WORK * 10):
        assert numba.get_num_threads() == full
        with threads.policy(1.0):  # an inner kernel decides for itself
            assert numba.get_num_threads() == 1
        assert numba.get_num_threads() == full


def test_blas_is_decided_by_the_inducing_count_and_inherited(auto):
    full = numba.config.NUMBA_NUM_THREADS
    assert threads.blas_threads_for(1e12, dim=threads.BLAS_MIN_DIM) == 1
    assert threads.blas_threads_for(0.0, dim=threads.BLAS_MIN_DIM + 1) == full
    with threads.policy(1e12, dim=256):
        assert blas_counts() == {1}
        with threads.policy(1e12, dim=4096):  # inner policies inherit BLAS
            assert blas_counts() == {1}
        if full > 1:
            with threads.gram_policy(threads.BLAS_MIN_WORK * 2):  # the Gram product decides itself
                assert blas_counts() == {full}
        assert blas_counts() == {1}


def test_busy_machine_keeps_blas_single_threaded(monkeypatch):
    previous = sl.get_threads()
    sl.set_threads("auto")
    try:
        monkeypatch.setattr(threads, "machine_busy", lambda: True)
        assert threads.blas_threads_for(1e15) == 1
        assert threads.blas_threads_for(0.0, dim=10_000) == 1
    finally:
        sl.set_threads(previous if previous is not None else "auto")


def test_overrides(auto):
    with sl.thread_limit(1):
        assert threads.numba_threads_for(1e15) == 1 and threads.blas_threads_for(1e15) == 1
        with threads.policy(1e15, dim=10_000):
            assert numba.get_num_threads() == 1 and blas_counts() == {1}
    sl.set_threads(1)
    assert sl.get_threads() == 1 and threads.numba_threads_for(1e15) == 1
    sl.set_threads("auto")
    assert sl.get_threads() is None


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), ("two", TypeError), (True, TypeError),
                                        (1.5, TypeError)])
def test_bad_counts_are_named(bad, error):
    with pytest.raises(error, match="n must be"):
        sl.set_threads(bad)
    with pytest.raises(error, match="n must be"):
        with sl.thread_limit(bad):
            pass


def test_entry_points_run_single_threaded_for_small_work(auto):
    seen = []
    kernel = sl.kernels.Matern(2.5, 1.0)
    original = kernel.fused_code

    def spy():
        seen.append((numba.get_num_threads(), blas_counts()))
        return original()

    kernel.fused_code = spy
    kernel.K(np.ones((3, 2)))
    assert seen and seen[0][0] == 1 and seen[0][1] == {1}


def test_machine_busy_reads_the_load_average(monkeypatch):
    monkeypatch.setattr(threads, "_load", [0.0, False])
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (100.0, 0.0, 0.0))
    assert threads.machine_busy() is True
    monkeypatch.setattr(threads, "_load", [0.0, False])
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert threads.machine_busy() is False


def test_split_pass_equals_the_sequential_pass(auto, monkeypatch, rng):
    """The pass whose chunks are dealt to one thread per core gives the sequential statistics
    (to rounding: the partial sums are added in another order), the same bits on every run
    whatever the timing; one worker on a busy machine or under thread_limit(1)."""
    from spherelab.bounds import streamed_statistics

    X = rng.standard_normal((103, 3))  # 11 chunks of 10 rows
    y = rng.standard_normal(103)
    seen = []

    def columns(Xc):
        seen.append(Xc.shape[0])
        time.sleep(float(rng.uniform(0, 0.002)))  # the shares finish their chunks in any order
        return np.vstack([Xc.T, np.sin(Xc).T]), Xc[:, 0] ** 2

    assert threads.pass_workers(11) == 2 and threads.pass_workers(1) == 1
    a = streamed_statistics(columns, X, y, chunk_size=10)
    a2 = streamed_statistics(columns, X, y, chunk_size=10)
    with sl.thread_limit(1):
        assert threads.pass_workers(11) == 1
        b = streamed_statistics(columns, X, y, chunk_size=10)
    A = np.vstack([X.T, np.sin(X).T])
    assert np.array_equal(a.G, a2.G) and np.array_equal(a.c, a2.c)
    assert np.allclose(a.G, b.G, rtol=1e-14, atol=1e-13) and np.allclose(a.G, A @ A.T, rtol=1e-14, atol=1e-13)
    assert np.allclose(a.c, A @ y, rtol=1e-14, atol=1e-13) and np.isclose(a.sum_diag, np.sum(X[:, 0] ** 2))
    assert len(seen) == 33 and sum(seen) == 3 * 103
    monkeypatch.setattr(threads, "machine_busy", lambda: True)
    assert threads.pass_workers(11) == 1


def test_the_one_loop_adds_sums_by_name_into_copies_of_its_own(auto):
    """pass_sums: each share's sums by name, added in share order; a chunk's arrays are never
    written to (the share's first sum is a copy), and float32 sums accumulate in float64."""
    from spherelab.bounds.statistics import pass_sums
    from spherelab.chunks import host_slices

    X, y = np.arange(40.0)[:, None], np.ones(40)
    pieces = [(a, a + 4) for a in range(0, 40, 4)]
    given = []

    def chunk(i, rows, shares, acc):
        Xc, yc = rows
        out = {"x": Xc.sum(axis=0), "tiny": np.full(2, 1.0 + 2.0 ** -20, dtype=np.float32), "n": len(yc)}
        given.append(out["x"].copy() if i else out["x"])  # the first chunk's own array, kept
        acc["shares"] = shares
        return out

    assert threads.pass_workers(len(pieces)) == 2
    t = pass_sums("cpu", pieces, host_slices(X, y), chunk)
    assert t["x"][0] == X.sum() and t["n"] == 40 and t["shares"] == 4  # two shares, each its own
    assert t["tiny"].dtype == np.float64 and np.all(t["tiny"] == 10 * (1.0 + 2.0 ** -20))
    assert given[0][0] == X[:4].sum()  # not the share's running sum


def test_a_failing_share_stops_the_pass(auto):
    """An error in one share's chunk is raised once, and the other share gives up."""
    from spherelab.bounds import streamed_statistics

    for bad_share in (0, 1):  # the first future to be collected, or the second
        calls = []

        def columns(Xc, bad=bad_share):
            start = int(Xc[0, 0])
            calls.append(start)
            if start == 20 + 10 * bad:  # the third chunk of that share
                raise ValueError("a bad chunk")
            time.sleep(0.01)
            return Xc.T

        X = np.repeat(np.arange(400.0)[:, None], 2, axis=1)
        with pytest.raises(ValueError, match="a bad chunk"):
            streamed_statistics(columns, X, np.ones(400), chunk_size=10)
        assert len(calls) < 12


def test_vish_bound_and_gradient_split_over_cores_equal_one_thread(auto, rng):
    """VISH's statistics pass and its lift gradient dealt to both cores (chunks of 64 rows) give
    the single-threaded values to rounding."""
    X = rng.standard_normal((700, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(700)
    model = sl.VISH(sl.kernels.Matern(1.5, 1.0, bias=0.8, input_scale=np.array([1.5, 2.0, 2.5])), 4,
                    chunk_size=64)
    model.fit(X, y, optimize=False)
    value, grad = model.elbo_and_gradient(X, y)
    with sl.thread_limit(1):
        value1, grad1 = model.elbo_and_gradient(X, y)
    assert np.isclose(value, value1, rtol=1e-12)
    for name in grad1:
        assert np.allclose(grad[name], grad1[name], rtol=1e-9, atol=1e-9 * np.max(np.abs(grad1[name]))), name


def test_chunk_rows_follow_the_cache():
    assert chunks.cache_bytes(3) > 0 and chunks.cache_bytes(2) > 0
    rows = [chunks.chunk_rows(w) for w in (10, 210, 660, 5000)]
    assert all(512 <= r <= 16384 and r % 256 == 0 for r in rows)
    assert rows == sorted(rows, reverse=True)


def test_a_bad_environment_value_is_ignored_with_a_warning():
    import os
    import subprocess
    import sys

    code = "import spherelab as sl; print(sl.get_threads())"
    env = {**os.environ, "SPHERELAB_THREADS": "lots"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "None"
    assert "SPHERELAB_THREADS='lots'" in out.stderr


def test_kernels_fall_back_to_a_private_cache_dir(monkeypatch, tmp_path):
    """A read-only install (Numba finds no writable cache location) caches in this user's private
    directory instead of compiling in every process."""
    import numba
    from spherelab.backend import jit as jitmod

    monkeypatch.setattr(jitmod.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    real = numba.njit
    calls = []

    def njit(*args, **kwargs):
        if args:  # numba's own lazy imports on a process's first compile (numba.typed): not ours to count
            return real(*args, **kwargs)
        calls.append((kwargs["cache"], numba.config.CACHE_DIR))
        if kwargs["cache"] and not numba.config.CACHE_DIR:
            raise RuntimeError("cannot cache function: no locator available")
        return real(**kwargs)

    monkeypatch.setattr(jitmod.numba, "njit", njit)

    @jitmod.jit()
    def double(x):
        return 2.0 * x

    assert double(2.0) == 4.0
    private = jitmod.private_cache_dir()
    assert calls == [(True, ""), (True, private)] and jitmod.caching_enabled(__name__)
    assert (os.stat(private).st_mode & 0o777) == 0o700


def test_a_shared_writable_cache_dir_is_not_trusted(monkeypatch, tmp_path):
    import numba
    from spherelab.backend import jit as jitmod

    monkeypatch.setattr(jitmod.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    os.makedirs(jitmod.private_cache_dir())
    os.chmod(jitmod.private_cache_dir(), 0o777)  # planted by someone else, writable by all
    assert not jitmod._use_private_cache_dir() and numba.config.CACHE_DIR == ""


def test_a_pass_outside_the_main_thread_is_not_split(auto):
    """Outside the main thread the pass runs on one share (OpenBLAS ignores a thread count set
    there, so split workers could not be made single-threaded)."""
    import threading

    seen = []
    worker = threading.Thread(target=lambda: seen.append(threads.pass_workers(10)))
    worker.start()
    worker.join()
    assert seen == [1] and threads.pass_workers(10) == 2
