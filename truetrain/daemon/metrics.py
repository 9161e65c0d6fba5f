"""Prometheus metrics of one daemon, on its own registry, served on 127.0.0.1:<metrics_port>."""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

log = logging.getLogger(__name__)


class Metrics:
    """The daemon's metrics; ``serve(port)`` starts the HTTP endpoint (``/metrics``)."""

    def __init__(self, role: str):
        self.registry = CollectorRegistry()
        r = self.registry
        self.tasks = Gauge("truetrain_tasks", "Tasks in this daemon's book by kind and state",
                           ["kind", "state"], registry=r)
        self.transactions = Counter("truetrain_transactions_total", "Transactions sent, by contract function",
                                    ["function"], registry=r)
        self.reverts = Counter("truetrain_reverts_total", "Calls refused by a contract, by custom error",
                               ["error"], registry=r)
        self.steps = Counter("truetrain_training_steps_total", "Training steps run", registry=r)
        self.steps_per_second = Gauge("truetrain_training_steps_per_second", "Speed of the last training task",
                                      registry=r)
        self.gpu_utilization = Gauge("truetrain_gpu_utilization_percent", "GPU utilisation (pynvml), -1 without a GPU",
                                     registry=r)
        self.gpu_memory_used = Gauge("truetrain_gpu_memory_used_mib", "GPU memory in use (pynvml)", registry=r)
        self.audits = Counter("truetrain_audits_total", "Replays by outcome (match, mismatch)", ["kind", "outcome"],
                              registry=r)
        self.disputes = Counter("truetrain_disputes_total", "Dispute games ended, by outcome for this daemon (won, lost)",
                                ["outcome"], registry=r)
        self.withdrawn = Counter("truetrain_withdrawn_wei_total", "Earnings withdrawn from the market", registry=r)
        self.gemm_route = Gauge("truetrain_gemm_route", "Repro GEMM route in use on the training device "
                                "(1 on the route the self-test chose)", ["device", "route"], registry=r)
        self.block = Gauge("truetrain_chain_block", "Latest block this daemon saw", registry=r)
        self.chain_changed = Gauge("truetrain_chain_changed", "1 while the node at the RPC URL is not the chain "
                                   "this daemon started on (it waits for that chain)", registry=r)
        self.errors = Counter("truetrain_errors_total", "Failures logged and survived, by type", ["type"], registry=r)
        self.role = role

    def serve(self, port: int) -> None:
        if port:
            start_http_server(port, addr="127.0.0.1", registry=self.registry)
            log.info("metrics on http://127.0.0.1:%d/metrics", port)

    def sample_gpu(self) -> None:
        """Read GPU utilisation and memory with pynvml; -1 when there is no NVIDIA GPU."""
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(0)
                self.gpu_utilization.set(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                self.gpu_memory_used.set(pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20)
            finally:
                pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - no driver, no GPU, no library: report "none"
            self.gpu_utilization.set(-1)

    def update_book(self, counts: dict[tuple[str, str], int]) -> None:
        for (kind, state), n in counts.items():
            self.tasks.labels(kind, state).set(n)
