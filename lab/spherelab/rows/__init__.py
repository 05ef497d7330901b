"""The rows floor, between the bounds and the models: rows held on a device and the one chunk loop
of every Gaussian statistic a bound takes of them (:mod:`.device`), and the whitened bound evaluated
on such rows in one copy back per evaluation (:mod:`.whitened`)."""

from .device import DeviceRows, RowsPass, Stacked, copy_back, copy_back_named
from .whitened import ResidentRows, chain_sums, resident_bound

__all__ = ["DeviceRows", "RowsPass", "Stacked", "copy_back", "copy_back_named", "ResidentRows", "chain_sums",
           "resident_bound"]
