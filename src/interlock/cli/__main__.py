"""Allow ``python -m interlock.cli``."""

from . import main

main()
