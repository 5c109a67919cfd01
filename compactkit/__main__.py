"""`python -m compactkit` runs the command line."""

from .cli import main

main()
