"""What the worker and verifier daemons share: typed settings, the persisted task book,
structured logs, Prometheus metrics, the keeper duty and the run loop (:class:`Daemon`)."""
