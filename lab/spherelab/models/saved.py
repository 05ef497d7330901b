r"""How each model is rebuilt from a model file (:mod:`spherelab.persistence`); what it writes is
its saved fields (:class:`~spherelab._state.Fields`, declared in the model's class).

A model is rebuilt through its constructor — which validates the kernel, likelihood, features
and options, and builds every derived object — and then given its fitted state: variational
parameters or sufficient statistics whose shapes are checked against the sizes the rebuilt
features, groups and inputs declare. Training data are entries ``X`` and ``y`` (written only
with ``include_data``, except for :class:`~spherelab.models.ExactGP`, whose posterior they are).
"""

from __future__ import annotations

from .._state import LoadedState

__all__ = ["load_common"]


def load_common(model, s: LoadedState, inputs: int | None) -> None:
    """Fit report and training data (``inputs`` columns, when the model knows them)."""
    if not s.is_null("fit_report"):
        model.fields.write(model, "fit_report", s.report("fit_report"))
    X = s.array("X", shape=(None, inputs), optional=True)
    y = None if X is None else s.array("y", shape=(X.shape[0],))
    if X is None and not s.is_null("y"):
        raise s.fail("y", "null when X is")
    model.fields.write(model, "X", X)
    model.fields.write(model, "y", y)


def load_vish(cls, s: LoadedState):
    from ..bounds.statistics import Statistics
    from ..features.harmonic import SphericalFeatures
    from ..kernels import Additive, ZonalKernel

    given = s.obj("given_features", SphericalFeatures, optional=True)
    model = cls(s.obj("kernel", (ZonalKernel, Additive)), s.int("max_degree", minimum=0, optional=True),
                s.value("likelihood"),
                chunk_size=s.int("chunk_size", minimum=1, optional=True), features=given,
                prior=s.str("prior", ("kernel", "features")), gram_dtype=s.str("gram_dtype", ("float64", "float32")))
    features = s.obj("features", SphericalFeatures, optional=True)
    model.passes = s.int("passes", minimum=0)
    inputs = None
    if features is not None:
        if given is not None and features is not given:
            raise s.fail("features", "the given features themselves")
        if features.max_degree != model.max_degree or getattr(features, "harmonics", True) is None:
            raise s.fail("features", f"initialised features of max_degree {model.max_degree}")
        model.features, M, inputs = features, features.num_features, features.dim - 1
        stats = s.obj("stats", Statistics, optional=True)
        if stats is not None and stats.G.shape != (M, M):
            raise s.fail("stats", f"statistics of the {M} features (G of shape ({M}, {M}))")
        model.stats = stats
        model.q_mu = s.array("q_mu", shape=(M,), optional=True)
        model.q_sqrt = s.array("q_sqrt", shape=(M, M), optional=model.q_mu is None)
    else:
        for name in ("stats", "q_mu", "q_sqrt"):
            if not s.is_null(name):
                raise s.fail(name, "null for a model not fitted (no features)")
    load_common(model, s, inputs)
    return model


def load_decoupled(cls, s: LoadedState):
    from ..features import Features
    from ..kernels import ZonalKernel

    K = s.int("num_orthogonal", minimum=0)
    options = {"whiten": s.bool("whiten"), "jitter": s.float("jitter", minimum=0.0),
               "sufficient_statistics": s.bool("sufficient_statistics")}
    W = s.array("W", shape=(K, None), optional=True)
    kernel, features, likelihood = s.obj("kernel", ZonalKernel), s.obj("features", Features), s.value("likelihood")
    init = s.str("orthogonal_init", ("random", "greedy")) if s.has("orthogonal_init") else "random"
    if cls.__name__ == "ActivatedSVGP":  # K = 0 by construction
        if K != 0:
            raise s.fail("num_orthogonal", "0 for an ActivatedSVGP", K)
        model = cls(kernel, features, likelihood, **options)
        model.W = W
    else:
        model = cls(kernel, features, K, likelihood, orthogonal_inputs=init if W is None else W, **options)
        model.orthogonal_init = init
    D = s.int("input_dim", minimum=1, optional=True)
    if s.is_null("m_u"):
        for name in ("L_u", "m_v", "L_v"):
            if not s.is_null(name):
                raise s.fail(name, "null for a model not initialised")
    else:
        if D is None or W is None or W.shape[1] != D:
            raise s.fail("input_dim", "the number of inputs of an initialised model (W's columns)", D)
        _check_initialised_features(features, D, s)
        _check_within_the_lift(kernel, features, W, s)
        M = features.num_features
        model.m_u, model.L_u = s.array("m_u", shape=(M,)), s.array("L_u", shape=(M, M))
        model.m_v, model.L_v = s.array("m_v", shape=(K,)), s.array("L_v", shape=(K, K))
        model.fields.write(model, "input_dim", D)
    load_common(model, s, D)
    return model


def _check_initialised_features(features, D: int, s: LoadedState) -> None:
    """Features of an initialised decoupled model must live on S^D (or in R^D for points)."""
    Z = getattr(features, "Z", None)
    weights = getattr(features, "weights", None)
    if Z is not None:
        ok = Z.shape[1] == D
    elif hasattr(features, "weights"):
        ok = weights is not None and weights.shape[1] == D + 1
    else:
        ok = getattr(features, "harmonics", True) is not None and features.dim == D + 1
    if not ok:
        raise s.fail("features", f"features initialised for {D} inputs")


def _check_within_the_lift(kernel, features, W, s: LoadedState, w_name: str = "W") -> None:
    """Inducing and orthogonal inputs the kernel can lift (finite, and within its range at the
    saved input scale): a file must not hold a model that fails only when it predicts."""
    for name, inputs in (("features", getattr(features, "Z", None)), (w_name, W)):
        if inputs is not None and inputs.size:
            try:
                kernel.check_lift(inputs, name)
            except ValueError as err:
                raise s.fail(name, f"inputs the kernel can lift ({err})") from None


def load_hvgp(cls, s: LoadedState):
    from ..groups import Antipodal, Group
    from ..kernels import ZonalKernel

    group = s.obj("group", (Group, Antipodal))
    sizes = s.value("sizes")
    # each real component pairs at most two indices t, -t: a group with more than twice as many
    # elements as the saved blocks cannot be this model's (and its decomposition is not built)
    if not isinstance(sizes, list) or not sizes or group.size > 2 * len(sizes) \
            or not all(isinstance(m, int) and not isinstance(m, bool) and m >= 1 for m in sizes):
        raise s.fail("sizes", f"one positive block size per real component of the group (|G| = {group.size})",
                     sizes)
    D = s.int("input_dim", minimum=1, optional=True)
    Z = None if s.is_null("Z") else s.arrays("Z", [(m, D) for m in sizes])
    model = cls(s.obj("kernel", ZonalKernel), group, sizes, s.value("likelihood"), inducing_inputs=Z,
                jitter=s.float("jitter", minimum=0.0))
    for c, z in enumerate(Z or []):
        _check_within_the_lift(model.kernel, None, z, s, f"Z[{c}]")
    if s.is_null("ms"):
        if not s.is_null("Ls"):
            raise s.fail("Ls", "null for a model not initialised")
    else:
        if Z is None or D is None:
            raise s.fail("Z", "the inducing inputs of an initialised model")
        model.ms = s.arrays("ms", [(m,) for m in model.sizes])
        model.Ls = s.arrays("Ls", [(m, m) for m in model.sizes])
        model.fields.write(model, "input_dim", D)
    load_common(model, s, D)
    return model


def load_exact(cls, s: LoadedState):
    from ..kernels import Additive, ZonalKernel

    model = cls(s.obj("kernel", (ZonalKernel, Additive)), s.value("noise"))
    X = s.array("X", shape=(None, None), optional=True)
    if X is not None:
        n = X.shape[0]
        s.check_work(n ** 3 / 3.0, f"the Cholesky factor of {n:,} rows")  # before it is spent
        model.fit(X, s.array("y", shape=(n,)))  # the factor is computed again, never read
    elif not s.is_null("y"):
        raise s.fail("y", "null when X is")
    if s.has("fit_report") and not s.is_null("fit_report"):
        model.fit_report_ = s.report("fit_report")
    return model

