"""The repro operators' semantics, written once (issue 28): what one output element of an
operator is, on float32 bit patterns and integers, and how a tensor is committed to and
opened. A leaf package: it imports nothing from ``truetrain.training``; the engine's kernels
and the on-chain one-step verifier (contracts/numerics/) are checked against it bit for bit.

* :mod:`.gemm_element`: one element of the linear product (quantise, exact sum, round, bias);
* :mod:`.tensor_merkle`: tensor roots in the canonical layout and range proofs.
"""
