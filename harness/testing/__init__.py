"""Utilities for testing agents and the harness itself: a local fake model server."""
