"""`python -m harness` runs the command line."""

from harness.cli import main

main()
