"""``truetrain demo``: the main job end to end on the local devnet."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from truetrain.errors import TruetrainError


@click.command("demo")
@click.option("--port", type=click.IntRange(0, 65535), default=8545, show_default=True,
              help="Anvil RPC port (0: a free one).")
@click.option("--ipfs-port", type=click.IntRange(0, 65535), default=5001, show_default=True,
              help="IPFS API port (0: a free one).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Where the model and plot go [default: demo-out/].")
@click.option("--down", is_flag=True, help="Stop the devnet (and the explorer) at the end.")
@click.option("--explorer-port", type=click.IntRange(0, 65535), default=8600, show_default=True,
              help="Port of the web explorer on 127.0.0.1 (it stays up with the devnet; 0: a free one).")
@click.option("--model", type=click.Choice(["mlp", "lm"]), default="mlp", show_default=True,
              help="mlp: the digits classifier; lm: a byte-level language model on the standard library's source.")
@click.option("--stages", type=click.IntRange(1, 3), default=1, show_default=True,
              help="--model lm: split the model by layers into this many stages, each shard's stages on "
                   "different workers (checked by the verifier's sampled replays instead of drawn audits).")
def demo(port: int, ipfs_port: int, out: Path | None, down: bool, model: str, explorer_port: int, stages: int) -> None:
    """Devnet and explorer up, 3 worker and 1 verifier daemons, a job of 3 shards x 3 rounds, results."""
    from truetrain.demo.run import run_demo

    if stages > 1 and model != "lm":
        click.echo("error: --stages splits --model lm", err=True)
        sys.exit(2)
    try:
        code = run_demo(port, ipfs_port, out, down, model, explorer_port, stages)
    except TruetrainError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(code)
