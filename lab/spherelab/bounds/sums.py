"""Named gradient sums: the one accumulator the models and the lift's backward pass add their
chain-rule pieces into (row chunks, cores' shares, Dask blocks, inducing blocks alike)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

__all__ = ["GradientSums"]


class GradientSums:
    """Sums of gradients by name, each shaped like its parameter (a float, or an array such as a
    per-column ``input_scale``).

    Parameters
    ----------
    zeros
        The names held and a zero of each one's shape; :meth:`add` ignores every other name (a
        kernel's gradient dict may carry entries a caller chains elsewhere, such as ``X``).

    Examples
    --------
    >>> import spherelab as sl
    >>> sums = GradientSums.for_kernel(sl.kernels.Matern(1.5))
    >>> sums.add({"variance": 1.0, "X": None}); sums.add({"variance": 0.5, "bias": 2.0})
    >>> sums.result()["variance"], sums.result()["bias"]
    (1.5, 2.0)
    """

    def __init__(self, zeros: Mapping[str, Any]) -> None:
        self.sums = {k: np.array(v, dtype=np.float64, copy=True) for k, v in zeros.items()}

    @classmethod
    def for_kernel(cls, kernel, **extra: Any) -> "GradientSums":
        """Zeros for every hyper-parameter of ``kernel`` (its ``parameter_names``), plus ``extra``."""
        zeros = {k: np.zeros_like(np.asarray(kernel.get_hyper(k), dtype=np.float64)) for k in kernel.parameter_names}
        return cls({**zeros, **extra})

    def add(self, d: Mapping[str, Any]) -> None:
        """Add the entries of ``d`` whose names this holds."""
        for k in self.sums:
            if k in d:
                self.sums[k] = self.sums[k] + np.asarray(d[k], dtype=np.float64)

    def merge(self, other: "GradientSums") -> None:
        """Add another accumulator's sums (a share of the rows, a Dask block)."""
        self.add(other.sums)

    def result(self) -> dict[str, Any]:
        """The sums, 0-d ones as floats."""
        return {k: (float(v) if v.ndim == 0 else v) for k, v in self.sums.items()}
