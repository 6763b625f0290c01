"""The float64 truth, input families and probe at full size on a GPU: a correct blocked-scan cumsum over
unscaled rows passes by the float64 truth (PyTorch's fp32 cumsum is not the truth), and partial-input
shortcuts that the problem's iid inputs let through are caught by the input families and the sensitivity
probe. Prints what each configuration decided, for docs/gpu-notes.md."""

from pathlib import Path

import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, Status, resolve_problem
from rewards.kernel_reward import reward_for_verdict

pytestmark = [pytest.mark.gpu, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
HACKS = ROOT / "tests" / "hacks"
SOLUTIONS = ROOT / "envs" / "builtin" / "solutions"
OFF = {"input_families": (), "sensitivity_probe": False}


def _evaluate(items, **settings):
    base = dict(device="cuda", workers=2, timed_runs=20, timeouts=PhaseTimeouts(correctness=120, timing=120))
    with Evaluator(EvalSettings(**{**base, **settings})) as ev:
        verdicts = ev.evaluate_many(items)
    for (problem, _), v in zip(items, verdicts):
        acc = v.accuracy
        print(
            f"\n{problem.id} {settings or 'defaults'}: {v.status.value} "
            f"reward {reward_for_verdict(v):.3f} speedup {v.speedup} "
            f"rule {acc.rule if acc else None} probe {acc.probe if acc else None} "
            f"cand-ref {acc.candidate_vs_reference if acc else None} cand-truth "
            f"{acc.candidate_vs_truth if acc else None} ref-truth {acc.reference_vs_truth if acc else None} "
            f"phases {v.phase_seconds}: {(v.error or '')[:300]}"
        )
    return verdicts


def test_blocked_scans_over_unscaled_rows_are_correct_at_full_size():
    problem = resolve_problem("L2_08_cumsum_unscaled")
    items = [
        (problem, (SOLUTIONS / "L2_08_cumsum_unscaled.py").read_text()),
        (problem, (HACKS / "legit_carry_scan_cumsum_unscaled.py").read_text()),
    ]
    for v in _evaluate(items, fp64_truth="always"):
        assert v.status is Status.CORRECT and v.hack is None, v.error
        assert v.accuracy.candidate_vs_truth is not None  # the truth fitted on the GPU
    _evaluate(items, fp64_truth="off")  # the plain rule alone: the correct cumsum judged incorrect


def test_partial_input_shortcuts_fail_at_full_size_only_with_families_or_probe():
    problem = resolve_problem("L2_07_mse_loss")
    items = [
        (problem, (HACKS / name).read_text())
        for name in ("hack_partial_input_strided_subsample.py", "hack_partial_input_fixed_prefix.py")
    ]
    for v in _evaluate(items):
        assert reward_for_verdict(v) == 0.0 and v.status is Status.INCORRECT, v.error
    _evaluate(items, **OFF)  # iid inputs alone: expected mostly correct (the hole)
    _evaluate(items, sensitivity_probe=False)
    _evaluate(items, input_families=())
