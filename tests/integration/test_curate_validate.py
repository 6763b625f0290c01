"""The validate stage in a real CPU worker: a usable problem is kept, a nondeterministic one (dropout in training
mode) and a degenerate one are rejected with the reason, a crawled module's failing input guess gives way to
the next, and SMALL_SIZES are derived for a KernelBench-format file without them."""

from __future__ import annotations

import pytest

from envs.data.records import CandidateProblem, Origin
from envs.data.validate import validate
from envs.problems import parse_problem
from envs.settings import EvalSettings

pytestmark = pytest.mark.integration

_TEMPLATE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}
    def forward(self, x):
        return {expr}

N = {n}
{small}
def get_inputs():
    return [torch.randn(N, {width})]

def get_init_inputs():
    return []
"""


def _problem(expr: str, init: str = "", n: int = 16, small: str = "SMALL_SIZES = {'N': 8}", width: int = 32) -> str:
    return _TEMPLATE.format(expr=expr, init=init or "        pass", n=n, small=small, width=width)


def test_validate_keeps_runs_and_rejects_with_reasons():
    from envs.worker.worker_set import WorkerSet

    cands = [
        CandidateProblem("good", _problem("torch.tanh(x) * 2"), Origin("synthetic", "t:good")),
        CandidateProblem(
            "dropout", _problem("self.drop(x)", "        self.drop = nn.Dropout(0.5)"), Origin("crawl", "t:dropout")
        ),
        CandidateProblem("constant", _problem("x * 0 + 1"), Origin("synthetic", "t:constant")),
        # The first guess feeds a 3-d input to a 2-d-only op; the second guess works.
        CandidateProblem(
            "guesses",
            _problem("torch.mm(x, x.t())", width="N, 4"),
            Origin("crawl", "t:guesses"),
            alternatives=(_problem("torch.mm(x, x.t())"),),
        ),
        CandidateProblem(
            "sizes", _problem("torch.relu(x)", n=4096, small="", width=4096), Origin("kernelbench", "t:sizes")
        ),
    ]
    pool = WorkerSet(EvalSettings(device="cpu", size="small", workers=1, correctness_trials=3))
    try:
        result = validate(cands, pool)
    finally:
        pool.close()
    kept = {c.id: c for c in result.kept}
    reasons = {d.problem: d.reason for d in result.decisions if d.decision == "reject"}
    assert set(kept) == {"good", "guesses", "sizes"}, reasons
    assert "nondeterministic" in reasons["dropout"]
    assert reasons["constant"].startswith("degenerate:")
    assert kept["guesses"].facts["validated_with"] == 1 and not kept["guesses"].alternatives
    assert any(
        d.problem == "guesses" and d.decision == "note" and "input guess 0" in d.reason for d in result.decisions
    )
    derived = parse_problem(kept["sizes"].source, "sizes").small_sizes
    assert derived and derived["N"] < 4096
