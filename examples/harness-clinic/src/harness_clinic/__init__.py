"""A clinic's appointment desk as a harness domain, with a check kind of its own."""
