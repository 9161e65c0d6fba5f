"""The ``run`` command both daemons share: flags → typed settings → the daemon's loop."""

from __future__ import annotations

from pathlib import Path

import click

from truetrain.cli_options import AMOUNT, default_ipfs, default_rpc
from truetrain.daemon.logs import setup_logging
from truetrain.daemon.settings import DEVICES, GEMM_ROUTES, MAX_DEVICES, load_settings


def daemon_command(role: str, factory, *, sample_rate: bool = False, keeper_default: bool = False,
                   network: bool = False, stages: bool = False, devices: bool = False) -> click.Command:
    """A click ``run`` command that builds ``factory(settings)`` and runs it until SIGTERM."""

    def run(config, max_ticks, **flags):
        flags = {k: v for k, v in flags.items() if v is not None}
        # Flags win over TRUETRAIN_* variables, which win over the file, which wins over the
        # local devnet's addresses.
        settings = load_settings(role, flags, config_file=config,
                                 defaults={"rpc_url": default_rpc(), "ipfs_api": default_ipfs(),
                                           "keeper": keeper_default})
        setup_logging(settings.log_format, {"role": role}, settings.log_file)
        daemon = factory(settings)
        daemon.install_signal_handlers()
        daemon.run(max_ticks=max_ticks)

    options = [
        click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help=f"TOML settings file (a [{role}] table or top-level keys)."),
        click.option("--rpc", "rpc_url", help="JSON-RPC URL [default: the devnet's]."),
        click.option("--ipfs", "ipfs_api", help="IPFS API multiaddr [default: the devnet's]."),
        click.option("--account", "account_index", type=click.IntRange(0, 19), help="Anvil devnet account N."),
        click.option("--key", help="Hex private key (or TRUETRAIN_KEY)."),
        click.option("--keystore", type=click.Path(dir_okay=False, path_type=Path),
                     help="Encrypted key file (password in TRUETRAIN_KEYSTORE_PASSWORD)."),
        click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path),
                     help=f"Folder for the book and cursor [default: .state/{role}-<address>]."),
        click.option("--deployments", type=click.Path(file_okay=False, path_type=Path),
                     help="Folder of deployments/<chain id>.json."),
        click.option("--device", type=click.Choice(DEVICES), help="Torch device [default: auto]."),
        click.option("--gemm-route", type=click.Choice(GEMM_ROUTES),
                     help="Repro GEMM route: auto (int8 if its self-test passes), int8 (every product; "
                          "refuse to start if the self-test fails) or float64 [default: auto]."),
        click.option("--gemm-fuse/--no-gemm-fuse", default=None,
                     help="Compile the int8 route's elementwise steps on large tensors (torch.compile, "
                          "self-tested when first needed; same bits) [default: on]."),
        click.option("--metrics-port", type=click.IntRange(0, 65535), help="Prometheus port on 127.0.0.1 (0: off)."),
        click.option("--poll-interval", "poll_interval_s", type=float, help="Seconds between ticks [default: 0.5]."),
        click.option("--confirmations", type=click.IntRange(0, 64), help="Blocks to wait on top of a transaction."),
        click.option("--stake", "stake_wei", type=AMOUNT, help="Top the active stake up to this many TRAIN."),
        click.option("--heartbeat-blocks", type=click.IntRange(1), help="Heartbeat when the last is this old."),
        click.option("--keeper/--no-keeper", default=None,
                     help=f"Also draw, time out and finalize tasks [default: {'on' if keeper_default else 'off'}]."),
        click.option("--region", type=click.IntRange(0, 65535), help="Region code to declare."),
        click.option("--max-concurrent", type=click.IntRange(1, 255),
                     help="Tasks at once to declare; a worker trains that many side by side (CPU cores split "
                          "between them; on several GPUs, one each by free memory) [default: 1]."),
        click.option("--memory-mib", type=click.IntRange(0, 2**31 - 1),
                     help="Declare at most this much memory; tasks that need more are declined [default: 0, "
                          "all the device has]."),
        click.option("--log-format", type=click.Choice(["json", "text"]), help="Log lines as JSON or text."),
        click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path), help="Also log to this file."),
        click.option("--max-ticks", type=click.IntRange(1), hidden=True),
    ]
    if sample_rate:
        options.append(click.option("--sample-rate", type=click.FloatRange(0, 1),
                                    help="Share of other finished tasks to replay [default: 0]."))
        options.append(click.option("--stage-sample-rate", type=click.FloatRange(0, 1),
                                    help="Share of split jobs' finished stage tasks to replay (they draw no "
                                         "audits) [default: 1]."))
    if stages:
        options += [
            click.option("--mailbox-port", type=click.IntRange(0, 65535),
                         help="Port (on --mailbox-host) serving the records this worker's pipeline stages post to "
                              "the other stages' workers, published in its profile [default: 0, a free one]."),
            click.option("--mailbox-host", help="Address the mailbox listens on [default: 127.0.0.1]."),
            click.option("--stage-wait", "stage_wait_s", type=click.FloatRange(0, min_open=True),
                         help="Seconds a pipeline stage waits for a message of another stage [default: 300]."),
        ]
    if devices:
        options.append(click.option(
            "--devices", type=click.IntRange(1, MAX_DEVICES), metavar="N",
            help="Train each repro task data-parallel on N devices through torch.distributed: N CPU processes "
                 "(gloo), or the first N GPUs with --device cuda (NCCL); declared in the hardware profile. The "
                 "bits are those of one device; stock jobs and pipeline stages train on one [default: 1]."))
    if network:
        options.append(click.option(
            "--network-check-blocks", type=click.IntRange(1),
            help="Re-measure RPC round-trip and fetch throughput every this many blocks; declare them on chain "
                 "when none are declared, the declared ones are half a liveness window old or off by more "
                 "than 1.5x, or a timeout's cool-down is over [default: 100]."))
    for option in reversed(options):
        run = option(run)
    return click.command("run", help=f"Run the {role} daemon until SIGTERM (settings: flags > TRUETRAIN_* env > --config file).")(run)
