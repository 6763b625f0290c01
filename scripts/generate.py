#!/usr/bin/env python
"""The kernel agent: evolutionary search for correct, fast Triton kernels (rl/agent, conf/generate.yaml).

  python scripts/generate.py policy=files policy.dir=DIR ids=[L0_02_relu,L0_04_sigmoid] eval.device=cpu
  python scripts/generate.py policy=smollm2_135m levels=[0] agent.budget.per_problem.llm_calls=8
  python scripts/generate.py policy=gpt5 levels=[2,3] eval.device=cuda backend=ray

Writes agent.json, agent.md, curves.png, tree_<problem>.png, best/<problem>.py and population.sqlite (the
store; pass store=PATH to resume) to Hydra's output directory, and the re-verified winners into the solution
store. Exit 2 on a bad configuration.
"""

from __future__ import annotations

import logging
from pathlib import Path

# absolute, so Hydra finds the configs whether this runs as a file or as an installed command
CONF = Path(__file__).resolve().parents[1] / "conf"

log = logging.getLogger("kernelrl")


def hydra_main() -> None:
    import hydra
    from omegaconf import DictConfig

    @hydra.main(config_path=str(CONF), config_name="generate", version_base="1.3")
    def main(cfg: DictConfig) -> None:
        from rl.agent.main import AgentError, run_from_config
        from rl.agent.store import StoreError
        from rl.bench.main import run_hydra_job

        _, report, out_dir = run_hydra_job(cfg, run_from_config, (AgentError, StoreError))
        print((out_dir / "agent.md").read_text())
        log.info("solved %s of %d problems; report %s", report["solved"], report["problems"], out_dir / "agent.json")

    main()


if __name__ == "__main__":
    hydra_main()
