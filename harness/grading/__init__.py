"""Graders: rule checks and normative verdicts over Transcripts (never over the simulator)."""
