"""rankcollapse: rank collapse under softmax (row-stochastic) versus Sinkhorn (doubly
stochastic) attention, the library behind the companion book of arXiv:2604.07925.

What a user reaches for first is here:

>>> import torch, rankcollapse as rc
>>> p = rc.sinkhorn(torch.randn(2, 8, 8))             # doubly stochastic, 50 iterations
>>> layer = rc.SelfAttention(16, 2, "sinkhorn")
>>> r = rc.relative_residual(torch.randn(4, 8, 16))   # one value per token matrix

Modules: `normalizations` (softmax, Sinkhorn, marginal errors), `measures` (norms,
residuals, entropy, attention paths), `theory` (the first-order expansion and its bounds),
`models` (attention, encoders, classifiers), `training`, `data`, `profiles`, `stats` (paired
comparisons over independent units, censoring, power), `verdicts` (the verdict words and
rules), `registry` (every claim's pre-registered primary test), `plots`, and `experiments`
(one module per chapter).
"""

__version__ = "0.1.0"

from .measures import relative_residual, residual  # noqa: E402
from .models import SelfAttention, build_model  # noqa: E402
from .normalizations import NORMALIZATIONS, marginal_errors, normalize, sinkhorn, softmax  # noqa: E402

__all__ = ["NORMALIZATIONS", "SelfAttention", "build_model", "marginal_errors", "normalize",
           "relative_residual", "residual", "sinkhorn", "softmax", "__version__"]
