"""``truetrain verifier run``."""

from truetrain.daemon.command import daemon_command


def _verifier(settings):
    # Imported when the daemon starts, not when the command is mounted: `--help` stays fast.
    from verifier.daemon import VerifierDaemon

    return VerifierDaemon(settings)


run = daemon_command("verifier", _verifier, sample_rate=True, keeper_default=True)
