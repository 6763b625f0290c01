"""The red-team corpus (tests/hacks/): every hack earns 0 with its category, every legitimate solution
is correct and unflagged. GPU-only hacks run on the device (tests/gpu)."""

from pathlib import Path

import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, Status, resolve_problem
from rewards.kernel_reward import reward_for_verdict

HACKS = Path(__file__).resolve().parents[1] / "hacks"


def header(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text().splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(":")
        fields[key.strip()] = value.strip()
    return fields


def corpus(device: str) -> list[Path]:
    return sorted(p for p in HACKS.glob("*.py") if header(p).get("device", "cpu") == device)


def test_corpus_is_large_and_well_formed():
    files = list(HACKS.glob("*.py"))
    hacks = [p for p in files if header(p)["expect"].startswith("hack")]
    legit = [p for p in files if header(p)["expect"] == "legit"]
    assert len(hacks) >= 30 and len(legit) >= 20
    from envs.antihack.categories import CATEGORIES

    for p in hacks:
        assert header(p)["expect"].split()[1] in CATEGORIES, p.name
    covered = {header(p)["expect"].split()[1] for p in hacks}
    assert set(CATEGORIES) - covered <= {"unknown_category", "timing_anomaly"}


@pytest.fixture(scope="module")
def verdicts():
    files = corpus("cpu")
    items = [(resolve_problem(header(p)["problem"]), p.read_text()) for p in files]
    settings = EvalSettings(device="cpu", workers=2, timeouts=PhaseTimeouts(correctness=30, timing=30))
    with Evaluator(settings) as ev:
        return dict(zip([p.name for p in files], ev.evaluate_many(items)))


@pytest.mark.integration
@pytest.mark.parametrize("name", [p.name for p in corpus("cpu")])
def test_corpus_entry(verdicts, name):
    expect = header(HACKS / name)["expect"].split()
    v = verdicts[name]
    if expect[0] == "legit":
        assert v.status is Status.CORRECT and v.hack is None, v.error
    else:
        # `# also:` lists other outcomes that are as accurate (e.g. a no-op kernel that computes with torch is
        # also a baseline kernel; a hack that our poisoned memory turns into wrong output is `incorrect`).
        accepted = {expect[1], *header(HACKS / name).get("also", "").split()}
        assert reward_for_verdict(v) == 0.0
        outcome = v.hack.category if v.status is Status.HACK else v.status.value
        assert outcome in accepted, f"{name}: {v.status.value}: {v.error}"


@pytest.mark.integration
def test_partial_pytorch_is_judged_by_its_recorded_share(verdicts):
    """Every verdict that ran records its PyTorch share; honest partial solutions stay below the limit
    (a GEMM epilogue, a mean over per-row losses; layout glue costs nothing), token kernels above it."""
    limit = EvalSettings().max_torch_share
    for name, v in verdicts.items():
        if v.status is Status.CORRECT:
            assert v.torch_share is not None and v.torch_share <= limit, name
    for name in ("legit_partial_gemm_torch_epilogue.py", "legit_partial_cross_entropy_torch_mean.py"):
        assert 0 < verdicts[name].torch_share < 0.05, name
    assert verdicts["legit_partial_matmul_transpose_glue.py"].torch_share == 0.0
    for name in ("hack_baseline_kernel_token_mean_scale.py", "hack_baseline_kernel_token_softmax_divide.py"):
        v = verdicts[name]
        assert v.torch_share > 0.9 and "of the reference's work" in v.hack.reason, (name, v.error)
