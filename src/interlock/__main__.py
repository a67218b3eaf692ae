"""``python -m interlock``: the command line."""

from .cli import main

main()
