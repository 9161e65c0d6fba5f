"""Reusable click options, parameter types and the connection a command works through.

Parameter types validate at parse time (an address, a CID, a token amount), so a bad value
is one line and exit code 2 before any node is asked. :class:`Session` opens the chain
(checked against the deployment file), the IPFS node and the signing key lazily, and turns
"cannot reach" into one clear line too.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

import click
from eth_account import Account
from web3 import Web3

from truetrain.endpoints import check_ipfs_addr, check_rpc_url
from truetrain.errors import ConfigError, TruetrainError
from truetrain.paths import DEPLOYMENTS, HOME
from truetrain.storage.cids import is_cid

TOKEN = 10**18
#: Largest token amount a command accepts (the contracts hold amounts in uint96).
MAX_AMOUNT_WEI = 2**96 - 1
DEVNET_STATE = HOME / ".devnet" / "devnet.json"
DEFAULT_RPC = "http://127.0.0.1:8545"
DEFAULT_IPFS = "/ip4/127.0.0.1/tcp/5001"


class Refused(TruetrainError):
    """A command's own checks refused it before it sent any transaction."""


#: IdentityRegistry role bits by the names commands use.
ROLE_BITS = {"worker": 1, "verifier": 2, "submitter": 4}


def role_names(roles: int) -> str:
    """``5`` → ``"worker, submitter"`` (``"none"`` for 0)."""
    return ", ".join(name for name, bit in ROLE_BITS.items() if roles & bit) or "none"


def format_tokens(wei: int) -> str:
    """``1234500000000000000000`` → ``1,234.50``."""
    return f"{Decimal(wei) / TOKEN:,.2f}"


class AddressType(click.ParamType):
    name = "address"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and Web3.is_address(value) and (value == value.lower() or Web3.is_checksum_address(value)):
            return Web3.to_checksum_address(value)
        self.fail(f"not an Ethereum address: {value!r}", param, ctx)


class CidType(click.ParamType):
    name = "cid"

    def convert(self, value, param, ctx):
        if is_cid(value):
            return value
        self.fail(f"not a CID: {value!r}", param, ctx)


class TokenAmountType(click.ParamType):
    """A decimal TRAIN amount (``12.5``) converted to wei; positive unless ``allow_zero``."""

    name = "amount"

    def __init__(self, allow_zero: bool = False):
        self.allow_zero = allow_zero

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            amount = Decimal(str(value).replace("_", ""))
        except InvalidOperation:
            self.fail(f"not a token amount: {value!r}", param, ctx)
        if not amount.is_finite():
            self.fail(f"not a token amount: {value!r}", param, ctx)
        if amount < 0 or (amount == 0 and not self.allow_zero):
            self.fail(f"amount must be {'>= 0' if self.allow_zero else '> 0'} TRAIN, got {value}", param, ctx)
        wei = amount * TOKEN
        if wei != wei.to_integral_value():
            self.fail(f"amount {value} has more than 18 decimals", param, ctx)
        if wei > MAX_AMOUNT_WEI:
            self.fail(f"amount {value} TRAIN is larger than the most the market accepts "
                      f"({format_tokens(MAX_AMOUNT_WEI)})", param, ctx)
        return int(wei)


class JobIdType(click.ParamType):
    """A job id: a positive integer."""

    name = "job_id"

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        job_id = int(value) if re.fullmatch(r"[0-9]{1,78}", str(value)) else 0
        if not 1 <= job_id < 2**256:
            self.fail(f"a job id is a positive integer, got {value!r}", param, ctx)
        return job_id


class JobIdCommand(click.Command):
    """A command taking a JOB_ID: a negative one (``-1``), which click reads as an unknown
    option, is refused as the job id it was meant to be."""

    def parse_args(self, ctx, args):
        given_args = list(args)  # click's parser consumes the list it is given
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            given = next((a for a in given_args if re.fullmatch(r"-[0-9][0-9_.]*", a) and a.startswith(exc.option_name)),
                         None)
            if given is None:
                raise
            job_id = next(p for p in self.params if p.name == "job_id")
            raise click.BadParameter(f"a job id is a positive integer, got {given!r}", ctx, job_id) from None


ADDRESS, CID, JOB_ID = AddressType(), CidType(), JobIdType()
AMOUNT = TokenAmountType()


def _devnet_state() -> dict:
    try:
        return json.loads(DEVNET_STATE.read_text())
    except (OSError, ValueError):
        return {}


def default_rpc() -> str:
    return default_rpc_from()[0]


def default_ipfs() -> str:
    return default_ipfs_from()[0]


def default_rpc_from() -> tuple[str, str]:
    """(the RPC URL a command uses without --rpc, where it comes from, for messages)."""
    if os.environ.get("TRUETRAIN_RPC"):
        return os.environ["TRUETRAIN_RPC"], "TRUETRAIN_RPC"
    url = _devnet_state().get("anvil", {}).get("url")
    return (url, f"the devnet's RPC URL in {DEVNET_STATE}") if url else (DEFAULT_RPC, "the default RPC URL")


def default_ipfs_from() -> tuple[str, str]:
    """(the IPFS API address a command uses without --ipfs, where it comes from)."""
    if os.environ.get("TRUETRAIN_IPFS"):
        return os.environ["TRUETRAIN_IPFS"], "TRUETRAIN_IPFS"
    addr = _devnet_state().get("ipfs", {}).get("api_addr")
    return (addr, f"the devnet's IPFS address in {DEVNET_STATE}") if addr else (DEFAULT_IPFS, "the default IPFS address")


def load_account(key: str | None, keystore: Path | None, account_index: int | None):
    """The signing account from a hex key, a keystore file (password in
    ``TRUETRAIN_KEYSTORE_PASSWORD``) or a devnet account index; None when none was given."""
    from truetrain.chain.client import dev_account

    given = [x is not None for x in (key, keystore, account_index)]
    if sum(given) > 1:
        raise ConfigError("give only one of --key, --keystore and --account")
    if key is not None:
        try:
            return Account.from_key(key)
        except (ValueError, TypeError):
            raise ConfigError("--key is not a 32-byte hex private key") from None
    if keystore is not None:
        return _open_keystore(Path(keystore))
    if account_index is not None:
        return dev_account(account_index)
    return None


def _open_keystore(path: Path):
    """The account in an encrypted key file: the file is checked before the password is asked."""
    if not path.exists():
        raise ConfigError(f"--keystore {path}: no such file")
    if path.is_dir():
        raise ConfigError(f"--keystore {path} is a folder, not a key file")
    try:
        keyfile = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--keystore {path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError:
        raise ConfigError(f"--keystore {path} is not a keystore file (an encrypted JSON key file)") from None
    if not isinstance(keyfile, dict) or not isinstance(keyfile.get("crypto", keyfile.get("Crypto")), dict):
        raise ConfigError(f"--keystore {path} is not a keystore file (an encrypted JSON key file)")
    password = os.environ.get("TRUETRAIN_KEYSTORE_PASSWORD")
    if password is None:
        raise ConfigError("--keystore needs its password in TRUETRAIN_KEYSTORE_PASSWORD")
    try:
        return Account.from_key(Account.decrypt(keyfile, password))
    except ValueError as exc:
        if "MAC mismatch" in str(exc):
            raise ConfigError(f"--keystore {path}: TRUETRAIN_KEYSTORE_PASSWORD is not its password") from None
        raise ConfigError(f"--keystore {path}: cannot decrypt it ({exc})") from None
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"--keystore {path} is not a keystore file (it lacks {exc})") from None


@dataclass
class Session:
    """What a command talks to; each part opens on first use."""

    rpc: str
    ipfs: str
    deployments: Path = DEPLOYMENTS
    key: str | None = None
    keystore: Path | None = None
    account_index: int | None = None
    _contracts: object = field(default=None, repr=False)
    _store: object = field(default=None, repr=False)
    _reader: object = field(default=None, repr=False)
    _account: object = field(default=None, repr=False)

    @property
    def contracts(self):
        if self._contracts is None:
            from truetrain.chain.handles import connect_deployment

            # Few retries: a person at a prompt would rather hear at once that nothing answers.
            self._contracts = connect_deployment(self.rpc, self.deployments, retries=2)
        return self._contracts

    @property
    def client(self):
        return self.contracts.client

    @property
    def store(self):
        if self._store is None:
            from truetrain.storage import StorageSettings, connect_store

            self._store = connect_store(StorageSettings(api_addr=self.ipfs, retries=1, timeout_s=10.0))
        return self._store

    @property
    def reader(self):
        if self._reader is None:
            from truetrain.market import MarketReader

            self._reader = MarketReader(self.contracts, self.store)
        return self._reader

    @property
    def account(self):
        if self._account is None:
            account = load_account(self.key, self.keystore, self.account_index)
            if account is None:
                raise ConfigError("this command signs transactions: pass --account N (devnet), --key or --keystore")
            self._account = account
        return self._account

    def address_or_own(self, given: str | None) -> str:
        """``given``, else the signing account's address (for commands that look one up)."""
        if given is not None:
            return given
        if (self.key, self.keystore, self.account_index) == (None, None, None):
            raise ConfigError("give an ADDRESS, or --account N / --key / --keystore for your own")
        return self.account.address

    def send(self, call, *, gas: int | None = None, confirmations: int | None = None):
        """Sign ``call`` with the session's account and wait for it (a revert raises first);
        ``confirmations`` overrides the client's (0: back as soon as it is mined)."""
        return self.client.transact(call, self.account, gas=gas, confirmations=confirmations)

    def balance(self, address: str) -> int:
        return self.client.call(self.contracts.token.functions.balanceOf(address))

    def require_funds(self, address: str, needed: int, what: str) -> None:
        """Refuse unless ``address`` holds ``needed`` TRAIN for ``what``."""
        held = self.balance(address)
        if held < needed:
            raise Refused(f"insufficient balance: {what} needs {format_tokens(needed)} TRAIN, "
                          f"{address} holds {format_tokens(held)} TRAIN")

    def require_allowance(self, address: str, spender: str, needed: int, what: str) -> None:
        """Refuse unless ``address`` already allows ``spender`` to pull ``needed`` TRAIN."""
        allowed = self.client.call(self.contracts.token.functions.allowance(address, spender))
        if allowed < needed:
            raise Refused(f"insufficient allowance: {what} needs {format_tokens(needed)} TRAIN, "
                          f"{address} allows {spender} {format_tokens(allowed)} TRAIN "
                          f"(drop --no-approve to approve it)")

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(f)


def session_options(signing: bool = False):
    """Add --rpc, --ipfs (and with ``signing`` --account/--key/--keystore); pass ``session``."""

    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, rpc, ipfs, deployments, account_index=None, key=None, keystore=None, **kwargs):
            # Checked before anything is asked of a node, naming where a bad value came from.
            rpc = check_rpc_url(*((rpc, "--rpc") if rpc is not None else default_rpc_from()))
            ipfs = check_ipfs_addr(*((ipfs, "--ipfs") if ipfs is not None else default_ipfs_from()))
            session = Session(rpc, ipfs, deployments or DEPLOYMENTS,
                              key=key, keystore=keystore, account_index=account_index)
            try:
                return f(*args, session=session, **kwargs)
            finally:
                session.close()

        if signing:
            wrapper = click.option("--keystore", type=click.Path(dir_okay=False, path_type=Path),
                                   help="Encrypted key file (password in TRUETRAIN_KEYSTORE_PASSWORD).")(wrapper)
            wrapper = click.option("--key", envvar="TRUETRAIN_KEY", help="Hex private key (or TRUETRAIN_KEY).")(wrapper)
            wrapper = click.option("--account", "account_index", type=click.IntRange(0, 19),
                                   help="Use Anvil's well-known devnet account N (devnets only).")(wrapper)
        wrapper = click.option("--deployments", type=click.Path(file_okay=False, path_type=Path),
                               envvar="TRUETRAIN_DEPLOYMENTS",
                               help="Folder of deployments/<chain id>.json [default: the checkout's, "
                                    "or TRUETRAIN_DEPLOYMENTS].")(wrapper)
        wrapper = click.option("--ipfs", metavar="MULTIADDR",
                               help="IPFS API address [default: the devnet's, TRUETRAIN_IPFS or /ip4/127.0.0.1/tcp/5001].")(wrapper)
        wrapper = click.option("--rpc", metavar="URL",
                               help="JSON-RPC URL [default: the devnet's, TRUETRAIN_RPC or http://127.0.0.1:8545].")(wrapper)
        return wrapper

    return decorate


def emit(payload, as_json: bool, human: str) -> None:
    """Print ``payload`` as JSON or the ``human`` line(s)."""
    click.echo(json.dumps(payload, default=str) if as_json else human)


__all__ = ["ADDRESS", "AMOUNT", "CID", "JOB_ID", "ROLE_BITS", "JobIdCommand", "Refused", "Session", "TokenAmountType",
           "TruetrainError", "emit", "format_tokens", "json_option", "load_account", "role_names", "session_options"]
