"""TrainToken: devnet-only mint and faucet, counted burns, ERC-20 and EIP-2612 errors."""

from __future__ import annotations

import random

import brownie
import pytest
from brownie import ZERO_ADDRESS, chain

from tests.contracts.helpers import dev_key, lo, permit_signature

AMOUNT = 5 * 10**18
SECP256K1_HALF_ORDER = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0


@pytest.fixture
def public_token(TrainToken, deployer):
    """The same bytecode deployed as if on a public chain (devnet = false)."""
    return TrainToken.deploy(False, [deployer], [1_000 * 10**18], {"from": deployer})


def test_deploy_setsMetadataOwnerAndDevnetFlag(token, deployer):
    assert token.name() == "truetrain"
    assert token.symbol() == "TRAIN"
    assert token.decimals() == 18
    assert token.owner() == deployer
    assert token.devnet() is True
    assert token.totalSupply() == token.totalMinted() == token.totalBurned() == 0


def test_mint_byOwner_creditsAndCounts(token, deployer, alice):
    tx = token.mint(alice, AMOUNT, {"from": deployer})
    assert token.balanceOf(alice) == AMOUNT
    assert token.totalMinted() == AMOUNT
    assert tx.events["Transfer"]["from"] == ZERO_ADDRESS
    assert tx.events["Transfer"]["value"] == AMOUNT


def test_mint_byNonOwner_reverts(token, alice):
    with brownie.reverts(f"OwnableUnauthorizedAccount: {lo(alice)}"):
        token.mint(alice, AMOUNT, {"from": alice})


def test_mint_onPublicChain_reverts(public_token, deployer, alice):
    with brownie.reverts(f"TokenNotDevnet: {chain.id}"):
        public_token.mint(alice, AMOUNT, {"from": deployer})


def test_mint_toZeroAddress_reverts(token, deployer):
    with brownie.reverts(f"ERC20InvalidReceiver: {ZERO_ADDRESS.lower()}"):
        token.mint(ZERO_ADDRESS, AMOUNT, {"from": deployer})


def test_faucet_drips_thenCoolsDown_thenDripsAgain(token, alice):
    tx = token.faucet({"from": alice})
    amount = token.FAUCET_AMOUNT()
    assert tx.events["FaucetDripped"]["account"] == alice
    assert tx.events["FaucetDripped"]["amount"] == amount
    assert token.balanceOf(alice) == amount
    assert token.totalMinted() == amount
    ready_at = tx.block_number + token.FAUCET_COOLDOWN_BLOCKS()
    with brownie.reverts(f"TokenFaucetCooldown: {lo(alice)}, {ready_at}"):
        token.faucet({"from": alice})
    chain.mine(ready_at - chain.height - 1)  # the next transaction lands in block ready_at
    token.faucet({"from": alice})
    assert token.balanceOf(alice) == 2 * amount


def test_faucet_onPublicChain_reverts(public_token, alice):
    with brownie.reverts(f"TokenNotDevnet: {chain.id}"):
        public_token.faucet({"from": alice})


def test_burn_countsTotalBurned_andEmits(token, deployer, alice):
    token.mint(alice, AMOUNT, {"from": deployer})
    tx = token.burn(AMOUNT // 5, {"from": alice})
    assert tx.events["TokensBurned"]["from"] == alice
    assert tx.events["TokensBurned"]["amount"] == AMOUNT // 5
    assert tx.events["TokensBurned"]["totalBurned"] == AMOUNT // 5
    token.burn(AMOUNT // 5, {"from": alice})
    assert token.totalBurned() == 2 * AMOUNT // 5
    assert token.totalSupply() + token.totalBurned() == token.totalMinted()


def test_burn_moreThanBalance_reverts(token, deployer, alice):
    token.mint(alice, AMOUNT, {"from": deployer})
    with brownie.reverts(f"ERC20InsufficientBalance: {lo(alice)}, {AMOUNT}, {AMOUNT + 1}"):
        token.burn(AMOUNT + 1, {"from": alice})


def test_transfer_toZeroAddress_reverts(token, deployer, alice):
    token.mint(alice, AMOUNT, {"from": deployer})
    with brownie.reverts(f"ERC20InvalidReceiver: {ZERO_ADDRESS.lower()}"):
        token.transfer(ZERO_ADDRESS, 1, {"from": alice})


def test_approve_zeroSpender_reverts(token, alice):
    with brownie.reverts(f"ERC20InvalidSpender: {ZERO_ADDRESS.lower()}"):
        token.approve(ZERO_ADDRESS, 1, {"from": alice})


def test_transferFrom_withoutAllowance_reverts(token, deployer, alice, bob):
    token.mint(alice, AMOUNT, {"from": deployer})
    with brownie.reverts(f"ERC20InsufficientAllowance: {lo(bob)}, 0, 1"):
        token.transferFrom(alice, bob, 1, {"from": bob})


def test_transferFrom_zeroOwner_reverts(token, bob):
    # Spending a zero allowance of address(0) re-approves it, which OpenZeppelin refuses.
    with brownie.reverts(f"ERC20InvalidApprover: {ZERO_ADDRESS.lower()}"):
        token.transferFrom(ZERO_ADDRESS, bob, 0, {"from": bob})


def test_transferOwnership_toZero_reverts(token, deployer):
    with brownie.reverts(f"OwnableInvalidOwner: {ZERO_ADDRESS.lower()}"):
        token.transferOwnership(ZERO_ADDRESS, {"from": deployer})


def test_permit_validSignature_setsAllowance_andUsesNonce(token, accounts):
    owner, spender = accounts[5], accounts[6]
    deadline = chain.time() + 3600
    v, r, s = permit_signature(token, dev_key(5), spender, AMOUNT, deadline)
    token.permit(owner, spender, AMOUNT, deadline, v, r, s, {"from": spender})
    assert token.allowance(owner, spender) == AMOUNT
    assert token.nonces(owner) == 1


def test_permit_replayed_reverts(token, accounts):
    owner, spender = accounts[5], accounts[6]
    deadline = chain.time() + 3600
    v, r, s = permit_signature(token, dev_key(5), spender, AMOUNT, deadline)
    token.permit(owner, spender, AMOUNT, deadline, v, r, s, {"from": spender})
    # The nonce moved on, so the same signature now recovers to some other address.
    with pytest.raises(brownie.exceptions.VirtualMachineError) as failure:
        token.permit(owner, spender, AMOUNT, deadline, v, r, s, {"from": spender})
    assert failure.value.revert_msg.startswith("ERC2612InvalidSigner: ")
    assert failure.value.revert_msg.endswith(f", {lo(owner)}")


def test_permit_expired_reverts(token, accounts):
    owner, spender = accounts[5], accounts[6]
    # Behind the last block's timestamp, so expired whenever the permit is mined (brownie's
    # chain.time() is the wall clock, which a test chain reverted to a snapshot may trail).
    deadline = chain[-1].timestamp - 10
    v, r, s = permit_signature(token, dev_key(5), spender, AMOUNT, deadline)
    with brownie.reverts(f"ERC2612ExpiredSignature: {deadline}"):
        token.permit(owner, spender, AMOUNT, deadline, v, r, s, {"from": spender})


def test_permit_signedByAnother_reverts(token, accounts):
    owner, spender, signer = accounts[5], accounts[6], accounts[7]
    deadline = chain.time() + 3600
    # accounts[7] signs a permit that names accounts[5] as the owner.
    v, r, s = permit_signature(token, dev_key(7), spender, AMOUNT, deadline, owner=owner)
    with brownie.reverts(f"ERC2612InvalidSigner: {lo(signer)}, {lo(owner)}"):
        token.permit(owner, spender, AMOUNT, deadline, v, r, s, {"from": spender})


def test_permit_invalidV_reverts(token, accounts):
    owner, spender = accounts[5], accounts[6]
    deadline = chain.time() + 3600
    _, r, s = permit_signature(token, dev_key(5), spender, AMOUNT, deadline)
    with brownie.reverts("ECDSAInvalidSignature: "):
        token.permit(owner, spender, AMOUNT, deadline, 29, r, s, {"from": spender})


def test_permit_highS_reverts(token, accounts):
    owner, spender = accounts[5], accounts[6]
    deadline = chain.time() + 3600
    v, r, _ = permit_signature(token, dev_key(5), spender, AMOUNT, deadline)
    high_s = "0x" + (SECP256K1_HALF_ORDER + 1).to_bytes(32, "big").hex()
    with brownie.reverts(f"ECDSAInvalidSignatureS: {bytes.fromhex(high_s[2:])!r}"):
        token.permit(owner, spender, AMOUNT, deadline, v, r, high_s, {"from": spender})


def test_conservation_balancesPlusBurned_equalsMinted(token, deployer, accounts):
    """invariant_token_conserved: over a mixed sequence, Σ balances + totalBurned == totalMinted."""
    holders = accounts[2:6]
    rng = random.Random(7)
    for step in range(30):
        actor = holders[rng.randrange(len(holders))]
        action = rng.choice(("mint", "faucet", "transfer", "burn"))
        balance = token.balanceOf(actor)
        if action == "mint":
            token.mint(actor, rng.randrange(1, 10**20), {"from": deployer})
        elif action == "faucet":
            try:
                token.faucet({"from": actor})
            except brownie.exceptions.VirtualMachineError:
                pass  # cooling down
        elif action == "transfer" and balance:
            token.transfer(holders[rng.randrange(len(holders))], rng.randrange(balance + 1), {"from": actor})
        elif action == "burn" and balance:
            token.burn(rng.randrange(balance + 1), {"from": actor})
        total = sum(token.balanceOf(h) for h in holders)
        assert total == token.totalSupply()
        assert total + token.totalBurned() == token.totalMinted()
