"""The learner: advantages, policy-gradient losses, the trainable LoRA/full policy, checkpoints and its Ray actor.

Modules: `config` (typed settings), `advantages` (GRPO / Dr. GRPO / RLOO, DAPO's dynamic-sampling
predicate, TrainBatch assembly), `losses` (token-level clipped policy-gradient loss, KL, entropy, TIS,
metrics), `logprobs` (packing and chunked token logprobs), `policy` (model + optimizer + train_step +
export), `checkpoint` (atomic save/load), `actor` (the Ray actor). Formulas: docs/algorithms.md.
"""
