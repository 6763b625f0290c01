"""Where a run's numbers go: `metrics.jsonl` in the run directory (always) and W&B (offline by default).

One JSON object per logged step, `{"step": k, <key>: value, ...}`, flushed at once so a crashed run
keeps every finished step (and `samples.jsonl`: every sample with its verdict); NaN and infinities are
written as null (JSON has no NaN). W&B receives the same dict, and every `table_every` steps a table
of sampled kernels with their verdicts.
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

__all__ = ["RunLogger", "WandbConfig", "read_metrics"]

log = logging.getLogger("kernelrl.tracking")


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

    def __post_init__(self) -> None:
        if self.mode not in ("offline", "online", "disabled"):
            raise ValueError(f"wandb.mode must be offline, online or disabled, not {self.mode!r}")
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


class RunLogger:
    def __init__(self, run_dir: str | Path, config: WandbConfig, run_config: Mapping[str, Any] | None = None,
                 resume_from: str | Path | None = None, resume_step: int | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.path = self.run_dir / "metrics.jsonl"
        if resume_from is not None and resume_step is not None:
            self._carry_over(Path(resume_from), resume_step)
        self._file = open(self.path, "a")
        self._samples = open(self.run_dir / "samples.jsonl", "a")
        self._wandb = None
        if config.mode != "disabled":
            import wandb
            os.environ.setdefault("WANDB_SILENT", "true")
            self._wandb = wandb.init(mode=config.mode, project=config.project, entity=config.entity,
                                     name=config.name, group=config.group, tags=list(config.tags),
                                     dir=str(self.run_dir), config=dict(run_config or {}))

    def _carry_over(self, previous: Path, step: int) -> None:
        """A resumed run's metrics.jsonl starts with the earlier run's rows up to the checkpoint's step."""
        if not previous.exists() or previous.resolve() == self.path.resolve():
            return
        rows = [r for r in read_metrics(previous) if r.get("step", math.inf) <= step]
        with open(self.path, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

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
                record = {"step": step, "split": split, "problem_id": g.problem_id, "error": s.verdict.error,
                          "traceback": s.verdict.traceback, "answer": s.sample.text}
                path.write_text(json.dumps(record, indent=1, ensure_ascii=True))
                written += 1
        return written

    def wants_table(self, step: int) -> bool:
        return self.config.table_every > 0 and step % self.config.table_every == 0

    def table(self, step: int, name: str, rows: list[dict[str, Any]]) -> None:
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
