"""Where a run's numbers go: `metrics.jsonl` in the run directory (always) and W&B (offline by default).

One JSON object per logged step, `{"step": k, <key>: value, ...}`, flushed at once so a crashed run
keeps every finished step (and `samples.jsonl`: every sample with its verdict); NaN and infinities are
written as null (JSON has no NaN). W&B receives the same dict, and every `table_every` steps a table
of sampled kernels with their verdicts under a key of its own, `<split>/samples_table` (W&B keeps one
value per key and step: a table named like the count `<split>/samples` would be overwritten by it).

A resumed run continues the same W&B run: the run id is written to `RUN_DIR/wandb_run.json` and into every
checkpoint (rl.loop_checkpoints.LoopState), and the resumed logger opens W&B with that id (`resume="allow"`);
its `metrics.jsonl` and `samples.jsonl` start with the earlier run's rows up to the checkpoint's step.
A Hydra multirun (`-m delta=1.2,1.5`) becomes one W&B group named after the sweep directory, each run
named by the overrides it sweeps (`hydra_run_names`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

from envs.settings import reject_unknown
from envs.verdict import Status
from rl.types import Group

__all__ = ["RunLogger", "WandbConfig", "hydra_run_names", "read_metrics", "wandb_run_id_of"]

log = logging.getLogger("kernelrl.tracking")

RUN_ID_FILE = "wandb_run.json"  # {"id", "project", "entity", "group", "name"} of the run dir's W&B run
TABLE_SUFFIX = "_table"  # every W&B table key ends so; no scalar metric does


@dataclasses.dataclass(frozen=True)
class WandbConfig:
    mode: Literal["offline", "online", "disabled"] = "offline"  # online on a cluster (needs WANDB_API_KEY)
    project: str = "kernelrl"
    entity: str | None = None
    name: str | None = None  # None: W&B's generated name
    group: str | None = None  # e.g. a sweep's name
    tags: tuple[str, ...] = ()
    table_every: int = 5  # steps between tables of sampled kernels (0: never)
    table_rows: int = 32
    # the evaluation pool's keys per step (W&B and metrics.jsonl): summary, a dozen and the verdict shares
    # (rl.metrics.POOL_SUMMARY_KEYS); full, every pool/* key (per-actor busy fractions, all counters, p99s)
    pool_metrics: Literal["summary", "full"] = "summary"

    def __post_init__(self) -> None:
        if self.mode not in ("offline", "online", "disabled"):
            raise ValueError(f"wandb.mode must be offline, online or disabled, not {self.mode!r}")
        if self.pool_metrics not in ("summary", "full"):
            raise ValueError(f"wandb.pool_metrics must be summary or full, not {self.pool_metrics!r}")
        if self.table_every < 0 or self.table_rows < 1:
            raise ValueError("wandb.table_every must be >= 0 and wandb.table_rows >= 1")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> WandbConfig:
        m = dict(m or {})
        reject_unknown(cls, m, "wandb")
        if m.get("tags") is not None:
            m["tags"] = tuple(m["tags"])
        return cls(**m)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl (a torn last line of a killed run is skipped)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def _jsonl_rows(path: Path) -> list[dict[str, Any]]:
    return read_metrics(path) if path.is_file() else []


def wandb_run_id_of(run_dir: str | Path) -> str | None:
    """The W&B run id a run directory logged to: its wandb_run.json, or (older runs) the id at the end of the
    name of the run W&B's `latest-run` link points to (`offline-run-<time>-<id>`); None when neither exists."""
    run_dir = Path(run_dir)
    try:
        return json.loads((run_dir / RUN_ID_FILE).read_text())["id"] or None
    except (OSError, ValueError, KeyError, TypeError):
        pass
    latest = run_dir / "wandb" / "latest-run"
    if latest.is_symlink() or latest.is_dir():
        name = latest.resolve().name
        if name.count("-") >= 2:
            return name.rsplit("-", 1)[1] or None
    return None


def hydra_run_names(config: WandbConfig, hydra_config: Any) -> WandbConfig:
    """In a Hydra multirun, the W&B group (the sweep directory) and run name (the overrides this job sweeps,
    e.g. `delta=1.2`) that `config` leaves unset; a single run's config is returned as it is.

    `hydra_config` is `HydraConfig.get()`. The swept keys are those whose value in the sweep's command line
    (saved by Hydra in `<sweep dir>/multirun.yaml`) is a sweep (`a,b`, `range(...)`, `choice(...)`); where
    that file is missing (a launcher that writes none), every override of the job names the run."""
    from hydra.types import RunMode

    if hydra_config.mode != RunMode.MULTIRUN:
        return config
    job_overrides = [o for o in hydra_config.overrides.task if not o.lstrip("+~").startswith("hydra.")]
    swept = _swept_keys(Path(str(hydra_config.sweep.dir)) / "multirun.yaml")
    named = [o for o in job_overrides if swept is None or _override_key(o) in swept] or job_overrides
    name = config.name or ",".join(named) or f"job{hydra_config.job.num}"
    return dataclasses.replace(config, group=config.group or str(hydra_config.sweep.dir), name=name)


def _override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _swept_keys(multirun_yaml: Path) -> set[str] | None:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    if not multirun_yaml.is_file():
        return None
    try:
        task = list(OmegaConf.load(multirun_yaml).hydra.overrides.task)
        parsed = OverridesParser.create().parse_overrides(task)
    except Exception as e:  # an unreadable file only costs the shorter names
        log.warning("cannot read the sweep's overrides from %s: %s", multirun_yaml, e)
        return None
    return {o.key_or_group for o in parsed if o.is_sweep_override()}


class RunLogger:
    def __init__(
        self,
        run_dir: str | Path,
        config: WandbConfig,
        run_config: Mapping[str, Any] | None = None,
        resume_from: str | Path | None = None,
        resume_step: int | None = None,
        wandb_run_id: str | None = None,
    ):
        """`resume_from` (with `resume_step`): the earlier run's directory (or its metrics.jsonl), whose
        metrics.jsonl and samples.jsonl rows up to `resume_step` start this run's. `wandb_run_id`: continue that
        W&B run (a resumed run passes its checkpoint's) instead of starting a new one."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.path = self.run_dir / "metrics.jsonl"
        self.samples_path = self.run_dir / "samples.jsonl"
        if resume_from is not None and resume_step is not None:
            previous = Path(resume_from)
            previous = previous.parent if previous.name == "metrics.jsonl" else previous
            self._carry_over(previous / "metrics.jsonl", self.path, resume_step)
            self._carry_over(previous / "samples.jsonl", self.samples_path, resume_step)
        self._file = open(self.path, "a")
        self._samples = open(self.samples_path, "a")
        self._wandb = None
        self.wandb_run_id: str | None = None
        if config.mode != "disabled":
            import wandb

            os.environ.setdefault("WANDB_SILENT", "true")
            resume = {"id": wandb_run_id, "resume": "allow"} if wandb_run_id else {}
            self._wandb = wandb.init(
                mode=config.mode,
                project=config.project,
                entity=config.entity,
                name=config.name,
                group=config.group,
                tags=list(config.tags),
                dir=str(self.run_dir),
                config=dict(run_config or {}),
                **resume,
            )
            self.wandb_run_id = self._wandb.id
            record = {
                "id": self._wandb.id,
                "project": config.project,
                "entity": config.entity,
                "group": config.group,
                "name": self._wandb.name,
                "resumed": bool(wandb_run_id),
            }
            (self.run_dir / RUN_ID_FILE).write_text(json.dumps(record, indent=1) + "\n")
            if wandb_run_id:
                log.info("W&B: continuing run %s", wandb_run_id)

    @staticmethod
    def _carry_over(previous: Path, current: Path, step: int) -> None:
        """The earlier run's rows up to the checkpoint's `step` start this run's file (the rest were written
        after the checkpoint and are done again). Resumed into the same directory, the file is cut back to them."""
        if not previous.exists():
            return
        rows = [r for r in _jsonl_rows(previous) if r.get("step", math.inf) <= step]
        tmp = current.with_name(f".{current.name}.tmp")
        with open(tmp, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        os.replace(tmp, current)

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        row = {"step": step, **{k: _clean(v) for k, v in metrics.items()}}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self._wandb is not None:
            self._wandb.log(dict(metrics), step=step)

    def samples(self, rows: list[dict[str, Any]]) -> None:
        """Every sample of the run, one JSON object each (rl.metrics.sample_rows): samples.jsonl."""
        for row in rows:
            self._samples.write(json.dumps({k: _clean(v) for k, v in row.items()}) + "\n")
        self._samples.flush()

    def crashers(self, groups: Iterable[Group], step: int, split: str) -> int:
        """Samples an evaluation stage failed on (status internal_error), kept for triage in crashers/: the
        answer, its problem and the traceback, one file per distinct answer. Returns how many were written."""
        written = 0
        for g in groups:
            for s in g.samples:
                if s.verdict.status is not Status.INTERNAL_ERROR:
                    continue
                digest = hashlib.sha256(s.sample.text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
                path = self.run_dir / "crashers" / f"{g.problem_id}_{digest}.json"
                path.parent.mkdir(exist_ok=True)
                record = {
                    "step": step,
                    "split": split,
                    "problem_id": g.problem_id,
                    "error": s.verdict.error,
                    "traceback": s.verdict.traceback,
                    "answer": s.sample.text,
                }
                path.write_text(json.dumps(record, indent=1, ensure_ascii=True))
                written += 1
        return written

    def wants_table(self, step: int) -> bool:
        return self.config.table_every > 0 and step % self.config.table_every == 0

    def table(self, step: int, name: str, rows: list[dict[str, Any]]) -> None:
        """A W&B table under `name`, which ends in `_table`: a key no scalar metric uses, so the table and a
        count such as `<split>/samples` logged at the same step both survive."""
        if not name.endswith(TABLE_SUFFIX):
            raise ValueError(f"W&B table key {name!r} must end in {TABLE_SUFFIX!r} (scalar keys never do)")
        if self._wandb is None or not rows:
            return
        import wandb

        columns = list(rows[0])
        table = wandb.Table(columns=columns, data=[[r[c] for c in columns] for r in rows])
        self._wandb.log({name: table}, step=step)

    def summary(self, values: Mapping[str, Any]) -> None:
        with open(self.run_dir / "summary.json", "w") as f:
            json.dump({k: _clean(v) for k, v in values.items()}, f, indent=2)
        if self._wandb is not None:
            self._wandb.summary.update(dict(values))

    def close(self) -> None:
        self._file.close()
        self._samples.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None
