"""The end-to-end demo: devnet, daemons as processes, one job, its results and token flows."""
