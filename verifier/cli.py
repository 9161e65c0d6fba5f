"""``truetrain verifier``: the verifier daemon's commands."""

import click

from verifier.run import run


@click.group()
def verifier() -> None:
    """Audit drawn tasks and replay a sample of finished ones."""


verifier.add_command(run)
