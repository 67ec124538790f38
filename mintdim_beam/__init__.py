"""mintdim-beam: the MintDim unit-build as an Apache Beam pipeline."""
__version__ = "0.1.0"

from .api import pipeline  # noqa: E402

__all__ = ["pipeline", "__version__"]
