"""``truetrain worker run``."""

from truetrain.daemon.command import daemon_command
from worker.daemon import WorkerDaemon

run = daemon_command("worker", WorkerDaemon)
