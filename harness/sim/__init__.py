"""Simulation: the persona simulator, agents under test, environments and the episode loop."""
