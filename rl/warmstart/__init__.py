"""Warm start of small policies: SFT on verified synthetic solved problems before RL (rl.warmstart.stage)."""
