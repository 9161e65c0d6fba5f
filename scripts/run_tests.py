"""`make test`: the suite in parallel lanes, each its own pytest process, and the forge suites.

The end-to-end tests spend most of their time waiting for blocks (the daemon devnets mine
every 0.5 s and settle through challenge windows), so on a 2-core machine several of them
run side by side at little cost. brownie's plugin does not run under pytest-xdist, so
each lane is a plain pytest process with its own test Anvil port (``TT_ANVIL_PORT``: the
first ports from 18545 up that nothing is bound to when the runner starts, so a devnet
already listening there is passed over, never attached to), its own temporary folder and
its own JUnit report; every devnet and IPFS node inside a test already takes a free port
of its own. The contracts are compiled and the brownie project
loaded once before the lanes start, so no two lanes write ``build/`` at once. ``forge test`` (with ``$FORGE_ARGS``) runs as
one more lane.

Each lane's output goes to ``<report dir>/lane-N.log``; when every lane has finished the
failing lanes' logs are printed whole, then one line per lane with its wall time and the
CPU time of its whole process tree, the ten slowest tests across all lanes (setup + call +
teardown, from the JUnit reports; in a loaded run that is mostly waiting) and the ten test
modules that took the most CPU (what makes the suite longer on 2 cores; from each lane's
``lane-N.cpu``, see tests/conftest.py). The exit status is pytest's worst.

    python scripts/run_tests.py                 # the whole suite in lanes, forge included
    python scripts/run_tests.py tests/contracts  # arguments given: one plain pytest run, no forge
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from truetrain.chain.devnet import port_is_free

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
#: The long modules, spread so each lane takes about as long as the others (see the
#: ten-slowest table each run prints). A lane lists test modules and folders (relative to
#: the repository root); a folder stands for its modules that no lane names one by one.
#: Every test module no lane claims runs in one more lane at the end.
LANES: list[list[str]] = [
    ["tests/integration/adversarial/test_cheating_workers.py", "tests/integration/test_daemon_faults.py",
     "tests/integration/test_cli_market.py", "tests/contracts/test_market_jobs.py",
     "tests/training/test_pipeline_ipfs.py", "tests/training/test_intgemm.py"],
    ["tests/integration/test_daemons.py", "tests/integration/test_deploy.py", "tests/training/test_lm_ops.py",
     "tests/contracts/test_float_library.py", "tests/contracts/test_onestep_gemm.py",
     "tests/contracts/test_onestep_optim.py", "tests/contracts/test_onestep_elementwise.py",
     "tests/contracts/test_onestep_gelu.py", "tests/contracts/test_onestep_layernorm.py",
     "tests/training/test_trace.py", "tests/contracts/test_step_player.py", "tests/contracts/test_dispute_step_game.py"],
    ["tests/integration/test_demo.py", "tests/integration/adversarial/test_lm_dispute.py",
     "tests/integration/adversarial/test_false_challenge.py",
     "tests/integration/test_data_plane.py", "tests/integration/test_bad_data.py",
     "tests/contracts/test_attacks_draws.py", "tests/training/test_memory.py", "tests/contracts/test_step_game.py"],
    ["tests/integration/test_pipelined_job.py", "tests/contracts/test_identity_registry.py",
     "tests/contracts/test_market_gas.py", "tests/contracts/test_market_stateful.py",
     "tests/training/test_trace_lm.py", "tests/contracts/test_step_kinds.py"],
    ["tests/contracts/test_dispute_stateful.py", "tests/integration/test_worker_concurrency.py",
     "tests/contracts/test_dispute_bisection.py",
     "tests/contracts/test_dispute_referees.py", "tests/contracts/test_dispute_open.py",
     "tests/contracts/test_dispute_libraries.py", "tests/integration/test_explorer.py",
     "tests/contracts/test_onestep_exact_sum.py", "tests/contracts/test_onestep_softmax.py",
     "tests/contracts/test_onestep_xent.py", "tests/contracts/test_onestep_quant.py",
     "tests/contracts/test_onestep_clip.py", "tests/contracts/test_onestep_pool.py",
     "tests/contracts/test_onestep_tied.py"],
    ["tests/contracts"],
]
#: The lanes' Anvil ports are the first free ones from here up (below the range from which the
#: tests' own devnets, IPFS nodes and daemons draw theirs: truetrain.chain.devnet.FREE_PORTS).
BASE_PORT = 18545
#: Invariant runs of each forge campaign in `make test` (depth 64 from foundry.toml): issue 12's
#: 256 x 64. Each suite checks all its properties in one campaign (tests/forge): the forge lane
#: took 97-106 CPU-s, against 140-150 with five campaigns a suite at 256 and 66-73 at 128.
FORGE_INVARIANT_RUNS = 256
#: The forge lane's fuzz seed ("truetrai" in ASCII).
FORGE_SEED = "0x7472756574726169"


def modules(lanes: list[list[str]]) -> list[list[str]]:
    """Each lane's test modules, then the lane of every module no lane claims."""
    every = sorted(TESTS.rglob("test_*.py"))
    named = {ROOT / p for lane in lanes for p in lane if p.endswith(".py")}
    claimed: set[Path] = set()
    out = []
    for lane in lanes:
        mine = []
        for entry in map(ROOT.joinpath, lane):
            found = [entry] if entry.suffix == ".py" else [m for m in every if entry in m.parents and m not in named]
            mine += [m for m in found if m not in claimed]
            claimed.update(found)
        out.append(mine)
    out.append([m for m in every if m not in claimed])
    return [[str(m.relative_to(ROOT)) for m in lane] for lane in out if lane]


def free_ports(count: int, start: int = BASE_PORT) -> list[int]:
    """The first ``count`` ports from ``start`` up that nothing is bound to now."""
    ports: list[int] = []
    for port in range(start, 65536):
        if len(ports) == count:
            break
        if port_is_free(port):
            ports.append(port)
    if len(ports) < count:
        raise RuntimeError(f"only {len(ports)} free ports from {start} up; {count} wanted")
    return ports


def slowest(reports: list[Path], count: int = 10) -> list[tuple[float, str]]:
    times = []
    for report in reports:
        if not report.exists():
            continue
        for case in ET.parse(report).getroot().iter("testcase"):
            times.append((float(case.get("time", 0)), f"{case.get('classname')}::{case.get('name')}"))
    return sorted(times, reverse=True)[:count]


def cpu_by_module(logs: list[Path], count: int = 10) -> list[tuple[float, str]]:
    """The test modules that took the most CPU, from the lanes' CPU logs."""
    spent: dict[str, float] = {}
    for log in logs:
        if log.exists():
            for line in log.read_text().splitlines():
                seconds, _, nodeid = line.partition("\t")
                module = nodeid.split("::")[0]
                spent[module] = spent.get(module, 0.0) + float(seconds)
    return sorted(((s, m) for m, s in spent.items()), reverse=True)[:count]


def summary_line(log: Path) -> str:
    """pytest's last line of counts ("3 failed, 40 passed in 81.20s")."""
    lines = [ln.strip("= ") for ln in log.read_text(errors="replace").splitlines() if " in " in ln
             and any(word in ln for word in (" passed", " failed", " error", " skipped", "no tests ran"))]
    return lines[-1] if lines else "(no summary)"


def main(argv: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest"]
    if argv:
        return subprocess.call(pytest + argv, cwd=ROOT)
    # Compile, then load the project once: brownie's first load after a compile prunes build/
    # (dependency artifacts no contract uses); six lanes loading it at once raced that pruning
    # in a fresh clone and failed on files another lane had just removed.
    for step in (["brownie", "compile"], [sys.executable, "-c", "from brownie import project; project.load('.')"]):
        if subprocess.call(step, cwd=ROOT, stdout=subprocess.DEVNULL):
            print(f"{' '.join(step[:2])} failed", file=sys.stderr)
            return 1
    # Build the exact C kernels once, on an idle machine: eight lanes compiling them at once
    # under load ran past the compiler's time limit, and each process then fell back to the
    # torch ops (same bits, more memory: the LM step's memory bound failed at 974 MiB).
    kernels = subprocess.run([sys.executable, "-c", "from truetrain.training import native, tensor_roots; print(native.ready() and tensor_roots.ready())"],
                             cwd=ROOT, capture_output=True, text=True)
    if kernels.stdout.strip() != "True":
        print(f"the exact C kernels did not build: {kernels.stderr.strip()[-500:]}", file=sys.stderr)
        return 1
    # Eight lanes share two cores: an OpenMP thread that waits for work spins by default
    # (libgomp's active policy) and takes CPU from the lanes that have some; waiting threads sleep.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    lanes = modules(LANES)
    out = Path(tempfile.mkdtemp(prefix="tt-lanes-"))
    started = time.monotonic()
    running = []
    commands = []
    # A lane that still finds its port taken when it starts (something bound it since) stops
    # in one line (tests/brownie_network.py) rather than attach to a node it did not start.
    try:
        ports = free_ports(len(lanes))
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    for n, paths in enumerate(lanes):
        args = [*paths, "-q", f"--junitxml={out / f'lane-{n}.xml'}", f"--basetemp={out / f'tmp-{n}'}",
                "-o", "junit_family=xunit1"]
        commands.append((pytest + args, {"TT_ANVIL_PORT": str(ports[n]), "TT_CPU_LOG": str(out / f"lane-{n}.cpu")}))
    # The forge suites (their own EVM, no Anvil) are one more lane: each invariant campaign at
    # FORGE_INVARIANT_RUNS x 64 calls, as foundry.toml's default (`make forge-test`);
    # `make fuzz` runs 10,000.
    lanes.append(["forge test " + os.environ.get("FORGE_ARGS", "")])
    # A fixed fuzz seed, as the Hypothesis walks have fixed examples: the same sequences on
    # every run (`make forge-test` and `make fuzz` draw fresh ones; FOUNDRY_FUZZ_SEED wins).
    commands.append((["forge", "test", *shlex.split(os.environ.get("FORGE_ARGS", ""))],
                     {"FOUNDRY_INVARIANT_RUNS": os.environ.get("FORGE_INVARIANT_RUNS", str(FORGE_INVARIANT_RUNS)),
                      "FOUNDRY_FUZZ_SEED": os.environ.get("FOUNDRY_FUZZ_SEED", FORGE_SEED)}))
    # Eight lanes and their daemons share 2 cores: torch's OpenMP threads, spinning while they
    # wait for work (libgomp's default), burnt 5x the CPU of the work itself (4 copies of
    # tests/training/test_pipeline.py at once: 357 CPU-s spinning, 66 CPU-s passive).
    base_env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    for n, (command, extra_env) in enumerate(commands):
        log, report = out / f"lane-{n}.log", out / f"lane-{n}.xml"
        with log.open("w") as sink:
            running.append((n, subprocess.Popen(command, cwd=ROOT, env={**base_env, **extra_env}, stdout=sink,
                                                stderr=subprocess.STDOUT), log, report))
    print(f"{len(lanes)} lanes started; logs in {out}", flush=True)
    codes, cpu = {}, {}
    while len(codes) < len(running):
        for n, process, log, _ in running:
            if n in codes:
                continue
            # wait4: the lane's exit status and the CPU of its whole reaped process tree
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                codes[n], cpu[n] = os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime
                process.returncode = codes[n]
                print(f"  lane {n} done in {time.monotonic() - started:5.0f} s ({cpu[n]:5.0f} CPU-s): "
                      f"{summary_line(log)}", flush=True)
        time.sleep(1)
    for n, _, log, _ in running:
        if codes[n]:
            print(f"\n{'=' * 30} lane {n} ({' '.join(lanes[n])}) {'=' * 30}")
            print(log.read_text(errors="replace"))
    print(f"\n{'=' * 30} slowest 10 tests (setup + call + teardown) {'=' * 30}")
    for seconds, name in slowest([r for *_, r in running]):
        print(f"{seconds:8.2f}s  {name}")
    print(f"\n{'=' * 30} the 10 modules that took the most CPU (own + child processes) {'=' * 30}")
    for seconds, name in cpu_by_module([out / f"lane-{n}.cpu" for n in range(len(lanes))]):
        print(f"{seconds:8.0f} CPU-s  {name}")
    print(f"\nall lanes: {time.monotonic() - started:.0f} s wall, {sum(cpu.values()):.0f} CPU-s; "
          + ", ".join(f"lane {n}: {'ok' if not c else f'exit {c}'}" for n, c in sorted(codes.items())))
    return max(codes.values())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
