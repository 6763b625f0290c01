"""KernelRL's reward as a reward function for TRL's GRPOTrainer.

    from rewards.integrations.trl_reward import KernelRLReward
    trainer = GRPOTrainer(model=..., reward_funcs=[KernelRLReward(delta=1.8)], train_dataset=dataset, ...)

GRPOTrainer calls a reward function as `f(prompts=..., completions=..., completion_ids=..., **columns)`, every
other dataset column arriving as a keyword argument holding one value per completion; it wants one float per
completion back. The dataset needs a `problem_id` column (its name: `problem_id_column`), or `ground_truth` /
`extra_info` columns as verl datasets have them; an optional `problem_sha256` column pins the problem's version.
Completions may be plain strings or conversations (lists of messages: the last assistant message is the answer).

The batch is scored concurrently (`concurrency` requests in flight). Besides the rewards it logs the correct rate
(`kernelrl/correct`) through TRL's `log_metric` and each completion's status through `log_extra`, when the
trainer passes them. Example: conf/integrations/trl.yaml.
"""

from __future__ import annotations

from typing import Any, Sequence

from envs.service.client import TOKEN_ENV, RetryPolicy
from rewards.integrations.common import KernelRewardScorer, completion_text, problem_ref
from rewards.kernel_reward import DEFAULT_DELTA

__all__ = ["KernelRLReward"]


class KernelRLReward:
    """A GRPOTrainer reward function (a callable; TRL names it by `__name__`)."""

    __name__ = "kernelrl"

    def __init__(
        self,
        url: str | None = None,
        *,
        delta: float = DEFAULT_DELTA,
        concurrency: int = 8,
        timeout: float = 600.0,
        problem_id_column: str = "problem_id",
        token_env: str = TOKEN_ENV,
        retry: RetryPolicy | None = None,
        scorer: KernelRewardScorer | None = None,
    ):
        self.scorer = scorer or KernelRewardScorer(
            url, delta=delta, concurrency=concurrency, timeout=timeout, retry=retry, token_env=token_env
        )
        self.problem_id_column = problem_id_column

    def _refs(self, n: int, columns: dict[str, Any]) -> list[tuple[str, str | None]]:
        def column(name: str) -> Sequence[Any] | None:
            values = columns.get(name)
            if values is not None and len(values) != n:
                raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
            return values

        ids, shas = column(self.problem_id_column), column("problem_sha256")
        if ids is not None:
            return [
                problem_ref({"problem_id": ids[i], "problem_sha256": shas[i] if shas is not None else None})
                for i in range(n)
            ]
        truths, extras = column("ground_truth"), column("extra_info")
        if truths is None and extras is None:
            names = sorted(k for k in columns if k not in ("trainer_state", "log_extra", "log_metric"))
            raise KeyError(
                f"no {self.problem_id_column!r} (or ground_truth / extra_info) column among the dataset "
                f"columns the trainer passed: {names}"
            )
        return [
            problem_ref(truths[i] if truths is not None else None, extras[i] if extras is not None else None)
            for i in range(n)
        ]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        refs = self._refs(len(completions), kwargs)
        answers = [completion_text(c) for c in completions]
        scored = self.scorer.score_many([(pid, answer, sha) for (pid, sha), answer in zip(refs, answers)])
        log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
        if callable(log_metric) and scored:
            log_metric("kernelrl/correct", sum(s.verdict.correct for s in scored) / len(scored))
        if callable(log_extra):
            log_extra("kernelrl_status", [s.verdict.status.value for s in scored])
        return [s.reward for s in scored]
