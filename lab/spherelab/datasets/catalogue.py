"""What the library knows of each data set before reading it: the UCI sets' folders in the
original repository, their rows and inputs, their standard splits, and the rows of the others
(``shared/data/PROVENANCE.md``): a file of another shape is refused, and a stand-in takes the shape."""

from __future__ import annotations

__all__ = ["UCI_SETS", "UCI_SHAPES", "UCI_SPLITS", "KNOWN_ROWS"]

UCI_SETS = {
    # name: folder in the original repository
    "yacht": "yacht",
    "energy": "energy",
    "concrete": "concrete",
    "kin8nm": "kin8nm",
    "power": "power-plant",
    "naval": "naval-propulsion-plant",
    "protein": "protein-tertiary-structure",
    "wine_red": "wine-quality-red",
}

# rows and inputs of each UCI set (shared/data/PROVENANCE.md): a file of another shape is refused
UCI_SHAPES = {"yacht": (308, 6), "energy": (768, 8), "concrete": (1030, 8), "kin8nm": (8192, 8),
              "power": (9568, 4), "naval": (11934, 16), "protein": (45730, 9), "wine_red": (1599, 11)}
#: the standard splits of each UCI set (protein has five)
UCI_SPLITS = {**dict.fromkeys(UCI_SETS, 20), "protein": 5}

#: the rows of the sets that are not UCI's (shared/data/PROVENANCE.md)
KNOWN_ROWS = {"snelson": 200, "banana": 400}
