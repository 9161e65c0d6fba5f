"""The one exception hierarchy of truetrain.

Every error the project raises on purpose derives from :class:`TruetrainError`. Like
web3.py's ``Web3ValueError(Web3Exception, ValueError)``, some also derive from the matching
builtin so callers that catch ``ValueError`` or ``TimeoutError`` keep working. The CLI turns
a ``TruetrainError`` into one line on stderr and ``exit_code``; daemons log it and go on.
"""

from __future__ import annotations


class TruetrainError(Exception):
    """Base class of every error truetrain raises on purpose."""

    exit_code = 1
    #: True when retrying the same operation later may succeed (network, node restarting).
    retryable = False


# --- configuration and input ---------------------------------------------------------


class ConfigError(TruetrainError, ValueError):
    """A setting, flag or environment value is missing or invalid."""

    exit_code = 2


class ManifestError(TruetrainError, ValueError):
    """A job manifest does not match its schema."""

    exit_code = 2


# --- storage --------------------------------------------------------------------------


class StorageError(TruetrainError):
    """Base class of content-addressed storage errors."""


class StorageUnavailable(StorageError, ConnectionError):
    """The storage node cannot be reached (after retries)."""

    retryable = True


class StorageTimeout(StorageError, TimeoutError):
    """The storage node did not answer within the timeout."""

    retryable = True


class ContentNotFound(StorageError, LookupError):
    """The node answered but could not produce the requested content."""

    retryable = True


class ContentMismatch(StorageError):
    """Fetched bytes do not match the expected hash: never use them."""


class ContentTooLarge(StorageError):
    """Content is larger than the caller's size limit."""


class InvalidCid(StorageError, ValueError):
    """A string given as a CID (or IPFS path) is not one; the node refused to parse it."""


class NodeStartError(StorageError):
    """A local IPFS dev node could not be started (it exited or never became ready)."""


class NodePortInUse(NodeStartError):
    """The port asked for a local IPFS dev node is already taken by another process."""


# --- training -------------------------------------------------------------------------


class TrainingError(TruetrainError):
    """Base class of training, checkpoint and commitment errors."""


class CheckpointError(TrainingError, ValueError):
    """A checkpoint cannot be decoded or does not match its hash."""


class ReproducibilityError(TrainingError):
    """An operation was asked for that repro mode cannot do bit-exactly."""


class DatasetError(TrainingError, ValueError):
    """A dataset, shard or test set cannot be read or does not fit the job."""


class DataFormatError(DatasetError):
    """A language-model job's ``--data`` in a record form (JSON Lines, Parquet, a saved
    Hugging Face ``datasets`` folder) does not give one text per record as asked: a missing
    ``--text-field``, a record or row without it or with a value that is not a string, a file
    that is not of its form. The message names the line, row or column; nothing is sent."""

    exit_code = 2


class ModelFormatError(TrainingError, ValueError):
    """A model does not move exactly between a truetrain checkpoint and another format
    (transformers' GPT-2, safetensors): an option the other side lacks, or weights whose
    names, shapes, dtypes or values do not fit the job's model. Nothing approximate is
    written or sent instead."""

    exit_code = 2


class NumericsError(TrainingError, ValueError):
    """A tensor opening or a one-step operand that does not fit (a range outside the
    tensor, a proof that does not open against its root, limbs the engine does not take)."""


class TraceError(TrainingError, ValueError):
    """A step's program cannot be derived from a manifest, or two traces cannot be compared
    (truetrain/trace/)."""


class PipelineError(TrainingError, ValueError):
    """A pipelined job's split or schedule cannot run as asked (layer boundaries, a model
    kind that does not split, a stage message that does not match its hash)."""


# --- chain ----------------------------------------------------------------------------


class ChainError(TruetrainError):
    """Base class of errors talking to the contracts."""


class DeploymentError(ChainError):
    """A deployment file is missing or does not match the chain."""


class ChainChanged(ChainError):
    """The node behind the RPC URL is no longer the chain this process started on (another
    chain id, another genesis block, or the deployment's code gone); the message says how.
    Retryable: the original chain may come back (a node restored from its saved state)."""

    retryable = True


class DevnetError(ChainError):
    """A local devnet could not be started (port taken, binary missing, no answer)."""


class ContractRevert(ChainError):
    """A call or transaction reverted; ``error`` is the custom error's name when known."""

    def __init__(self, error: str, args: tuple = (), message: str | None = None):
        self.error = error
        self.error_args = tuple(args)
        shown = ", ".join(str(a) for a in self.error_args)
        super().__init__(message or f"{error}({shown})")


class RpcUnavailable(ChainError, ConnectionError):
    """The JSON-RPC node cannot be reached or timed out (after retries); try again later."""

    retryable = True


class TransactionRejected(ChainError):
    """The node refused a signed transaction (bad nonce, gas below intrinsic, underpriced)."""


class ReceiptTimeout(ChainError, TimeoutError):
    """A sent transaction was not mined (or not confirmed) within the timeout."""

    retryable = True


class HandlerFailed(ChainError):
    """An event handler raised; the follower's cursor stays before ``event`` to retry it."""

    retryable = True

    def __init__(self, event, cause: BaseException):
        self.event = event
        super().__init__(f"handler failed on {event}: {type(cause).__name__}: {cause}")


class MarketError(ChainError):
    """Base class of errors about what the market holds (jobs, tasks, results)."""


class UnknownJob(MarketError, LookupError):
    """No job has this id on the connected market."""

    exit_code = 2


class JobNotCompleted(MarketError):
    """A job being followed ended without completing: cancelled by its submitter, or
    expired. Exit code 3, so that a script tells it from a node that does not answer (1)."""

    exit_code = 3


class ResultInvalid(MarketError):
    """A published task result does not match what was committed on chain."""


class DisputeError(MarketError):
    """A dispute cannot be played as asked (checkpoints that do not match the mover's root,
    a game that does not exist, a move that is not ours)."""
