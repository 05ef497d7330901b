"""Checks of notebook 03's stated results, run in its kernel after the notebook (tests/test_notebooks.py)."""


def check(g):
    explorer, KERNELS, relu_grows, soft_flat = g["explorer"], g["KERNELS"], g["relu_grows"], g["soft_flat"]
    errs = []
    for L in (2, 8, 32):  # the truncation error falls as the slider raises L
        explorer.L.value = L
        errs.append(explorer.err)
    assert errs[0] > errs[1] > errs[2]
    explorer.act.value = "softplus (β = 3)"
    explorer.dim.value = 5
    assert len(soft_flat) == len(KERNELS) * 2  # softplus converges under every kernel shown
    assert ("arc-cosine, order 1", "ReLU", 3) in relu_grows and ("Matérn-5/2 (chordal)", "ReLU", 3) in relu_grows
    assert g["matern"] > g["arccos"]
