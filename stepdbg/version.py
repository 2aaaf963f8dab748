"""The package's version, in a module of its own so that both halves can read it
without importing the ``stepdbg`` facade."""

__version__ = "0.1.0"
