r"""Evidence lower bounds: value plus :math:`\partial\mathcal L/\partial(\text{matrices}, q)`, no model
state (GPy's contract), and the one streamed-statistics pass every Gaussian bound is built on."""

from .._listing import own_names
from .decoupled import (
    TERMS,
    OrthogonalBound,
    Predictive,
    StatsBound,
    decoupled_predictive,
    gaussian_stats_bound_whitened,
    joint_cholesky,
    joint_factors,
    orthogonal_bound,
    orthogonal_bound_whitened,
    whitened_optimum,
)
from .hvgp import BlockBound, BlockPredictive, block_bound_whitened, block_predictive
from .statistics import Statistics, row_chunks, run_shares, stopping, streamed_statistics
from .vish import (
    CollapsedBound,
    collapsed_bound,
    harmonic_statistics,
    lift_gradient,
    lift_statistics,
    predictive_weights,
)
from .vish_svi import UncollapsedBound, uncollapsed_bound, uncollapsed_bound_general, uncollapsed_bound_whitened
from .whitened import kl_whitened

__all__ = [
    "Statistics",
    "streamed_statistics",
    "row_chunks",
    "run_shares",
    "stopping",
    "lift_gradient",
    "lift_statistics",
    "predictive_weights",
    "CollapsedBound",
    "collapsed_bound",
    "harmonic_statistics",
    "UncollapsedBound",
    "uncollapsed_bound",
    "uncollapsed_bound_whitened",
    "uncollapsed_bound_general",
    "OrthogonalBound",
    "orthogonal_bound",
    "orthogonal_bound_whitened",
    "StatsBound",
    "gaussian_stats_bound_whitened",
    "joint_cholesky",
    "joint_factors",
    "whitened_optimum",
    "TERMS",
    "Predictive",
    "decoupled_predictive",
    "BlockPredictive",
    "block_predictive",
    "BlockBound",
    "block_bound_whitened",
    "kl_whitened",
]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports
