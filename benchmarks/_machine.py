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
