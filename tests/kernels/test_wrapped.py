"""Kernels built on a base kernel: parity parts and the finite continuous-depth series."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from spherelab import kernels as K
from spherelab.groups import Antipodal
from spherelab.sphere.gegenbauer import zonal_series
from spherelab.testing import check_jacobian, check_named_gradients


@pytest.mark.parametrize("kernel", [K.Matern(2.5, 0.8), K.ArcCosine(1), K.NTK(2)], ids=lambda k: type(k).__name__)
def test_parity_kernels_hold_one_parity_of_degrees(kernel):
    even, odd = sl.harmonic_decomposition(kernel, Antipodal())
    t = np.linspace(-1, 1, 11)
    assert np.allclose(even.shape(t) + odd.shape(t), kernel.shape(t), atol=1e-14)
    assert np.allclose(even.shape(-t), even.shape(t), atol=1e-14) and np.allclose(
        odd.shape(-t), -odd.shape(t), atol=1e-14
    )
    dim, L = 4, 12
    lam = kernel.spectrum(dim, L)
    ell = np.arange(L + 1)
    assert np.allclose(even.spectrum(dim, L), np.where(ell % 2 == 0, lam, 0.0), rtol=1e-12, atol=0)
    assert np.allclose(odd.spectrum(dim, L), np.where(ell % 2 == 1, lam, 0.0), rtol=1e-12, atol=0)
    # independent check: Funk-Hecke quadrature of the parity shapes
    fh = sl.funk_hecke(lambda s: even.shape(s), dim, L)
    assert np.allclose(fh, even.spectrum(dim, L), rtol=1e-9, atol=1e-13 * lam.max())


def test_parity_kernel_gradients_and_shared_parameters(rng):
    base = K.Matern(2.5, 0.8, bias=0.6, input_scale=np.array([1.1, 0.9]))
    odd = K.Parity(base, even=False)
    odd.lengthscale = 0.7
    assert base.lengthscale == 0.7
    X, X2 = rng.normal(size=(5, 2)), rng.normal(size=(4, 2))
    G = rng.normal(size=(5, 4))
    d, dX, dX2 = odd.gradients_with_inputs(G, X, X2)
    names = ("variance", "lengthscale", "bias", "input_scale")
    start = {name: getattr(base, name) for name in names}

    def value(X, X2, **params):
        for name, v in params.items():
            setattr(base, name, v)  # through the base: the wrapper shares its parameters
        return float(np.vdot(G, odd.K(X, X2)))

    check = check_named_gradients(value, {"X": X, "X2": X2, **start}, {"X": dX, "X2": dX2, **{k: d[k] for k in names}},
                                  positive=list(names), rtol=1e-6, atol=1e-8)
    value(X, X2, **start)
    assert check.ok, str(check)


# ---- continuous depth (seed 004 eq. 15) ------------------------------------------------------
def test_truncated_polynomial_decay_spectrum_and_gradient():
    k = K.PolynomialDecay(10, 3.0, variance=2.0, max_degree=15)  # beta < d - 1: finite series only
    lam = k.spectrum(10, 20)
    counts = np.array([sl.num_harmonics(ell, 10) for ell in range(21)], dtype=float)
    assert np.isclose(lam @ counts, 2.0, rtol=1e-13) and np.all(lam[16:] == 0.0)
    assert np.allclose(lam[2:16] / lam[1], np.arange(2, 16) ** -3.0, rtol=1e-12)
    assert np.isclose(lam[0], lam[1])
    t = np.linspace(-1, 1, 7)
    assert np.allclose(k.shape(t), zonal_series(lam[:16], 10, t), rtol=1e-12)
    g = k.spectrum_gradients(10, 15)["beta"]
    check = check_jacobian(lambda beta: K.PolynomialDecay(10, beta, variance=2.0, max_degree=15).spectrum(10, 15),
                           3.0, g, rtol=1e-6, atol=1e-12)
    assert check.ok, str(check)
    with pytest.raises(ValueError, match="max_degree"):
        K.PolynomialDecay(10, 3.0)
