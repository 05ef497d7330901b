r"""The inducing-feature protocol every model is written against (GPflow's ``InducingVariables``,
GPy's gradient contract).

A feature set defines M inter-domain variables :math:`u_m = \langle f, g_m\rangle_{\mathcal H}` by
their covariances

.. math:: [K_{uu}]_{mm'} = \mathrm{Cov}(u_m, u_{m'}) \quad (M, M), \qquad
          [K_{uf}]_{mn} = \mathrm{Cov}(u_m, f(x_n)) \quad (M, N)

(always (M, N): features by rows), and chains the bound's matrix derivatives
:math:`\partial\mathcal L/\partial K_{uu}`, :math:`\partial\mathcal L/\partial K_{uf}` into its own
parameters, the kernel's hyper-parameters and the inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._state import Saveable
from ..backend.ops import Operations

__all__ = ["Features"]


class Features(Saveable):
    """Abstract base of inducing features.

    Subclasses implement :meth:`Kuu`, :meth:`Kuf`, :meth:`Kuu_gradients`, :meth:`Kuf_gradients`
    and, when they have trainable parameters, :meth:`get_params`, :meth:`set_params` and
    :meth:`param_gradient`. A model calls :meth:`initialise` once it knows the data dimension and
    :meth:`bind` once it knows the kernel (features whose size depends on the kernel's spectrum
    fix it there).
    """

    #: whether the features have parameters of their own to train
    trainable = False

    @property
    def num_features(self) -> int:
        """M."""
        raise NotImplementedError  # pragma: no cover - abstract

    def initialise(self, dim: int, rng: np.random.Generator) -> None:
        """Set up for lifted inputs of dimension ``dim`` = inputs + 1 (default: nothing)."""

    def bind(self, kernel) -> None:
        """Fix what depends on the kernel (default: nothing)."""

    # every computation takes ``ops``: the operations of the model's device (or a device's name)
    def Kuu(self, kernel, *, ops: Operations | str = "cpu") -> np.ndarray:
        """:math:`K_{uu}`, ``(M, M)``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def Kuf(self, kernel, X: Any, *, ops: Operations | str = "cpu") -> np.ndarray:
        """:math:`K_{uf}`, ``(M, N)``, for data-space inputs ``X`` ``(N, D)``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def Kuu_gradients(self, kernel, G: np.ndarray, *, ops: Operations | str = "cpu") -> dict[str, Any]:
        r"""Chain :math:`G = \partial\mathcal L/\partial K_{uu}` into a dict: kernel
        hyper-parameter names and this feature set's own parameter names."""
        raise NotImplementedError  # pragma: no cover - abstract

    def Kuf_gradients(self, kernel, G: np.ndarray, X: Any, *, ops: Operations | str = "cpu") -> dict[str, Any]:
        r"""Chain :math:`G = \partial\mathcal L/\partial K_{uf}` ``(M, N)`` into a dict: kernel
        hyper-parameters (including ``bias`` and ``input_scale``), own parameters and ``"X"``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def get_params(self) -> np.ndarray:
        """The trainable parameters, flat (default: none)."""
        return np.zeros(0)

    def set_params(self, values: Any) -> None:
        """Set the parameters from a flat vector like :meth:`get_params`'s."""
        if np.size(values):
            raise ValueError(f"{type(self).__name__} has no parameters, got {np.size(values)} values")

    def param_gradient(self, grads: dict[str, Any]) -> np.ndarray:
        """The own parameters' part of a gradient dict, flat like :meth:`get_params`."""
        return np.zeros(0)

    def has_device_columns(self, kernel) -> bool:
        """Whether :meth:`device_columns` gives a block for ``kernel`` (default: no; the rows of a
        decoupled model then stay on the host)."""
        return False

    def device_columns(self, kernel, ops) -> Any:
        """This feature set's columns of :math:`K_{fu}` as a block computed on ``ops``' device from
        the rows' lift (:mod:`spherelab.features.device_columns`), or None."""
        return None
