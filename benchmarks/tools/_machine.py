"""Describe the machine a benchmark ran on (printed beside every result)."""

from __future__ import annotations

import os
import platform
import sys


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return float("nan")


def describe() -> str:
    import numba
    import numpy as np

    return (
        f"{cpu_model()}, {os.cpu_count()} cores, {memory_gib():.0f} GiB RAM; "
        f"{platform.system()} {platform.release()}; Python {sys.version.split()[0]}, "
        f"NumPy {np.__version__}, Numba {numba.__version__} "
        f"({numba.config.NUMBA_NUM_THREADS} threads)"
    )


def median_seconds(func, repeats: int) -> float:
    """Median wall time of ``func()`` over ``repeats`` calls, after one warm-up call."""
    import time

    import numpy as np

    func()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def vish_features(degree: int, inputs: int = 8):
    """The Matern-3/2 kernel of the VISH benchmarks (bias 1, input scales sqrt(D)) and its bound
    harmonic features of degree ``degree`` on S^D."""
    import numpy as np
    import spherelab as sl

    kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(inputs, np.sqrt(inputs)))
    features = sl.HarmonicFeatures(degree)
    features.initialise(inputs + 1, None)
    features.bind(kernel)
    return kernel, features
