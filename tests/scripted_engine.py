"""A scripted policy for trajectory tests: a rollout engine whose turns are written by the test.

A tiny model will not call tools reliably, so the loop and the parsers are tested with turns written here,
tokenized for real (the byte-level ChatML tokenizer of rl.learner.random_models, through the same
rl.rollout.common.prompt_ids the vllm and hf engines use), so token ids, prefixes and loss masks are those
a real engine would produce for the same texts.
"""

from __future__ import annotations

from typing import AsyncIterator, Callable

from rl.learner.random_models import byte_tokenizer
from rl.rollout.common import prompt_ids
from rl.types import RolloutRequest, Sample, WeightUpdate

# (trajectory id "request#index", turn) -> the policy's text for that turn; with `with_request`, the script is
# also given the turn's RolloutRequest (its problem, its messages)
Script = Callable[..., str]


class ScriptedEngine:
    def __init__(self, script: Script, with_request: bool = False):
        self.script, self.with_request = script, with_request
        self.tokenizer = byte_tokenizer()
        self.requests: list[RolloutRequest] = []

    async def generate(self, requests: list[RolloutRequest]) -> AsyncIterator[Sample]:
        for r in requests:
            self.requests.append(r)
            trajectory, turn = r.request_id.rsplit("/t", 1)
            text = self.script(trajectory, int(turn), r) if self.with_request else self.script(trajectory, int(turn))
            ids = self.tokenizer.encode(text, add_special_tokens=False)[: r.sampling.max_tokens - 1]
            completion = ids + [self.tokenizer.eos_token_id]
            yield Sample(
                r.request_id,
                r.problem_id,
                0,
                prompt_ids(self.tokenizer, r.messages),
                completion,
                self.tokenizer.decode(ids),
                [-0.25] * len(completion),
                "stop",
                r.policy_version,
            )

    def update_weights(self, update: WeightUpdate) -> float:
        return 0.0

    def shutdown(self) -> None:
        pass
