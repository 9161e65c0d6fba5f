"""``truetrain explorer``: serve the read-only web explorer."""

from __future__ import annotations

import click

from truetrain.cli_options import session_options

from . import DEFAULT_HOST, DEFAULT_PORT


@click.command("explorer")
@click.option("--host", default=DEFAULT_HOST, show_default=True,
              help="Address to listen on (loopback by default; anything else exposes the explorer to the network).")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True, help="Port to listen on.")
@session_options()
def explorer(host: str, port: int, session) -> None:
    """Serve the read-only web explorer (jobs, workers, disputes, token flows) from the chain and IPFS."""
    from truetrain.chain.devnet import port_is_free
    from truetrain.errors import ConfigError

    from .serve import open_source, serve

    if not port_is_free(port, host):
        raise ConfigError(f"port {port} on {host} is already in use: pick another with --port")
    source = open_source(session.rpc, session.ipfs, session.deployments)
    try:
        click.echo(f"explorer on http://{'[' + host + ']' if ':' in host else host}:{port}/ "
                   f"(chain {session.rpc}, IPFS {session.ipfs}); Ctrl-C stops it", nl=True)
        serve(source, host, port)
    finally:
        source.close()
