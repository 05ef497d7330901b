"""The thread policy (``spherelab.threads``): where two threads start to pay, idle and under load,
and whether a tiny model's calls stay fast on a busy machine.

Run: ``python benchmarks/speed/threads.py [--quick]``. Prints Markdown tables for RESULTS.md:
1. the harmonics (d = 9, L = 4, 660 features) and a Gram product A A^T (M = 210) at growing N,
   with 1 and with 2 threads of both pools, on an idle machine and with a second process keeping
   every core busy;
2. a tiny OrthogonalSVGP / VISH (12 rows): ``elbo`` and ``predict_f`` under the default policy
   against the same call with both pools pinned to one thread by hand (threadpoolctl +
   numba.set_num_threads, set once around the whole measurement), idle and loaded. Target:
   within 1.5x under load;
3. a small streamed pass: the decoupled collapsed ELBO and its gradient (8 and 64 inducing points)
   at growing N on an idle machine, under the policy (one thread below ``NUMBA_MIN_WORK`` flops,
   4 N P^2), on one thread and with its chunks dealt to every core (the threshold set to 0).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe, median_seconds  # noqa: E402

QUICK = "--quick" in sys.argv


def _spin(stop):
    # a numerical process like a second test run: dgemm on every core (BLAS's own threads)
    a = np.random.default_rng(0).standard_normal((600, 600))
    while not stop.is_set():
        a = a @ a
        a /= np.abs(a).max()


class Load:
    """A second process keeping both cores busy with multi-threaded BLAS work."""

    def __enter__(self):
        ctx = mp.get_context("spawn")
        self.stop = ctx.Event()
        self.procs = [ctx.Process(target=_spin, args=(self.stop,))]
        for p in self.procs:
            p.start()
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for p in self.procs:
            p.join()


def best(fn, repeat=7):
    return median_seconds(fn, repeat)


def crossover_rows(label):
    Y = sl.SphericalHarmonics(9, 4)
    rng = np.random.default_rng(0)
    rows = []
    for n in ([500, 2000, 8000] if QUICK else [250, 500, 1000, 2000, 4000, 8000, 32000]):
        X = sl.sample_sphere(n, 9, rng=rng)
        A = rng.standard_normal((210, n))
        out = []
        for th in (1, 2):
            with sl.thread_limit(th):
                out.append(best(lambda: Y(X)))
                out.append(best(lambda: A @ A.T))
        rows.append(f"| {label} | {n} | {out[0] * 1e3:.2f} | {out[2] * 1e3:.2f} | {out[0] / out[2]:.2f} "
                    f"| {out[1] * 1e3:.2f} | {out[3] * 1e3:.2f} | {out[1] / out[3]:.2f} |")
    return rows


def tiny_models():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((12, 2))
    y = np.sin(X[:, 0])
    osvgp = sl.OrthogonalSVGP(sl.kernels.Matern(2.5, 1.0), sl.InducingPoints(X[:6]), 3).fit(X, y, optimize=False)
    vish = sl.VISH(sl.kernels.Matern(1.5, 1.0), 6).fit(X, y, optimize=False)
    return {"OrthogonalSVGP.elbo": lambda: osvgp.elbo(),
            "OrthogonalSVGP.predict_f": lambda: osvgp.predict_f(X),
            "VISH.elbo": lambda: vish.elbo(),
            "VISH.predict_f": lambda: vish.predict_f(X)}


def small_passes():
    """The collapsed ELBO and gradient of an OrthogonalSVGP with P inducing points (no orthogonal
    part) at growing N, on an idle machine: the policy against the same pass dealt to every core
    (the policy's threshold set to 0; nothing else changed: the model's own algebra keeps its one
    BLAS thread). On a busy machine the policy deals no pass to more than one thread."""
    rows = []
    sizes = {8: [48, 1000, 4000, 16000, 64000], 64: [1000, 4000, 16000, 64000]}
    for P, ns in sizes.items():
        for n in (ns[::2] if QUICK else ns):
            rng = np.random.default_rng(2)
            X = rng.standard_normal((n, 3))
            y = np.sin(X @ np.ones(3))
            model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5, 1.0), sl.InducingPoints(X[:P] + 0.1), 0)
            model.fit(X, y, optimize=False)
            theta = model.parameter_vector()
            work = 4.0 * n * P ** 2
            policy = best(lambda: model.objective(theta, X, y), 9)
            threshold = sl.threads.NUMBA_MIN_WORK
            sl.threads.NUMBA_MIN_WORK = 0.0  # every pass dealt to every core, whatever its work
            try:
                split = best(lambda: model.objective(theta, X, y), 9)
            finally:
                sl.threads.NUMBA_MIN_WORK = threshold
            with sl.thread_limit(1):
                one = best(lambda: model.objective(theta, X, y), 9)
            rows.append(f"| {P} | {n} | {work:.1e} | {'one' if work < threshold else 'every core'} "
                        f"| {policy * 1e3:.2f} | {one * 1e3:.2f} | {split * 1e3:.2f} | {split / one:.2f} |")
    return rows


def pinned_best(fn, repeat):
    """``best`` with both pools pinned to one thread by hand for the whole measurement."""
    with threadpool_limits(1, user_api="blas"):
        prev = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            return best(fn, repeat)
        finally:
            numba.set_num_threads(prev)


def main():
    print(describe())
    print()
    print("### Where two threads pay (median of 7, ms)\n")
    print("| machine | N | harmonics 1 thr | 2 thr | ratio 1/2 | A A^T (M = 210) 1 thr | 2 thr | ratio 1/2 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in crossover_rows("idle"):
        print(r)
    with Load():
        for r in crossover_rows("loaded"):
            print(r)
    print()
    print("### A tiny model's calls: default policy against both pools pinned by hand (median, ms)\n")
    print("Last column: both pools on every core (what the calls ran with before the policy).\n")
    print("| machine | call | policy | pinned | ratio | two threads |")
    print("| --- | --- | --- | --- | --- | --- |")
    calls = tiny_models()
    for label in ("idle", "loaded"):
        ctx = Load() if label == "loaded" else None
        if ctx:
            ctx.__enter__()
        try:
            for name, fn in calls.items():
                t_pol = best(fn, 21)
                t_pin = pinned_best(fn, 21)
                with sl.thread_limit(os.cpu_count() or 1):
                    t_all = best(fn, 21)
                print(f"| {label} | {name} | {t_pol * 1e3:.3f} | {t_pin * 1e3:.3f} | {t_pol / t_pin:.2f} "
                      f"| {t_all * 1e3:.3f} |")
        finally:
            if ctx:
                ctx.__exit__(None, None, None)
    print()
    print("### A small streamed pass: one thread against the chunks dealt to every core (idle, median, ms)\n")
    print("The decoupled collapsed ELBO and its gradient with P inducing points; work 4 N P^2 flops; the policy "
          f"deals a pass to every core from NUMBA_MIN_WORK = {sl.threads.NUMBA_MIN_WORK:.0e} flops.\n")
    print("| P | N | work | policy's threads | policy | one thread | every core | every core / one |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in small_passes():
        print(r)

if __name__ == "__main__":
    main()
