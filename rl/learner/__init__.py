"""The learner: advantages, policy-gradient losses, the trainable LoRA/full policy, checkpoints and its Ray actor.

Modules: `config` (typed settings and algorithm presets), `advantages` (GRPO / Dr. GRPO / RLOO, DAPO's
dynamic-sampling predicate, TrainBatch assembly), `losses` (token-level clipped policy-gradient loss,
KL, entropy, TIS, metrics), `logprobs` (micro-batch layouts and chunked token logprobs), `optim`
(AdamW, lr schedule), `policy` (model + reference + train_step / sft_step), `export` (adapter or
merged HF directory), `checkpoint` (atomic save/load), `actor` (the Ray actor and its driver-side
proxy), `random_models` (random-init models for tests and benchmarks), `ppo` (value head, GAE, value loss),
`sharded` (the FSDP2 rank), `group` (N ranks as Ray actors), `sharded_checkpoint` (DCP, any world size),
`full_state` (gathered serving weights). Formulas: docs/algorithms.md.
"""
