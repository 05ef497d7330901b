"""What a user browsing the package sees: each public module's own names, not its imports."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

PUBLIC = ["spherelab.sphere", "spherelab.kernels", "spherelab.activations", "spherelab.features", "spherelab.bounds",
          "spherelab.models", "spherelab.likelihoods", "spherelab.linalg", "spherelab.optim", "spherelab.groups",
          "spherelab.threads", "spherelab.testing", "spherelab.metrics", "spherelab.backend", "spherelab.devices",
          "spherelab.datasets", "spherelab.widgets", "spherelab.explore", "spherelab.estimators",
          "spherelab.persistence", "spherelab.distributed"]


@pytest.mark.parametrize("name", PUBLIC)
def test_a_public_module_lists_its_own_names_and_submodules_only(name):
    module = importlib.import_module(name)
    listed = dir(module)
    assert set(module.__all__) <= set(listed)
    for n in listed:
        value = getattr(module, n)
        own = n in module.__all__ or (isinstance(value, ModuleType) and value.__name__ == f"{name}.{n}")
        assert own, f"{name} lists {n!r}, which it only imported"  # sl.metrics listed np, Any, annotations
