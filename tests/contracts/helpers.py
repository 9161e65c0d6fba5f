"""Test helpers: dev-account keys, EIP-2612 permit signatures, the property tests' draw
settings and small formatting helpers."""

from __future__ import annotations

import os

from brownie import chain, web3
from eth_account import Account
from eth_account.messages import encode_typed_data
from hypothesis import HealthCheck, settings

from truetrain.chain.client import dev_account


def fixed_draws(**limits) -> settings:
    """Hypothesis settings for a property test in `make test`: the same examples on every
    run (derandomized, no example database), so the suite's outcome and time do not depend
    on a draw (one unseeded run of the market walk took 159 CPU-s, others under 30).
    ``TT_HYPOTHESIS_EXPLORE=1`` draws fresh examples instead, to search wider by hand."""
    fixed = os.environ.get("TT_HYPOTHESIS_EXPLORE") != "1"
    extra = {"derandomize": True, "database": None} if fixed else {}
    return settings(deadline=None, suppress_health_check=list(HealthCheck), **extra, **limits)


#: EIP-170's limit on deployed code; every contract keeps at least 10 % of it free.
CONTRACT_LIMIT = 24_576


def assert_headroom(contract) -> int:
    """Assert the deployed code of ``contract`` keeps >= 10 % of EIP-170's limit free; its size."""
    size = len(web3.eth.get_code(contract.address))
    assert size <= CONTRACT_LIMIT * 0.9, size
    return size


def dev_key(index: int) -> str:
    """Private key of Anvil dev account ``index`` (hex); the chain brownie starts uses them."""
    return dev_account(index).key.hex()


def lo(address) -> str:
    """An address as brownie prints it inside a decoded custom error (lowercase hex)."""
    return str(address).lower()


def permit_signature(token, signer_key: str, spender, value: int, deadline: int, nonce=None, owner=None):
    """Sign an EIP-2612 permit for ``token`` with ``signer_key``; returns (v, r, s) as brownie args.

    The permit names the signer as owner unless ``owner`` is given (to forge one for another
    account); ``nonce`` defaults to the owner's current nonce."""
    owner = str(owner) if owner is not None else Account.from_key(signer_key).address
    if nonce is None:
        nonce = token.nonces(owner)
    message = {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            "Permit": [
                {"name": "owner", "type": "address"},
                {"name": "spender", "type": "address"},
                {"name": "value", "type": "uint256"},
                {"name": "nonce", "type": "uint256"},
                {"name": "deadline", "type": "uint256"},
            ],
        },
        "primaryType": "Permit",
        "domain": {
            "name": token.name(),
            "version": "1",
            "chainId": chain.id,
            "verifyingContract": token.address,
        },
        "message": {
            "owner": owner,
            "spender": str(spender),
            "value": value,
            "nonce": nonce,
            "deadline": deadline,
        },
    }
    signed = Account.sign_message(encode_typed_data(full_message=message), signer_key)
    return signed.v, "0x" + signed.r.to_bytes(32, "big").hex(), "0x" + signed.s.to_bytes(32, "big").hex()
