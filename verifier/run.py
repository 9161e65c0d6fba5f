"""``truetrain verifier run``."""

from truetrain.daemon.command import daemon_command
from verifier.daemon import VerifierDaemon

run = daemon_command("verifier", VerifierDaemon, sample_rate=True, keeper_default=True)
