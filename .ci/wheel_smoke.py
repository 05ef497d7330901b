"""Run by `make wheel-test` from an empty directory with the wheel's venv: spherelab must come from
site-packages (not the repository) and fit and predict a tiny model."""

import sys
from pathlib import Path

import numpy as np
import spherelab as sl

location = Path(sl.__file__).resolve()
assert "site-packages" in location.parts, f"spherelab imported from {location}, not the installed wheel"
X, y = sl.datasets.synthetic_regression(300, 2, seed=0)
X, y = (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()
model = sl.VISH(sl.kernels.Matern(1.5), max_degree=3).fit(X, y)
mean, var = model.predict_y(X[:10])
assert mean.shape == (10,) and np.all(var > 0)
(Xs, ys), label = sl.datasets.load("snelson")
assert label in ("snelson, real", "snelson, stand-in")
print(f"wheel smoke: spherelab {sl.__version__} from {location.parent}, a fit and a prediction, data: {label}")
sys.exit(0)
