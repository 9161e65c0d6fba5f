"""``truetrain worker run``."""

from truetrain.daemon.command import daemon_command


def _worker(settings):
    # Imported when the daemon starts, not when the command is mounted: `--help` stays fast.
    from worker.daemon import WorkerDaemon

    return WorkerDaemon(settings)


run = daemon_command("worker", _worker, network=True, stages=True, devices=True)
