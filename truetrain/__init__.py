"""truetrain: an open market for machine-learning training compute.

The shared core imported by every role (worker, verifier, submitter). It never imports a
role, and roles never import each other: the contracts are the only shared state.
"""

__version__ = "0.1.0"
