"""The problems a run trains and validates on: loading, a deterministic split, and a resumable sampler.

    data = ProblemData.load(DataConfig(problems="builtin", levels=(0, 1)))
    sampler = ProblemSampler(data.train, DataConfig(...).curriculum, seed=0)
    problems = sampler.next_batch(step, 4)      # deterministic given (seed, draws so far)
    sampler.record("L1_03_softmax", 3, 8)       # a group's outcome: what data.sampler=learnability draws by
    state = sampler.state_dict()                # goes into the loop checkpoint; load_state_dict resumes

The split is by a hash of each problem id (salted), so a problem stays on its side when the set grows
or its order changes, and two runs with the same config hold out the same problems. Explicit id lists
override the hash. Validation problems never reach the training sampler nor the retrieval store.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from typing import Any, Iterable, Literal, Mapping

from envs.problems import Problem, ProblemError, load_problem_set
from envs.settings import reject_unknown

__all__ = [
    "CurriculumConfig",
    "DataConfig",
    "DataError",
    "LearnabilityConfig",
    "ProblemData",
    "ProblemSampler",
    "split_of",
]


class DataError(ValueError):
    """A problem set or split that cannot be trained on; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class CurriculumConfig:
    # none: every draw from all training problems (the same mix at every step: what an honest
    #       learning curve needs). levels: the lowest level first, one more level every
    #       `steps_per_level` steps (a curriculum, so later steps are harder by construction).
    kind: Literal["none", "levels"] = "none"
    steps_per_level: int = 10

    def __post_init__(self) -> None:
        if self.kind not in ("none", "levels"):
            raise DataError(f"data.curriculum.kind must be none or levels, not {self.kind!r}")
        if self.steps_per_level < 1:
            raise DataError("data.curriculum.steps_per_level must be >= 1")


@dataclasses.dataclass(frozen=True)
class LearnabilityConfig:
    """data.sampler=learnability: a problem is drawn in proportion to p(1 - p), p its estimated correct rate,
    the variance of a 0/1 reward: GRPO learns nothing from a group whose samples all pass or all fail."""

    decay: float = 0.8  # each new group of a problem keeps this share of its earlier counts (8 samples a group:
    # an effective memory of about 40 samples, so a problem the policy has just learned drops out within steps)
    floor: float = 0.02  # the least weight (a fresh problem has 0.25): no problem is ever out of the draws

    def __post_init__(self) -> None:
        if not 0.0 <= self.decay < 1.0:
            raise DataError(f"data.learnability.decay must be in [0, 1), not {self.decay}")
        if not 0.0 < self.floor <= 0.25:
            raise DataError(f"data.learnability.floor must be in (0, 0.25], not {self.floor}")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    problems: str = "builtin"  # builtin | a problem file | a directory | a KernelBench checkout
    levels: tuple[int, ...] | None = None  # None: every level
    include_ids: tuple[str, ...] | None = None  # only these problems (after the level filter)
    exclude_ids: tuple[str, ...] = ()
    validation_ids: tuple[str, ...] | None = None  # explicit held-out set; None: the hash split below
    validation_fraction: float = 0.2  # share of problems held out by id hash (0: no validation set)
    split_salt: str = "kernelrl-split-v1"  # change to draw a different (still deterministic) split
    require_reference: bool = False  # keep only problems with a verified reference solution
    curriculum: CurriculumConfig = CurriculumConfig()
    # uniform: shuffled epochs (every problem once per epoch). balanced: independent draws by the sampling
    # weights of a curated set's manifest (scripts/curate.py: 1/ln(cluster size + 1)). learnability: by each
    # problem's p(1 - p) from the run's own results (LearnabilityConfig), distinct problems within a step.
    sampler: Literal["uniform", "balanced", "learnability"] = "uniform"
    learnability: LearnabilityConfig = LearnabilityConfig()

    def __post_init__(self) -> None:
        if not 0.0 <= self.validation_fraction < 1.0:
            raise DataError(f"data.validation_fraction must be in [0, 1), not {self.validation_fraction}")
        if self.sampler not in ("uniform", "balanced", "learnability"):
            raise DataError(f"data.sampler must be uniform, balanced or learnability, not {self.sampler!r}")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> DataConfig:
        m = dict(m or {})
        reject_unknown(cls, m, "data")
        for key in ("levels", "include_ids", "validation_ids"):
            if m.get(key) is not None:
                m[key] = tuple(m[key])
        if "exclude_ids" in m:
            m["exclude_ids"] = tuple(m["exclude_ids"] or ())
        curriculum = dict(m.pop("curriculum", None) or {})
        reject_unknown(CurriculumConfig, curriculum, "data.curriculum")
        learnability = dict(m.pop("learnability", None) or {})
        reject_unknown(LearnabilityConfig, learnability, "data.learnability")
        return cls(curriculum=CurriculumConfig(**curriculum), learnability=LearnabilityConfig(**learnability), **m)


def split_of(problem_id: str, fraction: float, salt: str) -> Literal["train", "validation"]:
    """`validation` for a stable `fraction` of ids: the id's salted SHA-256 read as a number in [0, 1)."""
    digest = hashlib.sha256(f"{salt}:{problem_id}".encode()).digest()
    return "validation" if int.from_bytes(digest[:8], "big") / 2**64 < fraction else "train"


@dataclasses.dataclass(frozen=True)
class ProblemData:
    train: list[Problem]
    validation: list[Problem]
    weights: dict[str, float] | None = None  # sampling weight per training problem (data.sampler=balanced)

    @classmethod
    def load(cls, config: DataConfig) -> ProblemData:
        """Load and split; raises DataError (before anything expensive starts) when nothing is usable."""
        levels = list(config.levels) if config.levels is not None else None
        try:
            problems = load_problem_set(config.problems, levels)
        except ProblemError as e:
            raise DataError(f"data.problems: {e}") from None
        known = {p.id for p in problems}
        for name in ("include_ids", "validation_ids", "exclude_ids"):
            missing = sorted(set(getattr(config, name) or ()) - known)
            if missing:
                raise DataError(
                    f"data.{name} names problems not in {config.problems!r} (levels={levels}): {missing[:5]}"
                )
        if config.include_ids is not None:
            wanted = set(config.include_ids) | set(config.validation_ids or ())
            problems = [p for p in problems if p.id in wanted]
        problems = [p for p in problems if p.id not in set(config.exclude_ids)]
        if config.require_reference:
            problems = [p for p in problems if p.reference_solution]
        if not problems:
            raise DataError(
                f"no usable problems in {config.problems!r} (levels={levels}, "
                f"include_ids={config.include_ids}, require_reference={config.require_reference})"
            )
        if config.validation_ids is not None:
            held_out = set(config.validation_ids)
        else:
            held_out = {
                p.id for p in problems if split_of(p.id, config.validation_fraction, config.split_salt) == "validation"
            }
        train = [p for p in problems if p.id not in held_out]
        validation = [p for p in problems if p.id in held_out]
        if not train:
            raise DataError(
                f"every one of the {len(problems)} problems is held out for validation; "
                "lower data.validation_fraction or list fewer data.validation_ids"
            )
        weights = None
        if config.sampler == "balanced":
            from envs.data.problem_set import curated_weights, is_curated_set

            if not is_curated_set(config.problems):
                raise DataError(
                    f"data.sampler=balanced needs a curated set (a directory with manifest.jsonl, "
                    f"written by scripts/curate.py); {config.problems!r} is not one"
                )
            known = curated_weights(config.problems)
            missing = [p.id for p in train if p.id not in known]
            if missing:
                raise DataError(
                    f"data.sampler=balanced: no weight in the manifest for {missing[:5]} "
                    "(curate with the cluster stage)"
                )
            weights = {p.id: known[p.id] for p in train}
        return cls(train, validation, weights)

    def fitted(self, settings: Any, cache: Any = None) -> tuple[ProblemData, dict[str, str]]:
        """This data fitted to a CPU evaluator (envs.screening.fit_problems: derived small sizes for problems
        without SMALL_SIZES, degenerate ones left out) and the reason per problem left out. Raises DataError
        when no training problem is left."""
        from envs.screening import fit_problems

        fitted, skipped = fit_problems(self.train + self.validation, settings, cache)
        by_id = {p.id: p for p in fitted}
        train = [by_id[p.id] for p in self.train if p.id in by_id]
        if not train:
            raise DataError(f"no training problem can be evaluated here: {skipped}")
        validation = [by_id[p.id] for p in self.validation if p.id in by_id]
        weights = None if self.weights is None else {p.id: self.weights[p.id] for p in train}
        return ProblemData(train, validation, weights), skipped


class ProblemSampler:
    """Draws training problems: shuffled epochs over the (curriculum's) pool, reproducible from the seed.

    The state is the number of draws so far: draw k is element k % len(pool) of the pool's permutation for
    epoch k // len(pool), seeded by (seed, epoch). Resuming with the saved count continues the exact sequence.
    With `learnability`, draws are weighted by what `record` has been told of each problem's groups, which the
    state carries too.
    """

    def __init__(
        self,
        problems: list[Problem],
        curriculum: CurriculumConfig | None = None,
        seed: int = 0,
        weights: Mapping[str, float] | None = None,
        learnability: LearnabilityConfig | None = None,
    ):
        if not problems:
            raise DataError("the training sampler needs at least one problem")
        self.problems = sorted(problems, key=lambda p: p.id)  # input order must not change the sequence
        self.curriculum = curriculum or CurriculumConfig()
        self.seed = seed
        self.draws = 0
        # Weighted draws (a curated set's balance): draw k is a weighted choice seeded by (seed, k), so the
        # state is still the draw count alone.
        self.weights = dict(weights) if weights is not None else None
        if self.weights is not None and any(self.weights.get(p.id, 0) <= 0 for p in self.problems):
            raise DataError("sampling weights must be positive for every training problem")
        self._levels = sorted({p.level if p.level is not None else 0 for p in self.problems})
        if self.weights is not None and learnability is not None:
            raise DataError("a sampler draws by manifest weights or by learnability, not both")
        self.learnability = learnability
        self.outcomes: dict[str, list[float]] = {}  # problem id -> [decayed correct samples, decayed samples]

    def pool(self, step: int) -> list[Problem]:
        if self.curriculum.kind == "none":
            return self.problems
        allowed = self._levels[: 1 + step // self.curriculum.steps_per_level]
        return [p for p in self.problems if (p.level if p.level is not None else 0) in allowed]

    def _permutation(self, pool: list[Problem], epoch: int) -> list[Problem]:
        order = list(pool)
        random.Random(f"{self.seed}:{epoch}:{len(pool)}").shuffle(order)
        return order

    def record(self, problem_id: str, correct: int, samples: int) -> None:
        """A group of `samples` samples of a training problem, `correct` of them correct."""
        decay = self.learnability.decay if self.learnability is not None else 1.0
        past = self.outcomes.setdefault(problem_id, [0.0, 0.0])
        past[0], past[1] = decay * past[0] + correct, decay * past[1] + samples

    def learnability_of(self, problem_id: str) -> float:
        """p(1 - p), p the correct rate's posterior mean under a uniform prior; at least the configured floor."""
        correct, samples = self.outcomes.get(problem_id, (0.0, 0.0))
        p = (correct + 1) / (samples + 2)
        floor = self.learnability.floor if self.learnability is not None else 0.0
        return max(floor, p * (1 - p))

    def next_batch(self, step: int, n: int) -> list[Problem]:
        pool = self.pool(step)
        if self.learnability is not None:
            return self._learnable_batch(pool, n)
        batch = []
        for _ in range(n):
            if self.weights is not None:
                rng = random.Random(f"{self.seed}:draw:{self.draws}:{len(pool)}")
                batch.append(rng.choices(pool, [self.weights[p.id] for p in pool])[0])
            else:
                epoch, index = divmod(self.draws, len(pool))
                batch.append(self._permutation(pool, epoch)[index])
            self.draws += 1
        return batch

    def _learnable_batch(self, pool: list[Problem], n: int) -> list[Problem]:
        """n draws weighted by learnability, without repeats until the pool is used up; seeded by (seed, draws)."""
        rng = random.Random(f"{self.seed}:learnability:{self.draws}")
        batch: list[Problem] = []
        left: list[Problem] = []
        for _ in range(n):
            left = left or list(pool)
            i = rng.choices(range(len(left)), [self.learnability_of(p.id) for p in left])[0]
            batch.append(left.pop(i))
        self.draws += n
        return batch

    def peek(self, steps: Iterable[int], n: int) -> list[Problem]:
        """What `next_batch(step, n)` would draw for each of `steps` in turn, without drawing it: the state (the
        draw count) is as it was, so the run's draws are the same whether or not anything peeked."""
        draws = self.draws
        try:
            return [p for step in steps for p in self.next_batch(step, n)]
        finally:
            self.draws = draws

    def state_dict(self) -> dict[str, Any]:
        return {
            "draws": self.draws,
            "seed": self.seed,
            "problem_ids": [p.id for p in self.problems],
            "outcomes": {k: list(v) for k, v in self.outcomes.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if list(state["problem_ids"]) != [p.id for p in self.problems] or state["seed"] != self.seed:
            raise DataError(
                "the checkpoint's training problems or data seed differ from this run's; resuming "
                "would not continue the same sequence (use the checkpointed run's data config)"
            )
        self.draws = int(state["draws"])
        self.outcomes = {k: [float(c), float(n)] for k, (c, n) in state.get("outcomes", {}).items()}
