r"""Accuracy against the number of features and against wall time (notebook 04): VISH fitted at
each degree L (:math:`M = \sum_{\ell \le L} N(\ell, d)` features), its ELBO, test NLPD and
seconds, beside the exact GP at the hyper-parameters of the largest fit — the limit the sparse
model reaches with every feature (Dutordoir et al. 2020 §3; Burt et al. 2019)."""

from __future__ import annotations

import copy
import time
import warnings
from typing import Callable

import numpy as np

from ..metrics import nlpd
from ..models import ExactGP
from ..models.report import capped
from ..widgets import capped_dpi

__all__ = ["degree_sweep", "plot_sweep"]


def degree_sweep(make_model: Callable[[int], object], X, y, X_test, y_test, degrees, exact: bool = True,
                 **fit_kwargs) -> dict:
    """Fit ``make_model(L)`` on (X, y) for each L in ``degrees`` (``fit_kwargs`` passed to
    ``fit``) and score it on the test set.

    Returns
    -------
    dict
        ``rows``: one dict per degree (``L``, ``M``, ``elbo``, ``nlpd``, ``mse``, ``seconds``,
        ``warnings``: what the fit reported, e.g. a degenerate lengthscale at a small M — kept
        with the row and marked in :func:`plot_sweep` instead of printed mid-sweep);
        ``exact``: the exact GP's test NLPD and MSE at the last model's hyper-parameters (when
        ``exact`` and the training set is small enough for a dense GP), else None.
    """
    rows, model = [], None
    for L in degrees:
        model = make_model(int(L))
        t0 = time.perf_counter()
        with warnings.catch_warnings(), capped():
            warnings.simplefilter("ignore", RuntimeWarning)  # recorded in fit_report_, kept with the row
            model.fit(X, y, **fit_kwargs)
        mean, var = model.predict_y(X_test)
        seconds = time.perf_counter() - t0
        report = getattr(model, "fit_report_", {}) or {}
        rows.append(dict(L=int(L), M=model.features.num_features, elbo=float(model.elbo()),
                         nlpd=nlpd(y_test, mean, var), mse=float(np.mean((mean - y_test) ** 2)), seconds=seconds,
                         warnings=list(report.get("warnings", []))))
    reference = None
    if exact and model is not None and len(y) <= 5000:
        gp = ExactGP(copy.deepcopy(model.kernel), float(model.likelihood.variance)).fit(X, y)
        mean, var = gp.predict_y(X_test)
        reference = dict(nlpd=nlpd(y_test, mean, var), mse=float(np.mean((mean - y_test) ** 2)),
                         lml=gp.log_marginal_likelihood())
    return dict(rows=rows, exact=reference)


def plot_sweep(sweep: dict, title: str = ""):
    """Test NLPD against M and against seconds, and the ELBO against M (the exact GP's NLPD and
    log marginal likelihood dashed). Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    rows, ref = sweep["rows"], sweep["exact"]
    M = [r["M"] for r in rows]
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(9.5, 3.0), dpi=capped_dpi(9.5))
    a.plot(M, [r["nlpd"] for r in rows], "o-", color="C0")
    b.plot([r["seconds"] for r in rows], [r["nlpd"] for r in rows], "o-", color="C0")
    c.plot(M, [r["elbo"] for r in rows], "o-", color="C2", label="ELBO")
    for r in rows:
        mark = "*" if r.get("warnings") else ""
        for ax, x in ((a, r["M"]), (b, r["seconds"])):
            ax.annotate(f"L={r['L']}{mark}", (x, r["nlpd"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    warned = [r["L"] for r in rows if r.get("warnings")]
    if ref is not None:
        for ax in (a, b):
            ax.axhline(ref["nlpd"], color="k", ls="--", lw=1, label="exact GP, same hyper-parameters")
        c.axhline(ref["lml"], color="k", ls="--", lw=1, label="exact log marginal likelihood")
        a.legend(fontsize=7)
        c.legend(fontsize=7)
    for ax, xl in ((a, "features M"), (b, "fit + predict (s)"), (c, "features M")):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(xl)
    a.set_ylabel("test NLPD")
    b.set_ylabel("test NLPD")
    c.set_ylabel("bound (standardised data)")
    a.set_title("accuracy against M", fontsize=9)
    b.set_title("accuracy against wall time", fontsize=9)
    c.set_title("ELBO against M", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    if warned:
        fig.subplots_adjust(bottom=0.26)
        fig.text(0.01, 0.01, f"* the fit at L = {', '.join(map(str, warned))} warned (sweep['rows'][i]['warnings']): "
                 f"{next(r for r in rows if r.get('warnings'))['warnings'][0][:110]}…", fontsize=7)
    return fig
