"""Benchmark: every spectrum a model needs (30 levels on S^8, d = 9) — cold, warm, and after a
hyper-parameter change (what an optimiser step costs) — against the usual public approach
(scipy.integrate.quad of s(t) C_l(t) (1 - t^2)^((d-3)/2) per level), timed in the same run,
with the accuracy of both against 30-digit mpmath integrals.

    .venv/bin/python benchmarks/speed/spectra.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from _machine import describe  # noqa: E402

D, L = 9, 30

COLD = """
import time
t0 = time.perf_counter()
import numpy as np, spherelab as sl
from spherelab import kernels as K, activations as A
t1 = time.perf_counter()
objs = [K.ArcCosine(0), K.ArcCosine(1), K.ArcCosine(2), K.DeepArcCosine(3), K.NTK(3),
        K.Matern(0.5, 0.5), K.Matern(1.5, 0.5), K.Matern(2.5, 0.5), K.Matern(np.inf, 0.5),
        K.IntrinsicMatern(9, 1.5, 0.5), K.PolynomialDecay(9, 10.0)]
acts = [A.ReLU(), A.Softplus(3.0), A.Swish(), A.Erf()]
for k in objs: k.spectrum(9, 30)
for a in acts: a.coefficients(9, 30)
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f}")
"""


def build(ls: float):
    from spherelab import activations as A
    from spherelab import kernels as K

    kernels = [
        K.ArcCosine(0), K.ArcCosine(1), K.ArcCosine(2), K.DeepArcCosine(3), K.NTK(3),
        K.Matern(0.5, ls), K.Matern(1.5, ls), K.Matern(2.5, ls), K.Matern(np.inf, ls),
        K.IntrinsicMatern(D, 1.5, ls), K.PolynomialDecay(D, 9.0 + ls),
    ]
    acts = [A.ReLU(), A.Softplus(2.0 + ls), A.Swish(ls), A.Erf(ls)]
    return kernels, acts


def all_spectra(kernels, acts) -> list[np.ndarray]:
    out = [k.spectrum(D, L) for k in kernels]
    out += [a.coefficients(D, L) for a in acts]
    return out


def scipy_quad_spectrum(shape, kinks=()):
    """The usual approach: adaptive quad per level with an explicit weight."""
    from scipy.integrate import quad
    from scipy.special import eval_gegenbauer, gammaln

    alpha = (D - 2) / 2
    omega = np.exp(gammaln(D / 2) - 0.5 * np.log(np.pi) - gammaln((D - 1) / 2))
    out = []
    for ell in range(L + 1):
        c1 = eval_gegenbauer(ell, alpha, 1.0)
        f = lambda t: shape(t) * eval_gegenbauer(ell, alpha, t) * (1 - t * t) ** ((D - 3) / 2)  # noqa: E731
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            val, _ = quad(f, -1, 1, points=list(kinks) or None, limit=200)
        out.append(omega * val / c1)
    return np.array(out)


def mp_reference(shape_mp, split: bool) -> np.ndarray:
    import mpmath

    with mpmath.workdps(30):
        a = mpmath.mpf(D - 2) / 2
        omega = mpmath.gamma(mpmath.mpf(D) / 2) / (mpmath.sqrt(mpmath.pi) * mpmath.gamma(mpmath.mpf(D - 1) / 2))
        out = []
        for ell in range(L + 1):
            f = lambda th: (
                shape_mp(mpmath.cos(th))
                * mpmath.gegenbauer(ell, a, mpmath.cos(th))
                / mpmath.gegenbauer(ell, a, 1)
                * mpmath.sin(th) ** (D - 2)
            )  # noqa: E731
            pts = [0, mpmath.pi / 2, mpmath.pi] if split else [0, mpmath.pi]
            out.append(float(omega * mpmath.quad(f, pts)))
    return np.array(out)


def main() -> None:
    import mpmath
    from spherelab import activations as A
    from spherelab import kernels as K

    print("machine:", describe())
    out = subprocess.run([sys.executable, "-c", COLD], capture_output=True, text=True, check=True)
    t_import, t_cold = (float(v) for v in out.stdout.split())
    print(f"cold (fresh process): import {t_import:.2f} s, all 15 spectra {t_cold:.2f} s")

    kernels, acts = build(0.5)
    all_spectra(kernels, acts)
    t0 = time.perf_counter()
    for _ in range(20):
        all_spectra(kernels, acts)
    print(f"warm, same hyper-parameters (cached): {(time.perf_counter() - t0) / 20 * 1e3:.2f} ms for all 15")
    times = []
    for i in range(20):
        kernels, acts = build(0.5 + 0.01 * (i + 1))
        t0 = time.perf_counter()
        all_spectra(kernels, acts)
        times.append(time.perf_counter() - t0)
    print(f"warm, new hyper-parameters (an optimiser step): {np.median(times) * 1e3:.1f} ms for all 15 (median of 20)")
    m = K.Matern(1.5, 0.5)
    t0 = time.perf_counter()
    for i in range(50):
        K.Matern(1.5, 0.5 + 1e-3 * (i + 1)).spectrum(D, L)
    t_ours_one = (time.perf_counter() - t0) / 50

    # peer: adaptive scipy quad, same shapes
    t0 = time.perf_counter()
    peer_m = scipy_quad_spectrum(m.shape)
    t_peer_one = time.perf_counter() - t0
    peer_relu = scipy_quad_spectrum(A.ReLU().shape, kinks=(0.0,))
    print(f"Matern-3/2 spectrum, new lengthscale: spherelab {t_ours_one * 1e3:.2f} ms, "
          f"scipy.quad per level {t_peer_one * 1e3:.0f} ms, ratio {t_peer_one / t_ours_one:.0f}x")

    sqrt3 = mpmath.sqrt(3)
    ref_m = mp_reference(
        lambda t: (
            (1 + sqrt3 * mpmath.sqrt(2 - 2 * t) / mpmath.mpf("0.5"))
            * mpmath.exp(-sqrt3 * mpmath.sqrt(2 - 2 * t) / mpmath.mpf("0.5"))
        ),
        False,
    )
    ref_r = mp_reference(lambda t: max(t, 0), True)
    ours_m, ours_r = m.spectrum(D, L), A.ReLU().coefficients(D, L)
    def absrel(a, b):
        return np.max(np.abs(a - b)) / abs(b[0])
    print(
        f"accuracy vs mpmath (max |error| / lambda_0 over 31 levels): Matern-3/2 ours {absrel(ours_m, ref_m):.1e}, "
        f"scipy.quad {absrel(peer_m, ref_m):.1e}; ReLU ours {absrel(ours_r, ref_r):.1e}, scipy.quad {absrel(peer_relu, ref_r):.1e}"
    )
    print(f"ReLU structural zeros (odd l >= 3): ours max |c| = {np.abs(ours_r[3::2]).max():.1e}, "
          f"scipy.quad max |c| = {np.abs(peer_relu[3::2]).max():.1e}")


if __name__ == "__main__":
    main()
