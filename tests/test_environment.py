"""The environment never breaks spherelab: every SPHERELAB_* variable is parsed strictly (a bad value
is a warning and the default), kernels compile in memory — with one warning — when no cache
directory is writable, and the private cache directory is refused when it is a symbolic link, not a
directory, or not this user's."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from spherelab import _validation
from spherelab.backend import jit as jit_module


@pytest.mark.parametrize("text, expected", [("8G", 8 * 2**30), ("500M", 500 * 2**20), ("1.5g", int(1.5 * 2**30)),
                                            ("123", 123), ("2GiB", 2 * 2**30), ("64 MB", 64 * 2**20)])
def test_memory_sizes_are_read(monkeypatch, text, expected):
    monkeypatch.setenv("SPHERELAB_MAX_MEMORY", text)
    assert _validation.memory_budget() == expected


@pytest.mark.parametrize("text", ["inf", "-8G", "1e400", "0", "8 GB of RAM", "nan", "G", "0.0001", "9" * 400,
                                  "2000P", str(2**61)])
def test_bad_memory_sizes_warn_once_and_fall_back(monkeypatch, text):
    monkeypatch.setenv("SPHERELAB_MAX_MEMORY", text)
    monkeypatch.setattr(_validation, "_WARNED_MEMORY", set())
    monkeypatch.delenv("SPHERELAB_MAX_MEMORY", raising=False)
    physical = _validation.memory_budget()
    monkeypatch.setenv("SPHERELAB_MAX_MEMORY", text)
    with pytest.warns(RuntimeWarning, match="SPHERELAB_MAX_MEMORY.*not a positive size"):
        assert _validation.memory_budget() == physical
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _validation.memory_budget() == physical  # no second warning
        _validation.check_allocation(1e3, "a small array", "")


def test_bad_thread_counts_warn_and_fall_back():
    for value in ("0", "-2", "1.5", "many"):
        out = subprocess.run([sys.executable, "-c", "import spherelab as sl; print(sl.get_threads())"],
                             env={**os.environ, "SPHERELAB_THREADS": value}, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0 and "SPHERELAB_THREADS" in out.stderr, (value, out.stderr[-500:])


def test_kernels_compile_in_memory_when_nothing_is_writable(monkeypatch):
    real_njit = jit_module.numba.njit

    def njit(*args, cache=False, **kwargs):
        if cache:
            raise RuntimeError("cannot cache function: no locator available")
        return real_njit(*args, cache=cache, **kwargs)

    def no_temp():
        raise FileNotFoundError("No usable temporary directory found")

    monkeypatch.setattr(jit_module.numba, "njit", njit)
    monkeypatch.setattr(jit_module.tempfile, "gettempdir", no_temp)
    monkeypatch.setattr(jit_module, "_warned", [])

    def twice(x):
        return 2.0 * x

    with pytest.warns(RuntimeWarning, match="compiles its kernels in memory.*No usable temporary directory"):
        compiled = jit_module.jit()(twice)
    assert compiled(np.float64(3.0)) == 6.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jit_module.jit()(twice)  # one warning per process


def test_the_private_cache_directory_must_be_a_real_directory_of_ours(monkeypatch, tmp_path):
    monkeypatch.setattr(jit_module.numba.config, "CACHE_DIR", "")
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "cache-link"
    link.symlink_to(target)
    monkeypatch.setattr(jit_module, "private_cache_dir", lambda: str(link))
    assert not jit_module._use_private_cache_dir() and "symbolic link" in jit_module._refusal[0]
    plain = tmp_path / "a-file"
    plain.write_text("x")
    monkeypatch.setattr(jit_module, "private_cache_dir", lambda: str(plain))
    assert not jit_module._use_private_cache_dir() and "not a directory" in jit_module._refusal[0]
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.setattr(jit_module, "private_cache_dir", lambda: str(shared))
    assert not jit_module._use_private_cache_dir() and "others may write" in jit_module._refusal[0]
    good = tmp_path / "good"
    monkeypatch.setattr(jit_module, "private_cache_dir", lambda: str(good))
    assert jit_module._use_private_cache_dir() and jit_module.numba.config.CACHE_DIR == str(good)
    assert (good.stat().st_mode & 0o777) == 0o700


def test_import_works_when_numbas_cache_directory_cannot_be_created(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")  # a directory cannot be made under a file, even by root
    env = {**os.environ, "NUMBA_CACHE_DIR": str(blocker / "cache"), "HOME": str(blocker / "home")}
    code = ("import numpy as np, spherelab as sl; Y = sl.SphericalHarmonics(3, 2); "
            "print(Y(np.array([[0.0, 0.0, 1.0]])).shape)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240,
                         cwd=Path(__file__).parent)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "(1, 9)" in out.stdout
