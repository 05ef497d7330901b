"""How many rows a streamed pass takes at a time: chunks sized from the machine's last-level cache,
so that a chunk's columns, written by the harmonics, are read back by the Gram product while still
cached (RESULTS.md, "chunk size"). ``SPHERELAB_CHUNK_ROWS`` fixes the rows per chunk of every host
pass instead (:func:`fixed_chunk_rows`): the test suite runs its equality tests under two values,
so that no tolerance depends on one machine's cache. How the chunks are dealt to the cores is
:mod:`spherelab.threads`'s."""

from __future__ import annotations

import os

import numba

from ._listing import own_names

__all__ = ["cache_bytes", "chunk_rows", "fixed_chunk_rows", "host_slices", "host_rows"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports


def cache_bytes(level: int = 3) -> int:
    """Size of this machine's level-``level`` data cache in bytes (Linux sysfs; 8 MiB for L3 and
    1 MiB for L2 where it cannot be read)."""
    default = {2: 1 << 20, 3: 8 << 20}.get(level, 1 << 20)
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            path = os.path.join(base, entry)
            with open(os.path.join(path, "level")) as fh:
                if int(fh.read()) != level:
                    continue
            with open(os.path.join(path, "type")) as fh:
                if fh.read().strip() == "Instruction":
                    continue
            with open(os.path.join(path, "size")) as fh:
                text = fh.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            return int(text.rstrip("KMG")) * scale
    except (OSError, ValueError):
        pass
    return default


def fixed_chunk_rows() -> int | None:
    """The rows per chunk of every host pass fixed by ``SPHERELAB_CHUNK_ROWS`` (a positive int,
    read at each call), instead of the cache's; ``None`` where it is unset."""
    value = os.environ.get("SPHERELAB_CHUNK_ROWS", "").strip()
    if not value:
        return None
    rows = int(value) if value.isdigit() else 0
    if rows < 1:
        raise ValueError(f"SPHERELAB_CHUNK_ROWS={value!r}: expected a positive int (rows per chunk), or unset")
    return rows


def chunk_rows(width: int) -> int:
    """Rows per chunk of a streamed pass whose columns have ``width`` float64 entries per row: the
    chunks of all cores together fill an eighth of the last-level cache (a chunk is written by the
    harmonics and read back by the product while still cached), at least 512 rows (below, the
    product's own efficiency drops) and at most 16 384, in multiples of 256. Measured on a
    2-core machine with 32 MiB of L3 (RESULTS.md, "chunk size"): at M = 210 its 1 024 rows are
    within 1 % of the best (16 384 rows: 8 % slower), at M = 660 its 512 rows are the best
    (16 384 rows: 28 % slower). ``SPHERELAB_CHUNK_ROWS`` fixes it (:func:`fixed_chunk_rows`)."""
    fixed = fixed_chunk_rows()
    if fixed is not None:
        return fixed
    rows = cache_bytes(3) // (8 * max(int(numba.config.NUMBA_NUM_THREADS), 1) * 8 * max(int(width), 1))
    return int(min(16384, max(512, rows // 256 * 256)))


def host_slices(X, y):
    """The ``rows`` of a pass over arrays held where it computes
    (:func:`~spherelab.bounds.statistics.pass_sums`): a function of a share's pieces ``[(a, b),
    ...]`` yielding each piece's ``(X[a:b], y[a:b])`` in order, slices (no copy)."""
    def rows(pieces):
        for a, b in pieces:
            yield X[a:b], y[a:b]

    return rows


def host_rows(X, y, pieces):
    """The CPU's ``stream_rows`` (:data:`~spherelab.backend.OPERATIONS`): the host's rows are where
    the CPU computes, so :func:`host_slices` of them."""
    return host_slices(X, y)(pieces)
