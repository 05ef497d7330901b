"""Checks of notebook 05's stated results, run in its kernel after the notebook (tests/test_notebooks.py)."""

import numpy as np


def check(g):
    explorer, gain, ACTIVATIONS = g["explorer"], g["gain"], g["ACTIVATIONS"]
    mat, arc = g["mat"], g["arc"]
    explorer.select(L=4, K=4)
    assert explorer.current["model"].W.shape[0] == 4  # the figure shows the selection
    _, var = explorer.current["model"].predict_f(explorer.grid)
    assert np.allclose(sum(explorer.current["terms"].values()), var, atol=1e-10)  # the terms add up
    explorer.select(act="softplus")
    assert g["shrink"] > 1.5  # K = 8 tightens the band
    assert max(gain[arc, a] for a in ACTIVATIONS) < min(gain[mat, a] for a in ACTIVATIONS)  # least to repair
    # the frontier section: the sentence names the best contender within the budget shown
    frontier = g["frontier"]
    now = frontier.current
    finite = {c: v for c, v in now["best"].items() if np.isfinite(v)}
    assert finite and now["lead"] == min(finite, key=finite.get)
    for c, samples in now["curves"].items():
        if not c.startswith("VISH"):  # one fit sampled along the way: its clock only moves forward
            assert all(a[0] <= b[0] for a, b in zip(samples, samples[1:])), c
    _the_frontier_shows_what_it_cites(frontier)
    shorter = frontier.seconds.value / 4
    frontier.select(seconds=shorter)
    for c, v in frontier.current["best"].items():  # the model each held then: its last sample by that time
        held = [nlpd for t, nlpd, _ in now["curves"][c] if t <= shorter]
        assert (not held and not np.isfinite(v)) or v == held[-1], c
    _the_frontier_shows_what_it_cites(frontier)
    assert g["recorded"] is not None  # the figure recorded in the checkout is found from the notebook


def _the_frontier_shows_what_it_cites(frontier):
    """Every point the status line and the sentence cite lies inside the axes; the legend lists
    exactly the contenders with a point by the budget, the others are named as not reached."""
    now, seconds = frontier.current, frontier.seconds.value
    low, high = frontier.ax.get_ylim()
    for c, v in now["best"].items():
        assert not np.isfinite(v) or low < v < high, (c, v, low, high)
    legend = [t.get_text() for t in frontier.ax.get_legend().get_texts()]
    assert legend == [c for c in now["curves"] if any(t <= seconds for t, _, _ in now["curves"][c])]
    for c in now["missing"]:
        assert c not in legend and c in frontier.status.value
