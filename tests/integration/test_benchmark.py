"""scripts/benchmark.py as a user runs it (real subprocesses, worker processes, the Triton interpreter on CPU):
the built-in reference solutions, k samples from files, unchanged KernelBench problems at derived small sizes,
refinement through a real (tiny, random) model, comparison tables and bad configurations."""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envs.problems import load_builtin

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

SOLUTIONS = ROOT / "envs" / "builtin" / "solutions"
KB_ANSWERS = ROOT / "tests" / "bench_answers" / "kernelbench"


def kernelbench_root() -> Path | None:
    for candidate in (Path("/work/shared/kernelbench"), ROOT.parent / "shared" / "kernelbench"):
        if (candidate / "KernelBench" / "level1").is_dir():
            return candidate
    return None


def bench(
    tmp_path: Path, *overrides: str, timeout: int = 900, device: str = "cpu", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        **(env or {}),
        "WANDB_MODE": "offline",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "benchmark.py"),
            f"eval.device={device}",
            f"cache_path={tmp_path / 'cache.sqlite'}",
            "progress=false",
            f"hydra.run.dir={tmp_path / 'hydra'}",
            *overrides,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


def test_builtin_reference_solutions_all_correct(tmp_path):
    out = tmp_path / "run" / "ref.json"
    result = bench(
        tmp_path, "policy=files", f"policy.dir={SOLUTIONS}", f"output={out}", "eval.workers=2", "min_correct_at_1=1.0"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["problems"] == len(load_builtin()) and report["correct_at_1"] == 1.0
    assert report["pass_at_k"] == {"1": 1.0}
    assert report["fast_p"]["0"] == 1.0 and report["fast_p"]["1"] is None  # CPU: correctness only
    assert sorted(report["per_level"]) == ["0", "1", "2", "3", "4", "5"]
    per_level = collections.Counter(str(p.level) for p in load_builtin())  # level 2 has 8 since L2_08
    assert all(
        lv["correct_at_1"] == 1.0 and lv["problems"] == per_level[level] for level, lv in report["per_level"].items()
    )
    assert report["status_mix"]["correct"] == len(load_builtin()) and report["run"]["derived_sizes"] == {}
    row = next(r for r in report["per_problem"] if r["problem_id"] == "L2_01_softmax")
    assert row["attempts"][0]["verdict"]["status"] == "correct" and row["level"] == 2
    for name in ("ref.md", "speedup_distribution.png", "per_level.png", "fast_p.png"):
        assert (out.parent / name).stat().st_size > 0, name
    assert list((out.parent / "wandb").glob("offline-run-*")), "no offline W&B run"
    assert "| correct@1 | 100.0% |" in result.stdout


def test_k_samples_from_files_and_compare(tmp_path):
    answers = tmp_path / "answers"
    (answers / "L0_02_relu").mkdir(parents=True)
    (answers / "L0_02_relu" / "0.py").write_text((SOLUTIONS / "L0_02_relu.py").read_text())
    (answers / "L0_02_relu" / "1.md").write_text(f"```python\n{(SOLUTIONS / 'L0_04_sigmoid.py').read_text()}```\n")
    (answers / "L0_02_relu" / "2.py").write_text((SOLUTIONS / "L0_02_relu.py").read_text())
    (answers / "L0_04_sigmoid").mkdir()
    for k in range(3):
        (answers / "L0_04_sigmoid" / f"{k}.py").write_text((SOLUTIONS / "L0_04_sigmoid.py").read_text())
    out = tmp_path / "k.json"
    result = bench(
        tmp_path,
        "policy=files",
        f"policy.dir={answers}",
        f"output={out}",
        "ids=[L0_02_relu,L0_04_sigmoid]",
        "wandb.mode=disabled",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["problems"] == 2 and report["samples_per_problem"] == 3
    assert report["correct_at_1"] == 1.0
    assert report["pass_at_k"]["1"] == pytest.approx((2 / 3 + 1) / 2) and report["pass_at_k"]["2"] == 1.0
    assert report["status_mix"]["correct"] == 5 and report["status_mix"]["incorrect"] == 1
    relu = next(r for r in report["per_problem"] if r["problem_id"] == "L0_02_relu")
    assert [a["status"] for a in relu["attempts"]] == ["correct", "incorrect", "correct"]
    assert not (tmp_path / "wandb").exists()

    table = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "benchmark.py"),
            "compare",
            str(out),
            str(out),
            "--out",
            str(tmp_path / "cmp.md"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert table.returncode == 0, table.stderr
    assert (
        "| pass@1 | 83.3% | 83.3% |" in table.stdout
        and (tmp_path / "cmp.md").read_text().strip() == table.stdout.strip()
    )
    (tmp_path / "bad.json").write_text("{}")
    bad = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "benchmark.py"), "compare", str(tmp_path / "bad.json")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "not a benchmark.json" in bad.stderr


def test_a_training_runs_start_and_final_answers(tmp_path):
    """policy=run: the completions a run recorded at its step-0 and last validation, judged again; the problems
    default to the ones the run answered."""
    from envs.verdict import Status, Verdict
    from rl.metrics import sample_rows
    from rl.tracking import RunLogger, WandbConfig
    from rl.types import Group, Sample, ScoredSample

    relu, sigmoid = (f"```python\n{(SOLUTIONS / f'{n}.py').read_text()}```" for n in ("L0_02_relu", "L0_04_sigmoid"))
    recorded = {
        0: {"L0_02_relu": [sigmoid, relu], "L0_04_sigmoid": [sigmoid, sigmoid]},
        3: {"L0_02_relu": [relu, relu]},
    }
    logger = RunLogger(tmp_path / "run", WandbConfig(mode="disabled"))
    for step, problems in recorded.items():
        groups = [
            Group(
                f"{pid}/{step}",
                pid,
                [
                    ScoredSample(
                        Sample(pid, pid, i, [1], [2], text, None, "stop", 0),
                        Verdict(Status.CORRECT, pid, "cpu"),
                        0.0,
                        {},
                    )
                    for i, text in enumerate(texts)
                ],
            )
            for pid, texts in problems.items()
        ]
        logger.samples(sample_rows(groups, step, split="val"))
    logger.close()

    reports = {}
    for step in ("0", "last"):
        out = tmp_path / f"{step}.json"
        result = bench(
            tmp_path,
            "policy=run",
            f"policy.run={tmp_path / 'run'}",
            f"policy.step={step}",
            f"output={out}",
            "wandb.mode=disabled",
        )
        assert result.returncode == 0, result.stderr[-3000:]
        reports[step] = json.loads(out.read_text())
    start, final = reports["0"], reports["last"]
    assert start["problems"] == 2 and final["problems"] == 1  # the problems each step answered
    assert start["samples_per_problem"] == 2
    assert {k: v for k, v in start["status_mix"].items() if v} == {"correct": 3, "incorrect": 1}
    assert start["pass_at_k"]["1"] == pytest.approx(0.75) and final["correct_at_1"] == 1.0
    assert "step 3, val" in final["run"]["policy"]
    relu_row = next(r for r in start["per_problem"] if r["problem_id"] == "L0_02_relu")
    assert [a["status"] for a in relu_row["attempts"]] == ["incorrect", "correct"]


@pytest.mark.skipif(kernelbench_root() is None, reason="no KernelBench checkout in /work/shared or ../shared")
def test_kernelbench_problems_at_derived_small_sizes(tmp_path):
    out = tmp_path / "kb.json"
    ids = "[kernelbench/level1/19,kernelbench/level1/21,kernelbench/level1/23,kernelbench/level2/1]"
    result = bench(
        tmp_path,
        "policy=files",
        f"policy.dir={KB_ANSWERS}",
        f"problems={kernelbench_root()}",
        f"ids={ids}",
        f"output={out}",
        "wandb.mode=disabled",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    derived = report["run"]["derived_sizes"]
    assert sorted(derived) == [
        "kernelbench/level1/19",
        "kernelbench/level1/21",
        "kernelbench/level1/23",
        "kernelbench/level2/1",
    ]
    conv = derived["kernelbench/level2/1"]["sizes"]
    assert conv["bias_shape"] == [conv["out_channels"], 1, 1]  # the dependent constant follows its size
    for d in derived.values():
        assert d["estimated_elements"] <= 65536 and d["trials"][-1]["outcome"] == "ok"
    by_id = {r["problem_id"]: r for r in report["per_problem"]}
    assert by_id["kernelbench/level1/19"]["status_at_1"] == "correct"
    assert by_id["kernelbench/level1/23"]["status_at_1"] == "correct"  # the .md answer's code block
    assert by_id["kernelbench/level1/21"]["status_at_1"] == "incorrect"  # a linear approximation is no sigmoid
    assert by_id["kernelbench/level2/1"]["status_at_1"] == "compile_error"  # no answer on disk
    assert by_id["kernelbench/level1/19"]["sizes"] == derived["kernelbench/level1/19"]["sizes"]
    assert report["correct_at_1"] == 0.5 and report["per_level"]["2"]["correct_at_1"] == 0.0
    assert "Derived small sizes" in (tmp_path / "kb.md").read_text()


@pytest.mark.skipif(kernelbench_root() is None, reason="no KernelBench checkout in /work/shared or ../shared")
def test_a_problem_already_small_is_benchmarked_as_written(tmp_path):
    """KernelBench level3/32 has no SMALL_SIZES but its inputs are small: no size is derived for it, as eval_kernel.py
    and training leave it (envs.small_sizes.needs_small_sizes)."""
    out, answers = tmp_path / "kb.json", tmp_path / "answers"
    answers.mkdir()
    (answers / "32_ConvolutionalVisionTransformer.py").write_text("def ModelNew(:\n")  # judged, not run
    result = bench(
        tmp_path,
        "policy=files",
        f"policy.dir={answers}",
        f"problems={kernelbench_root()}",
        "ids=[kernelbench/level3/32]",
        f"output={out}",
        "wandb.mode=disabled",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["run"]["derived_sizes"] == {} and not report["run"]["skipped"]
    (row,) = report["per_problem"]
    assert row["problem_id"] == "kernelbench/level3/32" and row["sizes"] is None
    assert row["status_at_1"] == "compile_error"


def test_refinement_rounds_through_a_real_model(tmp_path):
    """A tiny random Llama (rl.models random:tiny-llama, hf engine in a Ray actor) answers garbage: every chain
    stays open, so each sample gets both attempts, the second prompted with the evaluator's feedback."""
    out = tmp_path / "r.json"
    result = bench(
        tmp_path,
        "policy=tiny_random",
        "ids=[L0_02_relu,L1_02_swish]",
        "samples=2",
        "attempts=2",
        "sampling.max_tokens=24",
        "sampling.temperature=1.0",
        "prompt.one_shot=false",
        f"output={out}",
        "wandb.mode=disabled",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["run"]["rounds"] == 2 and report["attempts"] == 8 and report["correct_any"] == 0.0
    for row in report["per_problem"]:
        assert sorted((a["sample"], a["attempt"]) for a in row["attempts"]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
        first, second = (next(a for a in row["attempts"] if a["attempt"] == i and a["sample"] == 0) for i in (0, 1))
        assert second["prompt_tokens"] > first["prompt_tokens"] + first["completion_tokens"]  # answer + feedback
        assert 0 < first["completion_tokens"] <= 24
    assert report["tokens"]["completion"] > 0 and report["pass_at_k"]["2"] == 0.0


def test_a_warm_started_policy_is_benchmarked_as_training_starts_it(tmp_path):
    """A base model whose policy enables the warm start is measured after it, as a training run with the same
    prompts would start (built here in a model cache of the test's own, verified pairs and SFT included); the
    report names the warm-started model and a second benchmark reuses it. A model directory (a run's
    final_policy, the merged warm start itself) is measured as it is."""
    from rl.models import smollm2_tokenizer

    cache = tmp_path / "models"
    shutil.copytree(smollm2_tokenizer(), cache / "smollm2-tokenizer")

    def policy_of(run: str, *model: str) -> str:
        out = tmp_path / f"{run}.json"
        result = bench(
            tmp_path,
            "policy=tiny_random",
            "+policy.warm_start={enabled: true, epochs: 1, batch_size: 8}",
            "prompt=compact",
            *model,
            "ids=[L0_02_relu]",
            "sampling.max_tokens=8",
            f"output={out}",
            "wandb.mode=disabled",
            env={"KERNELRL_MODEL_CACHE": str(cache)},
        )
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads(out.read_text())
        assert report["attempts"] == 1
        return report["run"]["policy"]

    first, again = policy_of("first"), policy_of("again")
    built = [d for d in cache.iterdir() if d.is_dir() and "-warmstart-" in d.name]
    assert len(built) == 1 and (built[0] / "config.json").is_file()
    assert first == again == f"tiny-random (hf, warm-started: {built[0].name})"
    assert policy_of("directory", f"policy.model={built[0]}") == "tiny-random (hf)"
    assert [d for d in cache.iterdir() if d.is_dir() and "-warmstart-" in d.name] == built


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["policy=files"], "policy.dir"),
        (["policy=gpt5", "+policy.warm_start.enabled=true"], "needs a trainable local policy"),
        (["policy=tiny_random", "+policy.warm_start.enabled=true", "warm_start=yes"], "warm_start must be"),
        (["policy=tiny_random", "+policy.warm_start.epoch=1"], "warm_start"),
        (["policy=files", f"policy.dir={SOLUTIONS}", "ids=[no_such_problem]"], "unknown problem ids"),
        (["policy=files", f"policy.dir={SOLUTIONS}", "attempts=3"], "first attempts only"),
        (["policy=files", "policy.dir=/nonexistent/answers"], "no such directory"),
        (["policy=files", f"policy.dir={SOLUTIONS}", "delta=abc"], "delta must be a finite number"),
        (["policy=run"], "policy.run"),
        (["policy=run", "policy.run=/nonexistent/run"], "no samples.jsonl"),
    ],
)
def test_bad_configurations_exit_2(tmp_path, overrides, message):
    result = bench(tmp_path, *overrides, "wandb.mode=disabled", timeout=300)
    assert result.returncode == 2 and message in result.stderr, result.stderr[-2000:]


class ScriptedPolicy:
    """A policy whose answers are fixed per attempt (a deterministic stand-in for a model that learns from the
    feedback); it records the requests it saw."""

    def __init__(self, answers: list[str]):
        self.answers, self.requests = answers, []

    async def generate(self, requests):
        from rl.types import Sample

        for r in requests:
            self.requests.append(r)
            attempt = int(r.request_id.rsplit("/a", 1)[1])
            for i in range(r.sampling.n):
                yield Sample(
                    r.request_id,
                    r.problem_id,
                    i,
                    [1] * len(r.messages),
                    [2] * 5,
                    self.answers[attempt],
                    None,
                    "stop",
                    0,
                )


@pytest.mark.parametrize("history", ["last", "all"])
def test_refinement_feeds_the_verdict_back_and_stops_when_correct(history):
    import asyncio

    from envs import EvalSettings, Evaluator, resolve_problem
    from rl.bench.metrics import summarize
    from rl.bench.runner import RunSettings, run_benchmark

    relu, sigmoid = (SOLUTIONS / "L0_02_relu.py").read_text(), (SOLUTIONS / "L0_04_sigmoid.py").read_text()
    problem = resolve_problem("L0_02_relu")
    policy = ScriptedPolicy(["no code here", sigmoid, relu, relu])
    first = [{"role": "system", "content": "rules"}, {"role": "user", "content": "the problem"}]
    with Evaluator(EvalSettings(device="cpu")) as ev:
        results, stats = asyncio.run(
            run_benchmark(
                [problem],
                policy,
                lambda p: list(first),
                ev.evaluate_many,
                RunSettings(samples=1, attempts=4, history=history),
            )
        )
    statuses = [a.verdict.status.value for a in results[0].attempts]
    assert statuses == ["compile_error", "incorrect", "correct"]  # the chain closes at the correct answer
    assert stats.rounds == 3
    s = summarize(results)
    assert s["correct_at_1"] == 0.0 and s["correct_within_attempts"] == 1.0
    second, third = policy.requests[1].messages, policy.requests[2].messages
    assert second[:2] == first and second[2] == {"role": "assistant", "content": "no code here"}
    assert "compile_error" in second[3]["content"] and second[3]["role"] == "user"
    assert "incorrect" in third[-1]["content"] and third[-2]["content"] == sigmoid
    assert len(third) == (4 if history == "last" else 6)  # last: only the latest answer and its verdict
