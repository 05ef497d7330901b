"""Datasets: synthetic generators (always available, offline) and loaders for the UCI
regression sets, Snelson's 1-D set and banana.

One way to find data (:func:`search_path`): ``$SPHERELAB_DATA``, then ``shared/data`` beside the
repository (a clone's sibling folder, where the project keeps its datasets), then the user data
directory (:func:`data_dir`, where ``download=True`` puts files); every folder and file on the way
to a set must be owned by you (or root) and writable by no one else, and a known set's file must
have its known rows and columns; :func:`load` falls back to a generated stand-in of the same shape,
with a :class:`StandInWarning` naming where it looked and a label that says so.

Examples
--------
>>> import spherelab as sl
>>> (X, y), label = sl.datasets.load("snelson")
>>> label in ("snelson, real", "snelson, stand-in")
True
"""

from .._listing import own_names
from .generators import banana_like, mirror_symmetric, snelson_like, susy_like, synthetic_regression, uci_like
from .loaders import (
                      UCI_SETS,
                      UCI_SHAPES,
                      UCI_SPLITS,
                      StandInWarning,
                      data_dir,
                      find_dataset,
                      load,
                      load_banana,
                      load_snelson,
                      load_uci,
                      search_path,
)
from .standardize import Standardizer

__all__ = [
    "synthetic_regression",
    "snelson_like",
    "banana_like",
    "susy_like",
    "mirror_symmetric",
    "uci_like",
    "load",
    "load_uci",
    "load_snelson",
    "load_banana",
    "data_dir",
    "search_path",
    "find_dataset",
    "UCI_SETS",
    "UCI_SHAPES",
    "UCI_SPLITS",
    "StandInWarning",
    "Standardizer",
]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports
