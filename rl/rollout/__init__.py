"""Rollout engines: implementations of rl.types.RolloutEngine (vllm, hf, openai)."""
