"""Single-threaded timings of the parts of a VISH fit that changed with the split pass, through
APIs that older commits have too (run it against another tree with ``PYTHONPATH=<tree>/lab``):
the harmonics' VJP (the lift gradient's kernel) at d = 9, L = 3 and 4 on 2x10^4 points, the
input check of ``fit`` (``kernel.check_lift``) on 6x10^6 rows, and ``predict_f`` on 2x10^4
points of a fitted M = 210 model. Median of repeats.

    .venv/bin/python benchmarks/speed/vish_parts.py
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe, median_seconds  # noqa: E402


def main() -> None:
    print("machine:", describe())
    print("spherelab from", os.path.dirname(sl.__file__))
    print("| part | size | seconds (one thread) |")
    print("| --- | --- | --- |")
    rng = np.random.default_rng(0)
    with sl.thread_limit(1):
        for L in (3, 4):
            Y = sl.SphericalHarmonics(9, L)
            X = sl.sample_sphere(20_000, 9, rng=rng)
            W = rng.standard_normal((20_000, Y.num_features))
            print(f"| harmonics VJP, d = 9, L = {L} | 20,000 x {Y.num_features} | "
                  f"{median_seconds(lambda: Y.solid_vjp(X, W), 10):.4f} |", flush=True)
        kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(8, np.sqrt(8.0)))
        Xbig, _ = sl.datasets.synthetic_regression(6_000_000, seed=1)
        print(f"| kernel.check_lift (fit's input check) | 6,000,000 x 8 | "
              f"{median_seconds(lambda: kernel.check_lift(Xbig), 3):.3f} |", flush=True)
        Xbig = None  # frees its 384 MB
        X, y = sl.datasets.synthetic_regression(20_000, seed=2)
        model = sl.VISH(kernel, 3, sl.likelihoods.Gaussian(0.1)).fit(X, y, optimize=False)
        Xte, _ = sl.datasets.synthetic_regression(20_000, seed=3)
        print(f"| VISH.predict_f, M = 210 | 20,000 x 8 | {median_seconds(lambda: model.predict_f(Xte), 5):.4f} |")


if __name__ == "__main__":
    main()
