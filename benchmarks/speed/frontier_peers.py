"""The peers of the frontier benchmark (``frontier.py``): GPflow's SGPR and SVGP, GPyTorch's SVGP,
VNNGP and exact GP, each recorded along its fit as ``frontier.Timeline`` snapshots, evaluated afterwards.

Every peer gets its documented best start: inducing inputs by k-means on the training inputs
(GPflow's and GPyTorch's tutorials), a Matérn-3/2 ARD kernel with unit lengthscales, noise 0.1 on
standardised targets; VNNGP (GPyTorch's ``NNVariationalStrategy``) takes every training input as an
inducing input and k nearest neighbours. Needs the peers' environment (``make bench-peers``).
"""

from __future__ import annotations

import numpy as np


def kmeans_inputs(X: np.ndarray, M: int, seed: int) -> np.ndarray:
    from scipy.cluster.vq import kmeans2

    centres, _ = kmeans2(X, M, iter=10, minit="++", seed=seed)
    return centres


def gpflow_sgpr(data, M: int, budget: float, timeline, seed: int) -> tuple[list, str]:
    """SGPR by SciPy's L-BFGS-B (GPflow's ``Scipy``), snapshots of every variable each iteration,
    stopped at the budget or after 1 000 iterations."""
    import gpflow

    X, y, Xte, yte = data
    Z = kmeans_inputs(X, M, seed)
    k = gpflow.kernels.Matern32(lengthscales=np.ones(X.shape[1]))
    m = gpflow.models.SGPR((X, y[:, None]), kernel=k, inducing_variable=Z, noise_variance=0.1)
    snaps = []

    def step(i, variables, values):
        snaps.append((timeline.now(), [np.array(v) for v in values]))
        if timeline.now() > budget:
            raise StopIteration

    timeline.start()
    res = gpflow.optimizers.Scipy().minimize(m.training_loss, m.trainable_variables, step_callback=step,
                                            options={"maxiter": 1000})

    def evaluate(values):
        for var, val in zip(m.trainable_variables, values):
            var.assign(val)
        mean, var = m.predict_y(Xte)
        return mean.numpy()[:, 0], var.numpy()[:, 0]

    return [(t, evaluate(v)) for t, v in thin(snaps)], f"M = {M}, {res.nit} L-BFGS-B iterations"


def gpflow_svgp(data, M: int, budget: float, timeline, seed: int, batch: int = 256) -> tuple[list, str]:
    import gpflow
    import tensorflow as tf

    X, y, Xte, yte = data
    k = gpflow.kernels.Matern32(lengthscales=np.ones(X.shape[1]))
    m = gpflow.models.SVGP(k, gpflow.likelihoods.Gaussian(0.1), kmeans_inputs(X, M, seed), num_data=X.shape[0])
    opt = tf.optimizers.Adam(0.01)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = m.training_loss((xb, yb))
        opt.apply_gradients(zip(tape.gradient(loss, m.trainable_variables), m.trainable_variables))

    def predict():
        mean, var = m.predict_y(Xte)
        return mean.numpy()[:, 0], var.numpy()[:, 0]

    rng = np.random.default_rng(seed)
    return _adam_loop(lambda: (lambda i: step(tf.constant(X[i]), tf.constant(y[i, None])))(
        rng.choice(X.shape[0], batch, replace=False)), predict, budget, timeline), f"M = {M}, batch {batch}"


def gpytorch_svgp(data, M: int, budget: float, timeline, seed: int, batch: int = 256) -> tuple[list, str]:
    import gpytorch
    import torch

    torch.set_default_dtype(torch.float64)
    X, y, Xte, yte = data
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    Z = torch.from_numpy(kmeans_inputs(X, M, seed))

    class Model(gpytorch.models.ApproximateGP):
        def __init__(self):
            vd = gpytorch.variational.CholeskyVariationalDistribution(M)
            super().__init__(gpytorch.variational.VariationalStrategy(self, Z, vd, learn_inducing_locations=True))
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(1.5, ard_num_dims=X.shape[1]))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    return _torch_fit(Model(), Xt, yt, Xte, budget, timeline, seed, batch), f"M = {M}, batch {batch}"


class NotRun(Exception):
    """A peer that cannot run on this set (the reason is printed in its row)."""


#: the most rows VNNGP is run on (its neighbour index's set-up, not its fit, is the limit)
VNNGP_ROWS = 20_000


def gpytorch_vnngp(data, k: int, budget: float, timeline, seed: int, batch: int = 256) -> tuple[list, str]:
    """Variational nearest-neighbour GP (Wu et al. 2022): every training input an inducing input, each
    conditioned on its k nearest neighbours; minibatches of ``batch`` inducing points."""
    import gpytorch
    import torch

    torch.set_default_dtype(torch.float64)
    X, y, Xte, yte = data
    if X.shape[0] > VNNGP_ROWS:
        # without faiss GPyTorch builds its neighbour index by one scikit-learn fit per prefix of
        # the rows: quadratic in N (protein's 41 157 rows: unfinished after 7 minutes)
        raise NotRun(f"N = {X.shape[0]:,} > {VNNGP_ROWS:,}: GPyTorch's sequential neighbour index "
                          "(scikit-learn, no faiss) is quadratic in N")
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)

    class Model(gpytorch.models.ApproximateGP):
        def __init__(self):
            vd = gpytorch.variational.MeanFieldVariationalDistribution(X.shape[0])
            vs = gpytorch.variational.NNVariationalStrategy(self, Xt, vd, k=k, training_batch_size=batch)
            super().__init__(vs)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(1.5, ard_num_dims=X.shape[1]))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

        def __call__(self, x, prior=False, **kwargs):
            if x is not None and x.dim() == 1:
                x = x.unsqueeze(-1)
            return self.variational_strategy(x=x, prior=False, **kwargs)

    return _torch_fit(Model(), Xt, yt, Xte, budget, timeline, seed, batch, nn=True), f"k = {k}, batch {batch}"


#: the most rows an exact GP peer is run on: its N x N kernel matrix and factor in float64 (protein's
#: 41 157 rows would need 13.6 GB each)
EXACT_ROWS = 20_000


def gpytorch_exact(data, budget: float, timeline, seed: int, additive: bool = False) -> tuple[list, str]:
    """GPyTorch's exact GP as its regression tutorial trains it (Adam, learning rate 0.1, on the exact
    marginal likelihood, GPyTorch's default linear algebra: conjugate gradients above 800 rows), with a
    Matérn-3/2 kernel with ARD lengthscales, or (``additive``) a sum of one Matérn-3/2 per input, each
    with its own variance (the additive GP of Duvenaud et al. 2011 at first order). Unit lengthscales,
    the variance shared out to 1, noise 0.1. Predictions by a Cholesky factor (exact, outside the clock)."""
    import gpytorch
    import torch

    torch.set_default_dtype(torch.float64)
    torch.manual_seed(seed)
    X, y, Xte, yte = data
    N, D = X.shape
    if N > EXACT_ROWS:
        raise NotRun(f"N = {N:,} > {EXACT_ROWS:,}: the exact GP's N x N matrices do not fit in this machine's memory")
    Xt, yt, Xs = torch.from_numpy(X), torch.from_numpy(y), torch.from_numpy(Xte)

    def matern(**kw):
        k = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(1.5, **kw))
        k.base_kernel.lengthscale = 1.0
        k.outputscale = 1.0 / D if additive else 1.0
        return k

    class Model(gpytorch.models.ExactGP):
        def __init__(self, lik):
            super().__init__(Xt, yt, lik)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = (gpytorch.kernels.AdditiveKernel(*[matern(active_dims=(j,)) for j in range(D)])
                                 if additive else matern(ard_num_dims=D))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    lik = gpytorch.likelihoods.GaussianLikelihood()
    lik.noise = 0.1
    model = Model(lik)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)  # the likelihood is the model's submodule
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    steps = [0]

    def step():
        model.train()
        lik.train()
        opt.zero_grad()
        (-mll(model(Xt), yt)).backward()
        opt.step()
        steps[0] += 1

    def predict():
        model.eval()
        lik.eval()
        with torch.no_grad(), gpytorch.settings.max_cholesky_size(EXACT_ROWS):
            pred = lik(model(Xs))
            return pred.mean.numpy().copy(), pred.variance.numpy().copy()

    out = _adam_loop(step, predict, budget, timeline)
    kind = f"additive, {D} Matérn-3/2 components" if additive else "Matérn-3/2 ARD"
    return out, f"{kind}, {steps[0]} Adam steps"


def _torch_fit(model, Xt, yt, Xte, budget, timeline, seed, batch, nn=False) -> list:
    import gpytorch
    import torch

    lik = gpytorch.likelihoods.GaussianLikelihood()
    lik.noise = 0.1
    opt = torch.optim.Adam(list(model.parameters()) + list(lik.parameters()), lr=0.01)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=Xt.shape[0])
    g = torch.Generator().manual_seed(seed)

    def step():
        model.train()
        lik.train()
        opt.zero_grad()
        if nn:  # the strategy draws its own minibatch of inducing points and their rows
            output = model(x=None)
            idx = model.variational_strategy.current_training_indices
            loss = -mll(output, yt[idx])
        else:
            idx = torch.randint(0, Xt.shape[0], (batch,), generator=g)
            loss = -mll(model(Xt[idx]), yt[idx])
        loss.backward()
        opt.step()

    def predict():
        model.eval()
        lik.eval()
        with torch.no_grad():
            pred = lik(model(torch.from_numpy(Xte)))
            return pred.mean.numpy(), pred.variance.numpy()

    return _adam_loop(step, predict, budget, timeline)


def _adam_loop(step, predict, budget, timeline, checkpoints: int = 12) -> list:
    """Adam steps until the budget, predicting at about ``checkpoints`` times spread geometrically
    over it (the predictions outside the fit's clock)."""
    marks = list(budget * np.geomspace(0.02, 1.0, checkpoints))
    out = []
    timeline.start()
    while marks:
        step()
        if timeline.now() >= marks[0]:
            while marks and timeline.now() >= marks[0]:
                marks.pop(0)
            with timeline.paused():
                out.append((timeline.now(), predict()))
    return out


def thin(snaps: list, count: int = 14) -> list:
    """About ``count`` snapshots spread geometrically over the fit, always the last."""
    if len(snaps) <= count:
        return snaps
    keep = sorted(set(np.unique(np.geomspace(1, len(snaps), count).astype(int) - 1).tolist()) | {len(snaps) - 1})
    return [snaps[i] for i in keep]
