r"""Samples of the components :math:`k = \sum_t k_t` of a harmonic kernel decomposition on a
grid (Sun et al. 2021, Fig. 1), interactively.

A draw from :math:`GP(0, k_t)` on n grid points needs a square root of the :math:`n \times n`
matrix :math:`K_t`: an eigendecomposition, :math:`O(n^3)` per component — the slow part. It
depends only on the group, so :class:`ComponentSampler` keeps the factors per group; another
sample (a new seed) is then one matrix–vector product per component.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..groups import harmonic_decomposition
from ..widgets import BlitManager, subplots
from .background import Precomputer, Selectable

__all__ = ["ComponentSampler", "DecompositionExplorer", "component_title"]


def component_title(comp) -> str:
    """A readable title for a component: ``k_2``, ``k_(0,1)``, or ``k_1 + k_3`` for a pair."""

    def name(index):
        return str(index[0]) if len(index) == 1 else "(" + ",".join(map(str, index)) + ")"

    if tuple(comp.partner) != tuple(comp.index):
        return f"k_{name(comp.index)} + k_{name(comp.partner)}"
    return f"k_{name(comp.index)}"


def _math_title(comp) -> str:
    """:func:`component_title` as Matplotlib mathtext (subscripts set as subscripts)."""
    return " + ".join(f"$k_{{{part[2:]}}}$" for part in component_title(comp).split(" + "))


class ComponentSampler:
    """Draws of every component of ``base`` decomposed under a group, on the points ``P``
    ``(n, D)``, with the square-root factors cached per group key.

    Parameters
    ----------
    base
        The kernel to decompose.
    P
        Grid points ``(n, D)``.
    max_cached
        Groups whose factors are kept (least recently used dropped first).
    """

    def __init__(self, base, P: np.ndarray, max_cached: int = 10) -> None:
        self.base, self.P, self.max_cached = base, np.asarray(P, dtype=np.float64), max_cached
        self._groups: dict = {}
        self._factors = Precomputer(lambda key: self._compute(self._groups[key]), max_items=max_cached)

    def cached(self, key) -> bool:
        """Whether the factors of ``key`` are at hand (no eigendecomposition needed)."""
        return self._factors.ready(key)

    def factors(self, key, group) -> tuple[list, list[np.ndarray]]:
        """``(components, [K_t^(1/2)])`` for the group (computed once per key)."""
        self._groups[key] = group
        return self._factors.get(key)

    def when_ready(self, key, group, done, failed=None, wait: bool = False) -> bool:
        """:meth:`factors` handed to ``done`` — at once when at hand or with ``wait``, else (in a
        Jupyter kernel) from a worker thread (:meth:`Precomputer.when_ready`)."""
        self._groups[key] = group
        return self._factors.when_ready(key, done, failed, wait)

    def ahead(self, keyed_groups: dict) -> None:
        """Compute the factors of ``{key: group}`` on a background thread, in this order."""
        self._groups.update(keyed_groups)
        self._factors.ahead(list(keyed_groups))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the factors asked for ahead are computed (whether within ``timeout``)."""
        return self._factors.wait(timeout)

    def _compute(self, group) -> tuple[list, list[np.ndarray]]:
        comps = harmonic_decomposition(self.base, group)
        roots = []
        for comp in comps:
            Kt = comp(self.P)
            w, V = np.linalg.eigh(0.5 * (Kt + Kt.T))  # PSD up to rounding; low rank for large |G|
            # the symmetric root: with one z for every component, sum_t K_t^(1/2) z has covariance
            # sum_t K_t = K, since the components' matrices are mutually orthogonal on a symmetric grid
            roots.append((V * np.sqrt(np.clip(w, 0.0, None))) @ V.T)
        return comps, roots

    def samples(self, key, group, seed: int) -> tuple[list, list[np.ndarray]]:
        """One draw per component, all from the same standard-normal vector (``seed``)."""
        comps, roots = self.factors(key, group)
        return comps, self.draws(roots, seed)

    def draws(self, roots: list[np.ndarray], seed: int) -> list[np.ndarray]:
        """``[K_t^(1/2) z]`` for one standard-normal ``z`` drawn with ``seed``."""
        z = np.random.default_rng(seed).standard_normal(self.P.shape[0])
        return [R @ z for R in roots]


class DecompositionExplorer(Selectable):
    """Dropdown for the group, sliders for T and the sample; one panel per component and one for
    their sum (a draw of k itself). The group and T recompute the factors (cached); the sample
    slider only redraws.

    Parameters
    ----------
    base
        The kernel (on 2-D inputs).
    groups
        ``{name: (lambda T: group)}``.
    grid_size
        Points per side of the grid on ``[-2, 2]^2``.
    max_panels
        Components shown (the sum always uses all).

    The controls are ``group``, ``T``, ``seed``; ``select(T=3)`` sets them and shows the result
    before returning.
    """

    def __init__(self, base, groups: dict[str, Callable], grid_size: int = 36, max_panels: int = 6,
                 group: str | None = None, T: int = 4) -> None:
        import ipywidgets as widgets

        self.groups, self.n, self.max_panels = groups, grid_size, max_panels
        g = np.linspace(-2, 2, grid_size)
        G1, G2 = np.meshgrid(g, g)
        self.sampler = ComponentSampler(base, np.c_[G1.ravel(), G2.ravel()])
        self.group = widgets.Dropdown(options=list(groups), value=group or next(iter(groups)), description="group")
        self.T = widgets.IntSlider(value=T, min=1, max=8, description="T", continuous_update=False)
        self.seed = widgets.IntSlider(value=0, min=0, max=20, description="sample", continuous_update=False)
        self.status = widgets.Label()
        # one column per component, the sum, and a thin one for the colour bar
        self.fig, axes = subplots(1, max_panels + 2, figsize=(1.35 * (max_panels + 1) + 0.6, 2.0),
                                  gridspec_kw={"width_ratios": [1.0] * (max_panels + 1) + [0.08]})
        self.axes, cax = axes[:-1], axes[-1]
        self.images = []
        for ax in self.axes:
            im = ax.imshow(np.zeros((grid_size, grid_size)), extent=(-2, 2, -2, 2), origin="lower",
                           cmap="RdBu_r", vmin=-2.5, vmax=2.5)
            ax.set_xticks([-2, 0, 2])
            ax.set_yticks([-2, 0, 2])
            ax.tick_params(labelsize=7, length=2, pad=1, labelleft=ax is self.axes[0])
            self.images.append(im)
        self.axes[0].set_ylabel("x₂")
        self.cax = cax
        bar = self.fig.colorbar(self.images[0], cax=cax)
        bar.ax.tick_params(labelsize=7)
        bar.set_label("f(x)", fontsize=8)
        self.fig.supxlabel("x₁, one panel per component; colour: the sampled function", fontsize=8)
        self.fig.tight_layout()
        self._bar_width = cax.get_position().width
        # images and titles change on a move; the rest is redrawn only when the number of panels
        # shown changes (blitting)
        self.blit = BlitManager(self.fig, [*self.images, *(ax.title for ax in self.axes)])
        self._shown = None
        for w in (self.group, self.T, self.seed):
            w.observe(self.update, names="value")
        self._wait = True  # the first figure is complete when the constructor returns
        self.update()
        self._wait = False

    def widget(self):
        """The controls and the status line, for ``display``."""
        import ipywidgets as widgets

        return widgets.VBox([widgets.HBox([self.group, self.T, self.seed]), self.status])

    def update(self, change=None) -> None:
        """Show the selection: at once when its factors are at hand, else when computed (the
        previous draw stays, titled "computing…", while a worker thread computes in a kernel)."""
        key = self._want = (self.group.value, self.T.value)
        group = self.groups[self.group.value](self.T.value)
        if not self.sampler.cached(key):
            self.status.value = "computing…"
            self.axes[0].set_title("computing…", fontsize=8)
            self.blit.update()
        self.sampler.when_ready(key, group, lambda factors: self._show(key, group, factors), self._failed,
                                wait=self._wait)

    def _failed(self, err: BaseException) -> None:
        self.status.value = f"the decomposition failed: {type(err).__name__}: {err}"

    def _show(self, key, group, factors) -> None:
        if key != self._want:  # the selection moved on meanwhile
            return
        comps, roots = factors
        draws = self.sampler.draws(roots, self.seed.value)
        self.components = comps
        T, name = key[1], key[0]
        near = [(name, T + s) for s in (1, -1) if self.T.min <= T + s <= self.T.max]
        near += [(other, T) for other in self.groups if other != name]
        near += [(name, T + s) for s in (2, -2) if self.T.min <= T + s <= self.T.max]
        self.sampler.ahead({k: self.groups[k[0]](k[1]) for k in near})
        shown = min(len(comps), self.max_panels)
        for i, ax in enumerate(self.axes):  # components first, then their sum; the rest hidden
            for artist in (ax, self.images[i], ax.title):  # blitting draws visible artists only
                artist.set_visible(i <= shown)
            if i < shown:
                self.images[i].set_data(draws[i].reshape(self.n, self.n))
                ax.set_title(_math_title(comps[i]), fontsize=9)
            elif i == shown:
                self.images[i].set_data(sum(draws).reshape(self.n, self.n))
                ax.set_title("sum: a draw of $k$", fontsize=9)
        extra = f" (first {self.max_panels} shown; the sum uses all)" if len(comps) > self.max_panels else ""
        self.status.value = f"{len(comps)} real components from |G| = {group.size}{extra}"
        if shown != self._shown:  # panels appear or vanish: the colour bar moves beside the sum, a full render
            self._shown = shown
            box = self.axes[shown].get_position()
            self.cax.set_position([box.x1 + 0.012, box.y0, self._bar_width, box.height])
            self.blit.full()
        else:
            self.blit.update()
