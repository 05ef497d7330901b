r"""The minibatch fits of :class:`~spherelab.VISH` (Hensman, Fusi & Lawrence 2013), with the
uncollapsed bounds of :mod:`spherelab.bounds.vish_svi`, through the same registry and
:meth:`~spherelab.models.base.Model.objective` as every other model.

q(u) = N(``q_mu``, ``q_sqrt q_sqrt^T``) is in the registry as ``q_mu`` and ``q_sqrt`` (a
triangular entry) once :meth:`~spherelab.VISH.fit_svi` has made it:

* Gaussian likelihood: q by natural-gradient steps of size :math:`\gamma` in the natural
  parameters, :math:`S^{-1} \leftarrow (1-\gamma)S^{-1} + \gamma(\Lambda +
  \tfrac NB \Lambda\Phi_b^\top\Phi_b\Lambda/\sigma^2)`, :math:`S^{-1}m \leftarrow
  (1-\gamma)S^{-1}m + \gamma\tfrac NB\Lambda\Phi_b^\top y_b/\sigma^2`; then Adam on the objective of
  the spectrum, the noise and trainable directions. The registry holds q as it is.
* Other likelihoods: Adam on the objective of the spectrum, the directions and q, which the registry
  holds whitened: the prior of u is :math:`N(0, \Lambda^{-1})`, so the entries are
  :math:`m_w = \Lambda^{1/2}m`, :math:`L_w = \Lambda^{1/2}L`, q starts at the prior
  (:math:`m_w = 0`, :math:`L_w = I`; the initial KL is 0) and every entry is O(1) whatever the
  spectrum's decay.

The lift (``bias``, ``input_scale``) is in the registry and its gradient is exact, but fit_svi keeps
it fixed.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from scipy.linalg import cho_solve

from ..bounds.vish_svi import uncollapsed_bound, uncollapsed_bound_general, whiten
from ..likelihoods import Gaussian
from ..linalg import NumericalFailure, cholesky_or_explain
from ..optim import Adam, natural_step
from ..parameters import Param

__all__ = ["q_params", "uncollapsed_objective", "svi_fit", "whitened"]


def whitened(model) -> bool:
    """Whether the registry holds q whitened (every likelihood but the Gaussian, module docstring)."""
    return not isinstance(model.likelihood, Gaussian)


def q_params(model) -> list[Param]:
    """Registry entries of q(u): ``q_mu`` (free) and ``q_sqrt`` (triangular), whitened by
    :math:`\\Lambda^{1/2}` for non-Gaussian likelihoods. They follow the kernel's entries in the
    registry, so a whitened q is unwhitened with the spectrum just set."""
    def root():
        if whitened(model):
            return np.sqrt(model.features.Kuu_inverse_diag(model.kernel))
        return np.ones(model.q_mu.size)

    def set_mu(v):
        model.q_mu = np.asarray(v, dtype=np.float64) / root()

    def set_sqrt(v):
        model.q_sqrt = np.asarray(v, dtype=np.float64) / root()[:, None]

    return [Param("q_mu", lambda: root() * model.q_mu, set_mu),
            Param("q_sqrt", lambda: root()[:, None] * model.q_sqrt, set_sqrt, "tril")]


def uncollapsed_objective(model, X: np.ndarray, y: np.ndarray, num_data: int | None = None,
                          names: Sequence[str] | None = None, gradients: bool = True):
    """The uncollapsed bound of the model's q(u) on the rows (X, y) (validated), an unbiased
    estimate of the whole data's when ``num_data`` > len(y), and its derivatives by registry name:
    the spectrum (:meth:`~spherelab.kernels.ZonalKernel.spectrum_vjp`), the likelihood's own
    parameters, q (whitened as the registry holds it), and — only when ``names`` asks for one —
    the lift and trainable directions through :math:`\\partial L/\\partial K_{uf}` and
    :math:`\\partial L/\\partial r_n^2`."""
    feats, kern, lik = model.features, model.kernel, model.likelihood
    ev = feats.evaluate(kern, X, ops=model.ops)
    Phi, r2 = feats.Kuf_from(ev).T, ev.r * ev.r
    lam, v = feats.Kuu_inverse_diag(kern), kern.at_one()
    n = len(y) if num_data is None else num_data
    lift = gradients and (names is None or any(p in names for p in (*kern.lift_zeros(), "directions")))
    m, L = model.q_mu, model.q_sqrt
    if isinstance(lik, Gaussian):
        res = uncollapsed_bound(lam, v, lik.variance, m, L, Phi, y, r2, n, model.charges_residual, phi_gradient=lift)
    else:
        res = uncollapsed_bound_general(lam, v, lik, m, L, Phi, y, r2, n, model.charges_residual, phi_gradient=lift)
    if not gradients:
        return res.value, None
    if whitened(model):
        res = whiten(res, lam, m, L)
    g: dict[str, Any] = feats.spectrum_vjp(kern, res.dlam, res.dv)
    g.update(res.dlikelihood)
    if isinstance(lik, Gaussian):
        g["noise"] = res.dnoise
    g["q_mu"], g["q_sqrt"] = res.dm, res.dL
    if lift:
        through_values = feats.Kuf_gradients(kern, res.dPhi.T, X, ev, ops=model.ops)
        through_r2 = kern.radii_backward(X, ev.r, ev.Xh, res.dr2)
        for name in kern.lift_zeros():  # bias and input_scale (an additive kernel's: each component's)
            g[name] = through_values[name] + through_r2[name]
        if "directions" in through_values:
            g["directions"] = through_values["directions"]
    return res.value, g


def _moments(precision, theta1):
    """Mean and Cholesky factor of S from the natural parameters (S = P^-1 = Lp^-T Lp^-1)."""
    Lp = cholesky_or_explain(precision, "S^-1 (q(u) precision)", "lower gamma or lr")
    Linv = np.linalg.inv(Lp)
    return cho_solve((Lp, True), theta1), np.linalg.cholesky(Linv.T @ Linv)


def svi_fit(model, X, y, B: int, iterations: int, lr: float, gamma: float, seed: int,
            train_directions: bool, progress=None) -> None:
    """The minibatch loop (module docstring): q starts at the prior, each step draws B rows, takes
    the natural step of a Gaussian q, and one Adam step of the registry's entries on
    :meth:`~spherelab.models.base.Model.objective`. The bound's estimate of each step is kept
    in ``model.trace`` (and told to ``progress``, a :class:`~spherelab.progress.FitProgress`)."""
    rng = np.random.default_rng(seed)
    feats, kern, n = model.features, model.kernel, X.shape[0]
    lam = feats.Kuu_inverse_diag(kern)
    model.q_mu, model.q_sqrt = np.zeros(lam.size), np.diag(1.0 / np.sqrt(lam))  # the prior: K_uu = Lambda^-1
    natural = not whitened(model)
    names = [*kern.spectral_parameter_names, *model.likelihood.parameters]
    if train_directions and feats.trainable:
        names.append("directions")
    if not natural:
        names += ["q_mu", "q_sqrt"]
    precision, theta1 = np.diag(lam), np.zeros(lam.size)
    opt = Adam(model.parameter_vector(names), lr)
    model.trace = []
    for _ in range(iterations):
        idx = rng.choice(n, size=min(B, n), replace=False)
        Xb, yb = X[idx], y[idx]
        if natural:
            lam = feats.Kuu_inverse_diag(kern)
            PL = feats.Kuf(kern, Xb, ops=model.ops).T * lam  # Phi Lambda
            noise, scale = model.likelihood.variance, n / idx.size
            theta1, precision = natural_step(theta1, precision, scale * PL.T @ yb / noise,
                                             np.diag(lam) + scale * PL.T @ PL / noise, gamma)
            model.q_mu, model.q_sqrt = _moments(precision, theta1)
        value, grad = model.objective(opt.x, Xb, yb, names=names, num_data=n)
        if value >= 1e300:
            raise NumericalFailure("a minibatch step left the usable range (a failed Cholesky or an overflow); "
                                   "lower lr or gamma")
        model.set_parameter_vector(opt.step(-grad), names)  # the objective's gradient is the negated ELBO's
        model.trace.append(-value)
        if progress is not None:
            progress(-value)
