"""rankcollapse: the library behind the companion book on rank collapse under
softmax (row-stochastic) versus Sinkhorn (doubly stochastic) attention, arXiv:2604.07925."""

__version__ = "0.1.0"
