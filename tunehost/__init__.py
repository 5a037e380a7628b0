"""tunehost: find what in a Linux host holds llama.cpp back, fix it safely, and prove the result."""

__version__ = "0.1.0"
