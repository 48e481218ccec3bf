"""The package version, in a module of its own: what any layer may import."""

__version__ = "0.1.0"
