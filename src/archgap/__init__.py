"""archgap: will this Python GPU stack run on this GPU, and if not, why and how to fix it."""

__version__ = "0.1.0"
