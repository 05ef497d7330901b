"""The data sets' files read as model files are read: a regular file only (a FIFO or a device would
block or never end), its size bounded before it is read, then its numbers checked — the table's
shape and finiteness, a split's indices (integers, in range, unique, non-empty). A file that fails
raises :class:`~spherelab.FormatError` naming it and what was expected."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import numpy as np

from .._state import FormatError

__all__ = ["MAX_FILE_BYTES", "read_text", "read_table", "read_split"]

#: the largest data file read (the largest UCI table, protein, is 3.5 MB)
MAX_FILE_BYTES = 1 << 30


def read_text(path: Path) -> str:
    """The text of ``path``, a regular file of at most :data:`MAX_FILE_BYTES` (and an eighth of
    :func:`~spherelab._validation.memory_budget`)."""
    from .._validation import memory_budget

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO opens at once, and is refused
    except OSError as err:
        raise FormatError(f"{path}: cannot be opened: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a named pipe" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                    or stat.S_ISBLK(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode) else "not a file")
            raise FormatError(f"{path}: expected a regular data file, found {kind}")
        limit = min(MAX_FILE_BYTES, memory_budget() // 8)
        if st.st_size > limit:
            raise FormatError(f"{path}: {st.st_size:,} bytes, more than a data file may hold ({limit:,})")
        parts, size = [], 0
        while True:  # to the limit even if the file grows while it is read
            part = os.read(fd, 1 << 20)
            if not part:
                break
            size += len(part)
            if size > limit:
                raise FormatError(f"{path}: more than {limit:,} bytes (it grew while read)")
            parts.append(part)
    finally:
        os.close(fd)
    try:
        return b"".join(parts).decode("utf-8")
    except UnicodeDecodeError as err:
        raise FormatError(f"{path}: not a text file ({err.reason} at byte {err.start})") from None


def read_table(path: Path, columns: int) -> np.ndarray:
    """A CSV table with one header row: ``(N, columns)`` finite floats, N >= 1."""
    text = read_text(path)
    header = text.split("\n", 1)[0]
    named = len(header.split(","))
    if named != columns:
        raise FormatError(f"{path}: its header names {named} columns, expected {columns}")
    if not text.split("\n", 1)[1:] or not text.split("\n", 1)[1].strip():
        raise FormatError(f"{path}: expected rows of {columns} numbers after the header, got none")
    try:
        table = np.loadtxt(io.StringIO(text), delimiter=",", skiprows=1, ndmin=2)
    except ValueError:  # (NumPy's message quotes the file's text: not repeated)
        raise FormatError(f"{path}: not a table of numbers (a comma-separated row of {columns} numbers per "
                          "line after the header)") from None
    if table.shape[0] == 0 or table.shape[1] != columns:
        raise FormatError(f"{path}: expected rows of {columns} numbers, got a table of shape {table.shape}")
    finite = np.isfinite(table)
    if not finite.all():
        row, col = (int(i) for i in np.argwhere(~finite)[0])
        raise FormatError(f"{path}: {int((~finite).sum())} NaN or infinite value(s), the first in row {row + 1}, "
                          f"column {col + 1}")
    return table


def read_split(path: Path, rows: int) -> np.ndarray:
    """A split's row indices: integers in ``[0, rows)``, each once, at least one."""
    text = read_text(path)
    if not text.strip():
        raise FormatError(f"{path}: expected a non-empty list of row indices, got an empty file")
    try:
        index = np.loadtxt(io.StringIO(text), dtype=np.int64, ndmin=1)
    except ValueError:  # (NumPy's message quotes the file's text: not repeated)
        raise FormatError(f"{path}: expected one row index (an integer) per line") from None
    if index.ndim != 1 or index.size == 0:
        raise FormatError(f"{path}: expected a non-empty list of row indices, got shape {index.shape}")
    bad = (index < 0) | (index >= rows)
    if bad.any():
        raise FormatError(f"{path}: {int(bad.sum())} index(es) outside the table's {rows} rows, e.g. "
                          f"{int(index[bad][0])}")
    if np.unique(index).size != index.size:
        raise FormatError(f"{path}: {index.size - np.unique(index).size} repeated index(es)")
    return index
