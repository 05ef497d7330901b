"""The rows floor, between the bounds and the models: rows held on a device and the one chunk loop
of every Gaussian statistic a bound takes of them (:mod:`.device`), the whitened bound evaluated on
such rows in one copy back per evaluation (:mod:`.whitened`), and the strategies a model composes
to pass its rows: the decoupled models' statistics path (:mod:`.decoupled`, its parameter chain in
:mod:`.gradients`), minibatch steps on the host or resident on a device (:mod:`.steps`), HVGP's
blocks on a device (:mod:`.hvgp`) and VISH's lift stage and predictions on a device (:mod:`.vish`).
A strategy reads a model's declared parameters and hooks; no module here imports a model."""

from .decoupled import StatisticsPath
from .device import DeviceRows, RowsPass, Stacked, copy_back, copy_back_named
from .gradients import DecoupledGradients
from .hvgp import DeviceBlocks
from .steps import AdamSteps, ResidentSteps, minibatch_gradient
from .vish import ResidentLift
from .whitened import ResidentRows, chain_sums, resident_bound

__all__ = ["DeviceRows", "RowsPass", "Stacked", "copy_back", "copy_back_named", "ResidentRows", "chain_sums",
           "resident_bound", "StatisticsPath", "DecoupledGradients", "AdamSteps", "ResidentSteps",
           "minibatch_gradient", "DeviceBlocks", "ResidentLift"]
