"""Chain access: devnet processes, compiled artifacts, transactions, deployments."""
