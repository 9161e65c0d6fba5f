"""`truetrain` as a process of its own, for what click's CliRunner cannot show: a command
that runs while the test moves the chain, a terminal (a pseudo-terminal as its stdout), a
signal. Its stdout is read as it comes; the process is killed at the end if still running."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The checkout's CLI (the working directory comes first on sys.path with -c).
LAUNCH = [sys.executable, "-c", "from truetrain.cli import main; main()"]


class CliProcess:
    """``truetrain ARGS`` with ``env`` (None values unset, as CliRunner takes them); its
    stdout a pseudo-terminal with ``tty``, else a pipe."""

    def __init__(self, env: dict, *args, tty: bool = False):
        full = {**os.environ, "COLUMNS": "200"}  # a terminal wide enough for the whole line
        for name, value in env.items():
            if value is None:
                full.pop(name, None)
            else:
                full[name] = value
        self._master = None
        if tty:
            self._master, stdout = pty.openpty()
        else:
            stdout = subprocess.PIPE
        # A shell starts background jobs with SIGINT ignored, and children inherit that (a
        # `make test &` would then have nothing for interrupt() to stop): the child gets
        # Python's own Ctrl-C handling back, as a program run at a terminal has it.
        self.proc = subprocess.Popen([*LAUNCH, *map(str, args)], cwd=ROOT, env=full, stdin=subprocess.DEVNULL,
                                     stdout=stdout, stderr=subprocess.PIPE,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        if tty:
            os.close(stdout)  # the child holds the terminal now: its exit ends our reads
        self._out = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        fd = self._master if self._master is not None else self.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the terminal's other side is closed
                return
            if not chunk:
                return
            self._out.extend(chunk)

    @property
    def output(self) -> str:
        return bytes(self._out).decode("utf-8", errors="replace")

    def wait_for(self, text: str, timeout: float = 90.0) -> str:
        """The output so far once it holds ``text``."""
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if text not in self.output:
            raise AssertionError(f"no {text!r} from `truetrain` (exit {self.proc.poll()}): {self.output!r} "
                                 f"{self.proc.stderr.read().decode() if self.proc.poll() is not None else ''}")
        return self.output

    def interrupt(self) -> None:
        """Ctrl-C."""
        self.proc.send_signal(signal.SIGINT)

    def finish(self, timeout: float = 90.0) -> tuple[int, str, str]:
        """(exit status, stdout, stderr) once the process has exited by itself."""
        code = self.proc.wait(timeout)
        self._reader.join(10)
        return code, self.output, self.proc.stderr.read().decode()

    def __enter__(self) -> CliProcess:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        if self._master is not None:
            os.close(self._master)
