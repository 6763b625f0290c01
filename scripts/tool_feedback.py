"""What the policy reads from `kernel_evaluator` and `profile` for the built-in reference solutions (and one
broken variant each), with the wall time of each tool call, then a table of the timings. Runs on one machine,
without Ray by default:

    python scripts/tool_feedback.py --device cuda L0_02_relu L2_01_softmax L3_01_matmul L5_01_attention
    python scripts/tool_feedback.py --device cuda --pool ray L0_02_relu     # through RayEvaluationPool's actors
    python scripts/tool_feedback.py --device cpu L0_02_relu          # correctness only; profile says it needs a GPU

`--json FILE` also writes one JSON line per tool call (problem, tool, variant, ok, seconds, the text).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path

from envs import EvalSettings, Evaluator, resolve_problem
from envs.tools import TOOLS, ToolContext
from rewards import reward_for_verdict


@contextlib.contextmanager
def backend(settings: EvalSettings, pool: str):
    """The tools' evaluation backend: a local Evaluator, or the Ray pool (one actor)."""
    if pool == "ray":
        from envs.pool import PoolConfig, RayEvaluationPool

        with RayEvaluationPool(settings, PoolConfig(num_actors=1, init_kwargs={"include_dashboard": False})) as p:
            yield p
    else:
        with Evaluator(settings) as evaluator:
            yield evaluator


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--size", default=None, help="full or small (default: full on cuda, small on cpu)")
    parser.add_argument("--pool", choices=("local", "ray"), default="local")
    parser.add_argument("--json", default=None, help="write one JSON line per tool call here")
    args = parser.parse_args()
    settings = EvalSettings(device=args.device, workers=1, **({"size": args.size} if args.size else {}))
    rows = []
    with backend(settings, args.pool) as tools_backend:
        for problem_id in args.problems:
            problem = resolve_problem(problem_id)
            reference = Path(problem.reference_solution).read_text()
            broken = reference.replace("tl.store(", "tl.store(1 + ", 1) if "tl.store(" in reference else reference
            for variant, tool, code in (
                ("reference", "kernel_evaluator", reference),
                ("reference", "profile", reference),
                ("broken", "kernel_evaluator", broken),
            ):
                context = ToolContext(
                    problem,
                    evaluator=tools_backend,
                    profiler=tools_backend,
                    evaluations_left=10,
                    reward=reward_for_verdict,
                )
                started = time.perf_counter()
                result = asyncio.run(TOOLS[tool].run({"code": code}, context))
                seconds = time.perf_counter() - started
                label = variant if variant == "reference" else "broken (first store shifted by one element)"
                print(f"===== {problem_id} | {tool} | {label} | {seconds:.1f} s")
                print(result.text, flush=True)
                rows.append(
                    {
                        "problem": problem_id,
                        "tool": tool,
                        "variant": variant,
                        "ok": result.ok,
                        "seconds": round(seconds, 3),
                        "text": result.text,
                    }
                )
    print(f"\n{'problem':<22} {'tool':<17} {'variant':<10} {'ok':<5} seconds")
    for r in rows:
        print(f"{r['problem']:<22} {r['tool']:<17} {r['variant']:<10} {str(r['ok']):<5} {r['seconds']:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
