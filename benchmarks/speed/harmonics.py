"""Benchmark: all spherical harmonics up to degree 4 on S^8 (660 features) at 100 000 points.

Runs spherelab and the reference implementation (PyPI ``spherical-harmonics-basis``, import
``spherical_harmonics``) in the same process on the same points; prints best-of-3 wall times,
their ratio, the first-call times (cold compile and on-disk cache load, each in a fresh process),
and a cross-check that both span the same space per degree.

    make bench            # or: .venv/bin/python benchmarks/speed/harmonics.py [--points N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from _machine import describe  # noqa: E402

DIM, MAX_DEGREE = 9, 4


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, result = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


FIRST_CALL = """
import time, numpy as np
t0 = time.perf_counter()
import spherelab
t1 = time.perf_counter()
x = np.random.default_rng(0).normal(size=(10, {dim}))
spherelab.SphericalHarmonics({dim}, {deg})(x / np.linalg.norm(x, axis=1, keepdims=True))
t2 = time.perf_counter()
print(f"{{t1 - t0:.3f}} {{t2 - t1:.3f}}")
"""


def first_call_times() -> tuple[tuple[float, float], tuple[float, float]]:
    """(import, first call) seconds with a cold Numba cache, then with the cache populated."""
    code = FIRST_CALL.format(dim=DIM, deg=MAX_DEGREE)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        runs = []
        for _ in range(2):
            out = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
            )
            runs.append(tuple(float(v) for v in out.stdout.split()))
    return runs[0], runs[1]


def span_residual(ours: np.ndarray, ref: np.ndarray, degrees: np.ndarray) -> float:
    """Max residual of fitting our degree-l block by the reference's degree-l block."""
    worst = 0.0
    for ell in range(MAX_DEGREE + 1):
        cols = degrees == ell
        k = int(cols.sum())
        start = int(np.flatnonzero(cols)[0])
        A, *_ = np.linalg.lstsq(ref[:, start : start + k], ours[:, cols], rcond=None)
        worst = max(worst, float(np.abs(ref[:, start : start + k] @ A - ours[:, cols]).max()))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import spherelab

    print("machine:", describe())
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.points, DIM))
    X /= np.linalg.norm(X, axis=1, keepdims=True)

    cold, warm = first_call_times()
    print(f"first call, cold cache : import {cold[0]:.2f} s + compile/first call {cold[1]:.2f} s")
    print(f"first call, warm cache : import {warm[0]:.2f} s + cache load/first call {warm[1]:.2f} s")

    ours_obj = spherelab.SphericalHarmonics(DIM, MAX_DEGREE)
    ours_obj(X[:10])  # compile outside the timing
    t_ours, Phi = best_of(lambda: ours_obj(X), args.repeat)
    print(f"spherelab          : {t_ours:.3f} s  ({ours_obj.num_features} features, best of {args.repeat})")

    try:
        from spherical_harmonics import SphericalHarmonics as Reference
    except ImportError:
        print("reference not installed (pip install spherical-harmonics-basis): no ratio")
        return
    ref_obj = Reference(DIM, MAX_DEGREE + 1)  # its max_degree is exclusive
    ref_obj(X[:10])
    t_ref, ref = best_of(lambda: np.asarray(ref_obj(X)), args.repeat)
    print(f"spherical_harmonics: {t_ref:.3f} s  ({ref.shape[1]} features, best of {args.repeat})")
    print(f"ratio (reference / spherelab): {t_ref / t_ours:.1f}x")
    print(
        "same space per degree: max residual "
        f"{span_residual(Phi[:2000], ref[:2000], ours_obj.degrees):.2e}"
    )


if __name__ == "__main__":
    main()
