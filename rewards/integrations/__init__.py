"""Reward adapters for other trainers, on KernelRL's HTTP evaluation service (envs/service/client.py):

    rewards.integrations.verl_reward   verl's custom reward function: compute_score(data_source, solution_str, ...)
    rewards.integrations.trl_reward    TRL's GRPOTrainer reward function: KernelRLReward()(prompts, completions, ...)
    rewards.integrations.skyrl_env     a SkyRL-gym BaseTextEnv: KernelRLEnv(env_config, extras)

Each one asks the service for the verdict and computes the reward from it with rewards/kernel_reward.py (the
same function KernelRL trains with), at the adapter's own `delta`. docs/integrations.md shows their configs.
The trainers' packages are imported only by the module that needs them.
"""

from rewards.integrations.common import KernelRewardScorer, Scored, completion_text, problem_ref

__all__ = ["KernelRewardScorer", "Scored", "completion_text", "problem_ref"]
