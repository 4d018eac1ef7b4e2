"""harness: a self-improving evaluation harness for LLM agents."""

__version__ = "0.1.0"
