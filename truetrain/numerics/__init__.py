"""The repro operators' semantics, written once (issue 28): what one output element of an
operator is, on float32 bit patterns and integers, and how a tensor is committed to and
opened. A leaf package: it imports nothing from ``truetrain.training``; the engine's kernels
and the on-chain one-step verifier (contracts/numerics/) are checked against it bit for bit.

* :mod:`.gemm_element`: one element of the linear product (quantise, exact sum, round, bias);
* :mod:`.optim_element`: one element of the Adam(W) / SGD updates and of the aggregation
  (FedAvg's mean, DiLoCo's outer step);
* :mod:`.elementwise`: ReLU and its mask, broadcast add, permute, the embedding's gather,
  dropout's counter-based mask;
* :mod:`.special`: the erf table (read by the engine), erf64, exp64, log64, sqrt64, GELU and
  its gradient;
* :mod:`.layernorm`: LayerNorm's forward and backward from whole rows (``tree_sum``);
* :mod:`.exact_sum`: the exact gradient sums (bias and LayerNorm column sums, the
  embedding's scatter);
* :mod:`.softmax`: the causal softmax's row sum, forward and backward;
* :mod:`.xent`: softmax cross-entropy's partial sums, gradient and loss;
* :mod:`.quant`: row scales, the weight gradient's element, attention's ``bmm_exact``;
* :mod:`.clip`: AdamW's clip factor from ranges' maxima and exact sums of squares (the grid's
  bits and epsilon read by the engine);
* :mod:`.pool`: 2x2 max pooling with its first-max mask, and its backward;
* :mod:`.ieee`: float32 / float64 arithmetic on bit patterns, NaN canonical;
* :mod:`.tensor_merkle`: tensor roots in the canonical layout and range proofs.
"""
