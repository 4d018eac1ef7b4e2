"""tau2-bench through harness: tau2's environments as domains (`domains`), its tasks as harness
tasks (`convert`, `export`), and tau2's own evaluator on harness transcripts (`evaluate`)."""

from loguru import logger

logger.disable("tau2")  # tau2 logs every tool call at DEBUG to stderr; harness reports itself
