"""The explorers behind the notebooks: built once, artists updated in place, cached recomputes,
numbers that match the library."""

from __future__ import annotations

import threading
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import spherelab as sl  # noqa: E402
from conftest import toy_data  # noqa: E402
from spherelab import activations as A  # noqa: E402
from spherelab import kernels as K  # noqa: E402
from spherelab.explore import ComponentSampler, DecompositionExplorer, MismatchExplorer, component_title  # noqa: E402
from spherelab.groups import Reflection, Rotation  # noqa: E402

pytest.importorskip("ipywidgets")

KERNELS = {"arc-cosine, order 1": lambda d: K.ArcCosine(1), "Matérn-5/2": lambda d: K.Matern(2.5, 1.0)}
ACTIVATIONS = {"ReLU": A.ReLU(), "erf": A.Erf()}


def test_mismatch_explorer_updates_in_place_and_reports():
    ex = MismatchExplorer(KERNELS, ACTIVATIONS, kernel="arc-cosine, order 1")
    artists = list(ex.ax.get_children())
    assert ex.rep["activation_only_zero"].size == 0  # ReLU matches the order-1 arc-cosine kernel
    ex.act.value = "erf"
    ex.dim.value = 7
    assert ex.rep["kernel_only_zero"][:3].tolist() == [3, 5, 7]
    assert list(ex.ax.get_children()) == artists  # no artist added
    ell, k = ex.k_line.get_data()
    lam = K.ArcCosine(1).spectrum(7, 20)
    assert np.allclose(np.nan_to_num(k) ** 2, np.where(lam > 1e-300, lam, 0.0), rtol=1e-12)
    lo, hi = ex.ax.get_ylim()
    finite = np.concatenate([k[np.isfinite(k)], ex.a_line.get_data()[1][np.isfinite(ex.a_line.get_data()[1])]])
    assert lo < finite.min() and finite.max() < hi and hi / lo < 1e40  # the curves fill the axes
    calls = len(ex._spectra)
    ex.dim.value = 3
    ex.dim.value = 7  # both seen before: from the cache
    assert len(ex._spectra) == calls


def test_component_titles():
    comps = sl.harmonic_decomposition(K.Matern(2.5), Rotation(2, 4))
    assert [component_title(c) for c in comps] == ["k_0", "k_1 + k_3", "k_2"]
    comps = sl.harmonic_decomposition(K.Matern(2.5), Reflection(2))
    assert component_title(comps[1]) == "k_(0,1)"


def test_component_samples_sum_to_a_draw_of_k_and_reuse_factors():
    g = np.linspace(-2, 2, 12)
    G1, G2 = np.meshgrid(g, g)
    P = np.c_[G1.ravel(), G2.ravel()]
    base = K.Matern(2.5, 0.6, bias=0.5)
    sampler = ComponentSampler(base, P)
    comps, roots = sampler.factors("rot4", Rotation(2, 4))
    # the components' roots square to K_t, and their squares sum to K on the symmetric grid
    total = sum(R @ R for R in roots)
    assert np.allclose(total, base.K(P), atol=1e-8 * np.abs(base.K(P)).max())
    assert sampler.cached("rot4") and not sampler.cached("other")
    first = sampler.samples("rot4", Rotation(2, 4), 0)[1]
    again = sampler.samples("rot4", Rotation(2, 4), 0)[1]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_decomposition_explorer_seed_moves_do_not_refactor(monkeypatch):
    groups = {"rotation by 2π/T": lambda T: Rotation(2, T), "reflect x₁ and x₂": lambda T: Reflection(2)}
    ex = DecompositionExplorer(K.Matern(2.5, 0.6, bias=0.5), groups, grid_size=10)
    assert ex.sampler.wait(60)  # the neighbouring T and the other group, computed ahead
    assert ex.sampler.cached(("rotation by 2π/T", 3)) and ex.sampler.cached(("reflect x₁ and x₂", 4))
    eigh_calls = []  # on the main thread, where a move waits
    real = np.linalg.eigh
    main = threading.main_thread()
    monkeypatch.setattr(np.linalg, "eigh",
                        lambda A: (eigh_calls.append(1) if threading.current_thread() is main else None) or real(A))
    ex.seed.value = 3
    assert eigh_calls == []  # a new sample reuses the factors
    ex.T.value = 3
    assert eigh_calls == []  # computed ahead
    ex.sampler.wait(60)
    ex.T.value = 7  # two moves away: computed on the spot
    assert len(eigh_calls) == len(ex.components)
    assert "real components" in ex.status.value
    ex.group.value = "reflect x₁ and x₂"
    titles = [a.get_title() for a in ex.axes if a.get_visible()]
    assert titles[-1] == "sum: a draw of $k$" and titles[0] == "$k_{(0,0)}$"  # subscripts set as such
    # the colour bar beside the last panel shown, not after the hidden ones; ticks on every panel
    last = [a for a in ex.axes if a.get_visible()][-1].get_position()
    assert 0 < ex.cax.get_position().x0 - last.x1 < 0.02
    assert all(list(a.get_xticks()) == [-2, 0, 2] for a in ex.axes)


def test_truncation_explorer_errors_fall_and_norms_match_the_library():
    from spherelab.explore import TruncationExplorer

    acts = {"ReLU": A.ReLU(), "softplus": A.Softplus(3.0)}
    ex = TruncationExplorer(acts, {"arc-cosine": lambda d: K.ArcCosine(1)}, max_level=20)
    errs = []
    for L in (2, 8, 20):
        ex.L.value = L
        errs.append(ex.err)
    assert errs[0] > errs[1] > errs[2]
    ex.dim.value = 5
    _, norms = ex.norm_lines["softplus"].get_data()
    lam = K.ArcCosine(1).spectrum(5, 20)
    assert np.allclose(norms, sl.rkhs_norm_truncated(A.Softplus(3.0).coefficients(5, 20), lam, 5), rtol=1e-12)


def test_degree_explorer_bound_rises_to_the_exact_gp():
    from spherelab.explore import DegreeExplorer

    X, y = sl.datasets.snelson_like(80, seed=0)
    ex = DegreeExplorer(X, y, K.Matern(1.5, 1.0), max_degree=10)
    assert np.all(np.diff(ex.elbos) >= -1e-8 * np.abs(ex.elbos[1:]))
    assert ex.elbos[-1] <= ex.exact_lml + 1e-8 * abs(ex.exact_lml)
    ex.L.value = 10
    _, mean = ex.mean.get_data()
    assert np.array_equal(mean, ex.means[10]) and ex.title.get_text().startswith("L = 10, M = 21")


def test_orthogonal_explorer_terms_sum_to_the_variance_and_fits_are_cached():
    from spherelab.explore import OrthogonalExplorer

    X, y = sl.datasets.snelson_like(60, seed=1)
    ex = OrthogonalExplorer(X, y, {"Matérn-5/2": lambda: K.Matern(2.5, 1.0)}, {"ReLU": A.ReLU()}, units=4,
                            maxiter=10, levels=3, orthogonal=2)
    _, var = ex.current["model"].predict_f(ex.grid)
    assert np.allclose(sum(ex.current["terms"].values()), var, atol=1e-10)
    assert np.allclose(ex.total.get_data()[1], var, atol=1e-10)
    first = ex.current["model"]
    assert ex.fits.wait(120)
    neighbours = ex.neighbours(("Matérn-5/2", "ReLU", 3, 2))
    assert ("Matérn-5/2", "ReLU", 4, 2) in neighbours and ("Matérn-5/2", "ReLU", 3, 1) in neighbours
    assert all(ex.fits.ready(k) for k in neighbours)  # fitted ahead, in the background
    ahead = ex.fits.get(("Matérn-5/2", "ReLU", 3, 3))
    ex.K.value = 3
    assert ex.current is ahead
    ex.K.value = 2  # fitted before: the same model object, no refit
    assert ex.current["model"] is first


def test_the_fit_bar_follows_only_the_fit_of_the_configuration_shown():
    """The explorers' refits report to a progress bar (not a bare "fitting…"): the fit of the
    configuration on screen, never the fits computed ahead."""
    from spherelab.explore import OrthogonalExplorer

    X, y = sl.datasets.snelson_like(40, seed=3)
    ex = OrthogonalExplorer(X, y, {"Matérn-5/2": lambda: K.Matern(2.5, 1.0)}, {"ReLU": A.ReLU()}, units=4,
                            maxiter=8, levels=2, orthogonal=1)
    assert ex.fitbar.box.layout.visibility == "hidden" and ex.fitbar.box in ex.widget().children
    assert ex.fits.wait(120)
    seen = []
    ex.fitbar.step = lambda *report: seen.append(report)
    key = ("Matérn-5/2", "ReLU", 6, 1)
    ex._want = ("Matérn-5/2", "ReLU", 2, 1)  # another configuration on screen: this fit runs ahead, silent
    ex._fit(key)
    assert seen == [] and ex.fitbar.box.layout.visibility == "hidden"
    ex._want = key
    ex._fit(key)
    assert [r[0] for r in seen] == list(range(1, len(seen) + 1)) and 1 <= len(seen) <= 8
    assert ex.fitbar.box.layout.visibility == "hidden"  # closed with its fit


def test_the_fit_bar_reports_iterations_and_time_left_and_draws_in_its_loop():
    import asyncio
    import threading

    from spherelab.explore import FitBar

    bar = FitBar(every=0.0)
    bar.start("OrthogonalSVGP.fit", 100, 30.0)
    assert bar.report(10, -12.5, 2.0, None) == (
        10, 100, "OrthogonalSVGP.fit · iteration 10 of at most 100 · bound -12.5 · 2.0 s · at most 18 s left")
    bar.step(10, -12.5, 2.0, None)
    assert (bar.bar.value, bar.bar.max, bar.box.layout.visibility) == (10, 100, "visible")
    bar.start("VISH.fit", None, None)
    assert bar.report(3, 1.0, 0.5, "lift") == (3, 20, "VISH.fit · lift · iteration 3 · bound 1 · 0.5 s")
    bar.close()
    assert bar.box.layout.visibility == "hidden" and bar.text.value == ""

    async def in_a_kernel():  # a worker thread's report waits for the loop's thread (widgets' messages)
        bar = FitBar(every=0.0)
        bar.start("x", 10, None)
        worker = threading.Thread(target=bar.step, args=(3, 1.0, 0.3, None))
        worker.start()
        worker.join()
        before = bar.bar.value
        await asyncio.sleep(0)
        return before, bar.bar.value

    assert asyncio.run(in_a_kernel()) == (0, 3)


def test_depth_explorer_and_phase_viewer():
    from spherelab.explore import DepthExplorer, PhaseViewer

    X, y = sl.datasets.snelson_like(60, seed=2)
    ex = DepthExplorer(X, y, max_degree=10, betas=np.linspace(0.5, 6.0, 5), maxiter=30)
    assert len(ex.elbos) == 5 and ex.kernel.beta == ex.beta_star
    ex.beta.value = 1.0
    assert ex.kernel.beta == 1.0 and np.isclose(ex.elbo, ex.model.elbo())
    lam = ex.kernel.spectrum(2, 10)
    assert np.allclose(ex.spec.get_data()[1], lam[1:] / lam[1])
    snaps = [[np.eye(3)[:1]] + [np.eye(3)[:2] * (1 + 0 * k) for _ in range(3)] for k in range(3)]
    viewer = PhaseViewer(snaps)
    viewer.round.value = 0
    assert viewer.ax.get_title() == "phase directions after round 0 of 2"


def test_harmonics_gallery_and_addition_theorem():
    from spherelab.explore import AdditionTheorem, HarmonicsGallery

    gal = HarmonicsGallery(max_degree=6, map_size=(24, 48), globe_size=40)
    gal.degree.value = 5
    gal.order.value = 7
    assert gal.title.get_text() == "degree ℓ = 5, order m = 4 · cos"
    gal.view.value = 40.0
    top = max(np.abs(gal.im_map.get_array()).max(), np.abs(gal.im_globe.get_array()).max())
    assert np.isclose(top, 1.0) and gal.im_map.get_clim() == (-1, 1)  # relative colours, fixed colour bar
    add = AdditionTheorem(max_degree=6, map_size=(24, 48))
    for ell in (0, 3, 6):
        add.degree.value = ell
        assert add.err < 1e-11
    assert np.abs(add.dots.get_data()[1]).max() <= 1.0 + 1e-12  # |Z_l| <= N(l, 3)


def test_precomputer_computes_ahead_once_and_waits_for_the_background():
    from spherelab.explore import Precomputer

    calls, gate = [], threading.Event()

    def compute(key):
        calls.append(key)
        if key == "slow":
            gate.wait(5)
        if key == "bad":
            raise ValueError("bad key")
        return key * 2

    pre = Precomputer(compute, max_items=3)
    pre.ahead(["slow", "a", "bad"])
    threading.Timer(0.05, gate.set).start()
    assert pre.get("slow") == "slowslow"  # waited for the background's computation, not redone
    assert pre.wait(5) and pre.ready("a") and not pre.ready("bad")
    with pytest.raises(ValueError, match="bad key"):  # a background failure is met by the caller
        pre.get("bad")
    assert calls.count("slow") == 1 and calls.count("a") == 1 and calls.count("bad") == 2
    pre.get("a")  # used last: kept
    pre.get("b")
    pre.get("c")  # three kept: the least recently used ("slow") dropped
    assert not pre.ready("slow") and pre.ready("a") and pre.ready("c")


def test_precomputer_in_an_event_loop_answers_later_and_only_the_newest():
    """Inside a running loop (a Jupyter kernel) a missing value is computed on a worker thread and
    handed over in the loop's thread; of the requests made meanwhile only the newest runs."""
    import asyncio

    from spherelab.explore import Precomputer

    async def scenario():
        gate, calls, got = threading.Event(), [], []
        main = threading.current_thread()

        def compute(key):
            calls.append(key)
            gate.wait(5)
            return key + 100

        pre = Precomputer(compute)
        assert pre.when_ready(1, got.append) is False  # answered later, the loop free meanwhile
        await asyncio.sleep(0.05)
        assert pre.when_ready(2, got.append) is False
        assert pre.when_ready(3, lambda v: got.append((v, threading.current_thread() is main))) is False
        gate.set()
        for _ in range(200):
            if len(got) == 2:
                break
            await asyncio.sleep(0.01)
        assert got == [101, (103, True)] and calls == [1, 3]  # 2 was superseded before it started
        assert pre.when_ready(3, got.append) is True and got[-1] == 103  # at hand: at once

    asyncio.run(scenario())


def test_on_sphere_is_the_model_divided_by_the_radius_and_blank_below():
    """g(x̂) = f(x) / r at the lifted inputs (and their sd likewise); no value where no input maps."""
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        from spherelab.explore import on_sphere, sphere_posterior

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(60)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model = sl.VISH(K.Matern(1.5, 1.0, bias=0.7, input_scale=np.array([1.3, 0.8])), 5).fit(X, y, maxiter=30)
    r, Xh = model.kernel.lift(X)
    mean, sd = on_sphere(model, Xh)
    mu, var = model.predict_f(X)
    assert np.allclose(mean * r, mu, rtol=1e-9, atol=1e-12) and np.allclose(sd * r, np.sqrt(var), rtol=1e-9)
    below = np.array([[0.0, 0.6, -0.8], [1.0, 0.0, 0.0]])
    assert np.all(np.isnan(on_sphere(model, below)[0]))
    fig = sphere_posterior(model, X, y, map_size=(10, 20), globe_size=20, grid_size=10)
    assert len(fig.axes) >= 6 and "posterior" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match="two inputs"):
        sphere_posterior(model, np.zeros((5, 3)))


def test_degree_sweep_rises_towards_the_exact_gp():
    """The bound grows with M and stays below the exact log marginal likelihood at the last
    fit's hyper-parameters; the plot has the three panels."""
    from spherelab.explore import degree_sweep, plot_sweep

    X, y = sl.datasets.snelson_like(120, seed=2)
    sweep = degree_sweep(lambda L: sl.VISH(K.Matern(1.5, 1.0), L, prior="kernel"), X[:100], y[:100], X[100:], y[100:],
                         [2, 6, 12], maxiter=50)
    rows = sweep["rows"]
    assert [r["M"] for r in rows] == [5, 13, 25] and all(r["seconds"] > 0 for r in rows)
    assert rows[-1]["elbo"] <= sweep["exact"]["lml"] + 1e-8 * abs(sweep["exact"]["lml"])
    assert len(plot_sweep(sweep, "t").axes) == 3


def test_orthogonal_explorer_variance_terms_are_each_readable_under_arc_cosine():
    """K_ff and -Q_ff reach hundreds and cancel under an arc-cosine kernel; the variance panel must
    still show every term that matters at a readable height (a linear axis squashed them flat)."""
    from spherelab.explore import OrthogonalExplorer

    X, y = sl.datasets.snelson_like(80, seed=1)
    ex = OrthogonalExplorer(X, y, {"arc-cosine": lambda: K.ArcCosine(1)}, {"ReLU": A.ReLU()}, units=6,
                            maxiter=30, levels=4, orthogonal=3)
    ex.fits.wait(120)
    ex.fig.canvas.draw()
    height = ex.ax_var.get_window_extent().height
    total = np.abs(ex.total.get_data()[1]).max()
    for name, line in [*ex.term_lines.items(), ("total", ex.total)]:
        values = line.get_data()[1]
        if np.abs(values).max() < 0.05 * total:
            continue
        pixels = ex.ax_var.transData.transform(np.c_[np.zeros(2), [values.min(), values.max()]])[:, 1]
        assert np.ptp(pixels) > 0.04 * height or np.abs(values).max() < 0.2 * total, name
        y0, y1 = ex.ax_var.get_ylim()
        assert y0 <= values.min() and values.max() <= y1, name


def test_explorer_figures_have_clear_layouts_and_their_colour_bars():
    """The gallery's colour-bar label sat under the globe; the decomposition explorer had no colour
    bar: every text clear of the panels it does not label, and each image explorer with a bar."""
    from spherelab.explore import DecompositionExplorer, HarmonicsGallery
    from spherelab.groups import Rotation

    gallery = HarmonicsGallery(max_degree=4, map_size=(24, 48), globe_size=40)
    decomposition = DecompositionExplorer(K.Matern(2.5, 0.6, bias=0.5), {"rotation": lambda T: Rotation(2, T)},
                                          grid_size=16, max_panels=4)
    for explorer, label in ((gallery, "value / its largest |value|"), (decomposition, "f(x)")):
        assert sl.widgets.overlapping_text(explorer.fig) == []
        assert label in [ax.get_ylabel() for ax in explorer.fig.axes]


def test_overlapping_text_finds_a_label_over_a_panel():
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(4, 2))
    a.set_ylabel("a long label that spills")
    b.set_ylabel("a label drawn over the left panel " * 3)
    assert sl.widgets.overlapping_text(fig)
    plt.close(fig)


def test_overlapping_text_finds_text_and_legends_cut_at_the_canvas_edge():
    """A figure shown as it is (ipympl) loses whatever reaches past its canvas: a colour bar's tick
    labels, a legend pushed right."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 2))
    fig.subplots_adjust(left=0.2, right=0.8, bottom=0.25, top=0.85)
    ax.plot([0, 1], [0, 1], label="a line")
    assert sl.widgets.overlapping_text(fig) == []
    ax.set_title("a title far too long for a figure four inches wide " * 2)
    assert any("cut at the canvas's left and right edge" in d for d in sl.widgets.overlapping_text(fig))
    ax.set_title("")
    ax.legend(loc="center left", bbox_to_anchor=(1.1, 0.5))
    assert sl.widgets.overlapping_text(fig) == ["a legend is cut at the canvas's right edge"]
    plt.close(fig)


def test_blitting_after_the_figure_was_closed_is_a_no_op():
    """The inline backend (documentation builds) closes each figure it has shown; a later slider
    move must not fail on the closed figure's bare canvas."""
    import matplotlib.pyplot as plt
    from matplotlib.backend_bases import FigureCanvasBase

    fig, ax = plt.subplots()
    (line,) = ax.plot([0, 1], [0, 1])
    blit = sl.widgets.BlitManager(fig, [line])
    fig.canvas.draw()
    plt.close(fig)
    FigureCanvasBase(fig)  # what a closed figure is left with
    line.set_ydata([1, 0])
    blit.update()
    blit.full()


def test_notebook_sizes_pick_one_side_of_each_pair(monkeypatch):
    """The notebooks' one place for sizes: the small side under the test suite, the full one for a
    reader; anything but a pair is refused by name; the widget backend only for a reader."""
    import spherelab as sl

    calls = []

    class Shell:
        def run_line_magic(self, name, value):
            calls.append((name, value))

    monkeypatch.setenv("SPHERELAB_SMOKE", "1")
    small = sl.widgets.notebook_sizes(L=(6, 12), grid=((24, 48), (121, 242)))
    assert small.smoke and small.L == 6 and small.grid == (24, 48)
    sl.widgets.interactive(Shell())
    assert calls == []
    monkeypatch.delenv("SPHERELAB_SMOKE")
    full = sl.widgets.notebook_sizes(L=(6, 12), grid=((24, 48), (121, 242)))
    assert not full.smoke and full.L == 12 and full.grid == (121, 242)
    sl.widgets.interactive(Shell())
    assert calls == [("matplotlib", "widget")]
    monkeypatch.setenv("SPHERELAB_NOTEBOOK_SIZE", "small")  # the browser check: small, and live figures
    assert sl.widgets.notebook_sizes(L=(6, 12)).L == 6
    sl.widgets.interactive(Shell())
    assert calls == [("matplotlib", "widget")] * 2
    with pytest.raises(TypeError, match="iters must be a pair"):
        sl.widgets.notebook_sizes(iters=100)


def test_explorer_figures_are_capped_to_a_laptop_windows_output_area():
    """A figure wider than MAX_WIDTH_PX keeps its size in inches (its layout) at a lower resolution;
    a narrow one keeps Matplotlib's resolution; an explicit dpi is a ceiling, never raised."""
    import matplotlib.pyplot as plt

    wide, _ = sl.widgets.subplots(1, 3, figsize=(10.0, 3.0))
    narrow = sl.widgets.figure(figsize=(5.0, 5.0))
    try:
        assert wide.get_figwidth() == 10.0 and wide.get_figwidth() * wide.dpi == pytest.approx(sl.widgets.MAX_WIDTH_PX)
        assert narrow.dpi == plt.rcParams["figure.dpi"]
        assert sl.widgets.capped_dpi(4.0, dpi=50) == 50 and sl.widgets.capped_dpi(16.0, dpi=50) == 50
        assert sl.widgets.capped_dpi(20.0, dpi=300) == sl.widgets.MAX_WIDTH_PX / 20.0
    finally:
        plt.close(wide)
        plt.close(narrow)


def test_the_live_frontier_samples_each_fit_and_starts_points_at_kmeans_centres(rng, monkeypatch):
    """frontier_curves: the inducing points start where kmeans_centres puts them (the regressor's
    start), the samples' seconds increase and every sample scores finitely."""
    from spherelab.explore import frontier as fr

    X, y = toy_data(rng, 150, D=2)
    starts = []
    real = fr.kmeans_centres
    monkeypatch.setattr(fr, "kmeans_centres", lambda *a, **k: starts.append(real(*a, **k)) or starts[-1])
    curves = fr.frontier_curves(X[:120], y[:120], X[120:], y[120:], budget=2.0, inducing=8,
                                contenders=("inducing points",))
    (curve,) = curves.values()
    assert len(starts) == 1 and starts[0].shape == (8, 2)
    times = [t for t, _, _ in curve]
    assert times == sorted(times) and all(np.isfinite([n for _, n, _ in curve]))
    with pytest.raises(ValueError, match="contenders"):
        fr.frontier_curves(X, y, X, y, contenders=("SGPR",))


def test_the_live_frontier_holds_every_cited_point_and_legends_only_what_it_shows(monkeypatch):
    """At every budget the axes hold each contender's best point within it (the points the status
    line cites), the legend lists the contenders with a point by then, and the status line names
    the others as not reached: power's case where the best lay above a quantile taken over the
    whole budget, and kin8nm's where two contenders had no point at a short budget."""
    pytest.importorskip("ipywidgets")
    from spherelab.explore import frontier as fr

    designed = {  # (seconds, NLPD, RMSE): one contender far above the rest, two that start late
        "VISH, features prior": [(0.2, 0.155, 0.3), (0.9, 0.12, 0.3), (4.0, 0.05, 0.2)],
        "VISH, kernel prior": [(0.3, 0.9, 0.5), (2.0, 0.6, 0.4)],
        "harmonics + orthogonal points": [(3.0, 0.08, 0.3), (6.0, 0.07, 0.3)],
        "inducing points": [(5.0, 0.10, 0.3), (9.0, 0.06, 0.3)],
    }
    monkeypatch.setattr(fr, "frontier_curves", lambda *a, **k: designed)
    X = np.zeros((4, 2))
    explorer = fr.FrontierExplorer({"power": (X, X[:, 0], X, X[:, 0])}, budget=10.0)
    try:
        explorer.wait()
        for seconds in (0.25, 0.5, 1.0, 2.5, 6.3, 10.0):
            explorer.select(seconds=seconds)
            now = explorer.current
            low, high = explorer.ax.get_ylim()
            left, right = explorer.ax.get_xlim()
            for c, v in now["best"].items():
                if np.isfinite(v):
                    t = min(t for t, n, _ in designed[c] if n == v)
                    assert low < v < high and left < t < right, (seconds, c, v, (low, high))
            shown = [c for c in fr.CONTENDERS if any(t <= seconds for t, _, _ in designed[c])]
            legend = [text.get_text() for text in explorer.ax.get_legend().get_texts()]
            assert legend == shown, (seconds, legend)
            missing = [c for c in fr.CONTENDERS if c not in shown]
            assert now["missing"] == missing
            if missing:
                assert f"not reached in {seconds:.2g} s: {', '.join(missing)}" in explorer.status.value
            else:
                assert "not reached" not in explorer.status.value
            assert now["lead"] in shown and f"test NLPD {now['best'][now['lead']]:.3f}" in explorer.status.value
    finally:
        import matplotlib.pyplot as plt

        plt.close(explorer.fig)


def test_the_live_frontier_reaches_the_first_held_model_when_every_fit_outlasts_the_budget(monkeypatch):
    """On a loaded machine every contender's first sample may come after the budget: the slider
    then reaches the first one's time, so that the status line and a notebook's sentence cite a
    model held then (it used to cite none, and the notebook's sentence failed)."""
    pytest.importorskip("ipywidgets")
    from spherelab.explore import frontier as fr

    late = {c: [(1.5 + i, 0.5 - 0.1 * i, 0.3)] for i, c in enumerate(fr.CONTENDERS)}
    monkeypatch.setattr(fr, "frontier_curves", lambda *a, **k: late)
    X = np.zeros((4, 2))
    explorer = fr.FrontierExplorer({"power": (X, X[:, 0], X, X[:, 0])}, budget=1.0)
    try:
        now = explorer.wait()
        assert explorer.seconds.value == pytest.approx(1.05 * 1.5)
        assert now["lead"] == fr.CONTENDERS[0] and "test NLPD 0.500" in explorer.status.value
        assert now["missing"] == list(fr.CONTENDERS[1:])
    finally:
        import matplotlib.pyplot as plt

        plt.close(explorer.fig)


def test_the_recorded_frontier_figure_scales_to_its_output_area(tmp_path):
    """The recorded benchmark figure is shown no wider than the notebook's output area (it was 112 px
    wider at 1 280 px): an image with max-width 100 %; None outside a checkout."""
    from spherelab.explore import recorded_figure

    shown = recorded_figure("frontier", start=Path(__file__).parent)
    assert shown is not None and "max-width: 100%" in shown.data and "image/svg+xml;base64," in shown.data
    assert recorded_figure("frontier", start=tmp_path) is None
