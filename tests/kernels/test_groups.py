"""Harmonic kernel decomposition (seed 002 §3): sum, positivity, shift property, groups."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from spherelab import kernels as K
from spherelab.groups import Product, Reflection, Rotation

KERNELS = [
    K.Matern(2.5, 0.8, bias=0.7),
    K.ArcCosine(1, bias=1.2, input_scale=np.array([1.0, 1.0, 0.5])),
    K.NTK(2, bias=0.5, input_scale=1.3),
]


def _groups():
    return {
        "reflect each": Reflection(3),
        "reflect {0,1},{2}": Reflection(3, [[0, 1], [2]]),
        "rotate 4 in (0,1)": Rotation(3, 4, (0, 1)),
        "rotate 3 x reflect 2": Product(Rotation(3, 3, (0, 1)), Reflection(3, [[2]])),
    }


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: type(k).__name__)
@pytest.mark.parametrize("gname", list(_groups()))
@pytest.mark.parametrize("real", [True, False])
def test_components_sum_to_the_kernel_and_are_psd(kernel, gname, real, rng):
    group = _groups()[gname]
    X = rng.normal(size=(25, 3))
    comps = sl.harmonic_decomposition(kernel, group, real=real)
    if real and gname == "rotate 4 in (0,1)":
        assert len(comps) == 3  # floor(T / 2) + 1
    total = sum(c(X) for c in comps)
    assert np.allclose(total, kernel.K(X), atol=1e-12)
    for c in comps:
        Kt = c(X)
        assert np.allclose(Kt, Kt.conj().T, atol=1e-12)  # Hermitian
        lo = np.linalg.eigvalsh(Kt).min()
        assert lo > -1e-10 * np.abs(kernel.K(X)).max(), (c, lo)


@pytest.mark.parametrize("gname", list(_groups()))
def test_shift_property(gname, rng):
    group = _groups()[gname]
    k = K.Matern(1.5, 0.9, bias=0.8)
    X, X2 = rng.normal(size=(6, 3)), rng.normal(size=(5, 3))
    for comp in sl.harmonic_decomposition(k, group, real=False):
        for j, T in enumerate(group.orders):
            s = [0] * len(group.orders)
            s[j] = 1
            shifted = comp(X, group.apply(X2, s))
            phase = np.exp(1j * 2 * np.pi * comp.index[j] / T)
            assert np.allclose(shifted, phase * comp(X, X2), atol=1e-12)


def test_shifts_in_both_arguments(rng):
    # invariance of k plus the shift property: k_t(G^a x, G^b y) = e^{i 2 pi t (b - a) / T} k_t(x, y)
    group = Rotation(2, 4)
    k = K.Matern(2.5, 1.0, bias=0.5)
    X = rng.normal(size=(4, 2))
    comps = sl.harmonic_decomposition(k, group, real=False)
    for comp in comps:
        base = comp(X, X)
        for a in range(4):
            for b in range(4):
                lhs = comp(group.apply(X, [a]), group.apply(X, [b]))
                assert np.allclose(lhs, np.exp(1j * 2 * np.pi * comp.index[0] * (b - a) / 4) * base, atol=1e-12)


def test_trivial_group_is_the_kernel(rng):
    group = Rotation(2, 1)
    k = K.ArcCosine(1)
    X = rng.normal(size=(5, 2))
    (comp,) = sl.harmonic_decomposition(k, group)
    assert np.allclose(comp(X), k.K(X), atol=1e-14)


def test_pca_reflections(rng):
    A = rng.normal(size=(3, 3))
    X = rng.normal(size=(200, 3)) @ A
    group = Reflection.pca(X, num_axes=2)
    assert group.orders == (2, 2)
    k = K.Matern(2.5, 1.0)  # scalar input scale: invariant under rotated reflections
    comps = sl.harmonic_decomposition(k, group)
    assert np.allclose(sum(c(X[:20]) for c in comps), k.K(X[:20]), atol=1e-12)
    with pytest.raises(ValueError, match="input_scale"):
        sl.harmonic_decomposition(K.Matern(2.5, 1.0, input_scale=np.array([1.0, 2.0, 3.0])), group)


def test_bad_groups():
    with pytest.raises(ValueError, match="input_scale"):
        sl.harmonic_decomposition(K.Matern(1.5, 1.0, input_scale=np.array([1.0, 2.0])), Rotation(2, 4))
    with pytest.raises(ValueError, match="disjoint"):
        Reflection(3, [[0, 1], [1]])
    with pytest.raises(ValueError, match="plane"):
        Rotation(3, 4, (1, 1))
    with pytest.raises(ValueError, match="commute"):
        Product(Rotation(3, 4, (0, 1)), Rotation(3, 4, (1, 2)))
    with pytest.raises(ValueError, match="columns"):
        Rotation(3, 4).apply(np.ones((2, 2)), [1])
