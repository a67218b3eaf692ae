"""The ``interlock`` command line."""

from __future__ import annotations

import click

from ._demo import demo

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="interlock")
def cli() -> None:
    """interlock: agent runs that stop for a person's decision and resume exactly."""


cli.add_command(demo)


def main() -> None:
    """Entry point of the ``interlock`` script."""
    cli()
