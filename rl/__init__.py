"""Rollouts, the GRPO/PPO learner and the training loop (built on the environment in `envs`)."""
