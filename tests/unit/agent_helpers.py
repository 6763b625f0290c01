"""Shared builders for the agent's unit tests: verdicts and stored candidates without running anything."""

from envs.verdict import Status, Timings, TimingStats, Verdict
from rl.agent.records import CandidateRecord, Proposal
from rl.types import Sample


def verdict(status: str = "correct", speedup: float | None = None, problem_id: str = "p") -> Verdict:
    timings = None
    if speedup is not None:
        kernel = TimingStats.from_samples([1.0])
        base = TimingStats.from_samples([speedup])
        timings = Timings(kernel=kernel, eager=base, inductor=base)
    return Verdict(
        Status(status),
        problem_id,
        "cpu",
        speedup=speedup,
        baseline="inductor" if speedup else None,
        timings=timings,
        error=None if status == "correct" else "boom",
    )


def fake_reward(status: str = "correct", speedup: float | None = None) -> float:
    """A reward that grows with the speedup, as the real one does (its exact value is not under test here)."""
    return 0.0 if status != "correct" else 0.5 + (speedup or 0.0) / 10


def record(
    cid: int,
    status: str = "correct",
    speedup: float | None = None,
    cell: str = "c",
    island: int = 0,
    operator: str = "fresh",
    parents: tuple = (),
    text: str = "code",
    policy: str = "pol",
    duplicate_of: int | None = None,
) -> CandidateRecord:
    return CandidateRecord(
        cid,
        "p",
        Proposal(operator, text, "", policy, parents),
        f"sha{cid}",
        verdict(status, speedup),
        island,
        cell,
        1.0,
        duplicate_of,
        reward=fake_reward(status, speedup),
    )


class ScriptedEngine:
    """A model that answers requests with the given texts in order and keeps the prompts it was sent (what the
    agent asked is the thing under test, not what a model would write)."""

    def __init__(self, answers: list[str]):
        self.answers, self.prompts = list(answers), []

    async def generate(self, requests):
        for r in requests:
            self.prompts.append(r.messages)
            yield Sample(r.request_id, r.problem_id, 0, [], [], self.answers.pop(0), None, "stop", 0)

    def shutdown(self):
        pass
