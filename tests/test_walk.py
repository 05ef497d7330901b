"""The walk figures, measured (benchmarks/tools/walk.py): the training inputs' walk through
VISH.fit climbs back up a layer at most 3 times, in a package whose layers are defined (no import
cycle between its units); one whole evaluation of the decoupled model, per branch."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "tools"))
import walk  # noqa: E402


def test_the_package_is_layered():
    assert walk.cycles() == []
    lay = walk.layers()
    assert lay["models"] > lay["bounds"] and lay["kernels"] > lay["sphere"] > lay["backend"] == 0
    # the rows floor and its strategies sit between the bounds and the models: none imports a model
    assert lay["selection"] > lay["models"] > lay["rows"] > lay["bounds"]


def test_the_training_inputs_walk_through_vish_fit():
    X, fits = walk.example_fits()
    vish = walk.summary(walk.walk(fits["VISH.fit"], X))
    assert vish["climbs"] <= 3 and vish["stops"] >= 10  # the walk was followed, not lost at the door
    # the climb counter sees a call back up: the decoupled pass asks the model to validate its rows
    stops = walk.walk(fits["OrthogonalSVGP.fit"], X)
    climbs = [s for s in stops if walk.climbs_up(s, walk.layers())]
    assert any(s["module"] == "spherelab.models.base" and s["caller"] == "spherelab.rows.decoupled" for s in climbs)


def test_the_decoupled_statistics_path_is_short():
    """The forward statistics pass of one decoupled evaluation: at most 12 stops and 3 climbs."""
    path = walk.summary(walk.statistics_path(walk.evaluation_in_a_fit()))
    assert 3 <= path["stops"] <= 12 and path["climbs"] <= 3, path


def _forward_and_backward(stops):
    # the walk reached the rows floor's loop both ways: the chunks' lift, and its backward sums
    names = {s["function"] for s in stops}
    return {"lift_rows_kept", "lift_backward_sums"} <= names


def test_one_whole_evaluation_per_branch():
    """Forward and backward, at most 12 stops and 3 climbs on each branch: the host's (the rows
    floor's loop on the host's arrays, dealt to the cores; 25 stops when the host streamed its own
    chunks through the features' and the kernel's methods) and the device's (rows held there,
    where the walk ends at the pass: the device's arrays are not the inputs)."""
    stops = walk.evaluation_in_a_fit()
    host = walk.summary(stops)
    assert _forward_and_backward(stops) and 6 <= host["stops"] <= 12 and host["climbs"] <= 3, host
    device = walk.summary(walk.evaluation_in_a_fit("sim"))
    assert 4 <= device["stops"] <= 12 and device["climbs"] <= 3, device
