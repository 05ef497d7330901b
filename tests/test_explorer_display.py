"""Under ipympl (the lab's backend) an explorer's figure is displayed once, where its controls are
shown — not also by the cell that built it (the duplicate, slider-less copies of notebooks 04 and
06). Counted from the widget views a kernel really produced."""

from __future__ import annotations

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipympl")

CELLS = [
    "%matplotlib widget\nimport numpy as np, matplotlib.pyplot as plt, spherelab as sl\n"
    "X, y = sl.datasets.snelson_like(60)\n"
    "explorer = sl.explore.DegreeExplorer(X, y, sl.kernels.Matern(1.5, 1.0, bias=1.0), max_degree=4)",
    "from IPython.display import display\ndisplay(explorer.widget())\nplt.show()",
]


@pytest.mark.slow
def test_an_explorer_built_in_one_cell_and_shown_in_the_next_appears_once():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=True).execute()
    errors = [o for c in nb.cells for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    canvases = {k for k, v in state.items() if v["model_name"] == "MPLCanvasModel"}
    views = [[o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
              for o in c.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
             for c in nb.cells]
    shown = [[m for m in cell if m in canvases] for cell in views]
    assert shown[0] == [], "the building cell displayed the figure"
    assert len(shown[1]) == 1, f"the display cell showed {len(shown[1])} canvases"
