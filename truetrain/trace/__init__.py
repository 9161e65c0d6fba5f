"""A repro step's program and trace, for the levels of a dispute below the checkpoints
(docs/onestep.md): :func:`derive` the program from the manifest, :func:`build_trace` the
step's trace (every application's output root, the state roots), :func:`first_divergence`
the first entry two traces disagree on. Nothing imports this package on a worker's normal
path."""

from .builder import Trace, build_trace, committed, first_divergence, updated_state
from .program import (APP, BATCH, ENTRY_TYPES, KINDS, STATE, Application, Program, Ref, derive, derived_batch,
                      dims2, step_scalars)

__all__ = ["APP", "BATCH", "ENTRY_TYPES", "KINDS", "STATE", "Application", "Program", "Ref", "Trace", "build_trace",
           "committed", "derive", "derived_batch", "dims2", "first_divergence", "step_scalars", "updated_state"]
