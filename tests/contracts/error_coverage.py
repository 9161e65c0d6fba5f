"""Custom errors in the compiled ABIs that no transaction can reach after deployment, each
with the reason. tests/contracts/test_error_coverage.py requires every other error to be
expected by name in some test."""

from __future__ import annotations

UNREACHABLE_ERRORS: dict[str, str] = {
    "ERC20InvalidSender": (
        "(TrainToken, ReentrantToken) raised only when tokens move out of address(0): "
        "transfer/burn take msg.sender (never 0), "
        "and transferFrom(0, …) first spends an allowance of address(0), which can never be set "
        "(approve needs msg.sender 0, permit needs a signature that recovers to 0, which ECDSA "
        "rejects), so it reverts with ERC20InsufficientAllowance / ERC20InvalidApprover first"
    ),
    "ECDSAInvalidSignatureLength": (
        "only the bytes-signature form of ECDSA.recover raises it; ERC20Permit.permit uses the "
        "(v, r, s) form, whose signature has no length"
    ),
    "InvalidAccountNonce": (
        "raised only by Nonces._useCheckedNonce, which no TrainToken path calls (ERC20Permit uses "
        "the unchecked _useNonce; a reused nonce shows up as ERC2612InvalidSigner)"
    ),
    "StringTooLong": (
        "raised only by ShortStrings.toShortString in EIP712's constructor for names over 31 bytes; "
        "TrainToken's EIP-712 name and version are the fixed constants 'truetrain' and '1'"
    ),
    "InvalidShortString": (
        "raised only by ShortStrings.toString on a malformed ShortString; EIP712 builds its "
        "ShortStrings from the fixed constructor constants, which are well formed"
    ),
    "FailedCall": (
        "(ParameterTimelock, from OpenZeppelin's Address) raised only when a call the timelock "
        "executes reverts without data; every target it can call (StakeManager) reverts with a "
        "custom error, which the timelock passes on (test_attacks_admin.py expects that one)"
    ),
    "StepTreeSizeInvalid": (
        "(StepGame, StepTrees.rootOf) raised for no leaves or more than MAX_LEAVES; the game calls "
        "rootOf only on lists whose length is the layout's, which open() bounds to 1 .. MAX_STATE "
        "(= MAX_LEAVES) and commitTrace checks first (StepLayoutInvalid)"
    ),
}
