"""The search loop: parallel proposers per problem apply operators, the pool judges, the store remembers.

Every problem gets `proposers` asyncio tasks, all problems at once so the pool stays busy. Each step chooses an
operator (fresh proposals first, then a seeded weighted draw), a policy (PolicyBandit), proposes, evaluates
(`evaluate_async`; a kernel already in the store is not evaluated again) and records (store, archive, bandit,
migration), until a budget, the target speedup or the physical floor stops the problem. With one proposer and a
replay policy a run is deterministic under a fixed seed. The loop step by step: docs/agent.md."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from typing import Any, Callable, Mapping

from envs.kernel_evaluator import KernelEvaluator
from envs.problems import Problem
from envs.retrieval import KernelIndex
from envs.settings import reject_unknown
from envs.verdict import Verdict
from rewards.kernel_reward import reward_for_verdict
from rl.agent.archive import Archive, SelectionConfig
from rl.agent.budget import BudgetConfig, Usage
from rl.agent.features import fitness, kernel_cell
from rl.agent.operators import STRATEGIES, crossover_messages, fresh_messages, mutate_messages, retrieval_messages
from rl.agent.policies import Policy, PolicyBandit
from rl.agent.profiles import ParentProfiler, profile_facts
from rl.agent.records import LLM_OPERATORS, OPERATORS, CandidateRecord, Proposal, source_key
from rl.agent.store import PopulationStore
from rl.agent.tuner import variants
from rl.prompts import PromptBuilder
from rl.types import RolloutRequest

__all__ = ["SearchConfig", "ProblemOutcome", "Search", "FLOOR_STOP"]

log = logging.getLogger("kernelrl.agent")

FLOOR_STOP = "physical floor near"  # how a stop reason at agent.budget.stop_at_floor_fraction begins


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    proposers: int = 2  # concurrent operator steps per problem
    seed: int = 0
    initial_fresh: int = 2  # a problem's first LLM steps are fresh proposals
    strategies: tuple[str, ...] = ("plain", "fused", "tiled", "autotuned")
    operator_weights: dict[str, float] = dataclasses.field(
        default_factory=lambda: {"fresh": 1.0, "mutate": 3.0, "crossover": 1.0, "retrieval": 1.0, "tune": 2.0}
    )
    tune_variants: int = 4  # launch-configuration variants evaluated per tune step
    retrieval_k: int = 2  # similar solved kernels shown by the retrieval operator
    bandit_exploration: float = 1.0
    profile_feedback: bool = True  # GPU pools: a correct mutation parent's profile in its prompt (budget: profiles)
    selection: SelectionConfig = SelectionConfig()
    budget: BudgetConfig = BudgetConfig()

    def __post_init__(self) -> None:
        if self.proposers < 1 or self.tune_variants < 1 or self.initial_fresh < 0 or self.retrieval_k < 1:
            raise ValueError("agent: proposers, tune_variants and retrieval_k must be >= 1, initial_fresh >= 0")
        unknown = set(self.operator_weights) - set(OPERATORS)
        if unknown or any(w < 0 for w in self.operator_weights.values()):
            raise ValueError(f"agent.operator_weights: operators are {OPERATORS} with weights >= 0 ({sorted(unknown)})")
        b = self.budget

        def capped(*caps: str) -> bool:
            return b.wall_seconds is not None or any(
                getattr(x, c) is not None for x in (b.per_problem, b.total) for c in caps
            )

        # Policy steps that repeat a kernel cost no evaluation, and tuner steps no LLM call: cap both kinds.
        if not capped("llm_calls", "tokens", "cost_usd") or not capped("evaluations", "eval_seconds"):
            raise ValueError(
                "agent.budget: cap LLM steps (llm_calls, tokens or cost_usd) and evaluations "
                "(evaluations or eval_seconds), or set wall_seconds: a search without caps never ends"
            )
        bad = [s for s in self.strategies if s not in STRATEGIES]
        if bad or not self.strategies:
            raise ValueError(f"agent.strategies must be a non-empty subset of {sorted(STRATEGIES)} (not {bad})")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> SearchConfig:
        m = dict(m or {})
        reject_unknown(cls, m, "agent")
        selection = dict(m.pop("selection", None) or {})
        reject_unknown(SelectionConfig, selection, "agent.selection")
        if "strategies" in m:
            m["strategies"] = tuple(m["strategies"])
        if "operator_weights" in m:
            m["operator_weights"] = {k: float(v) for k, v in dict(m["operator_weights"]).items()}
        return cls(selection=SelectionConfig(**selection), budget=BudgetConfig.from_mapping(m.pop("budget", None)), **m)


@dataclasses.dataclass
class ProblemOutcome:
    problem: Problem
    records: list[CandidateRecord]
    best: CandidateRecord | None
    stop_reason: str
    resumed_from: int  # candidates already in the store when this run started


class _ProblemState:
    def __init__(self, problem: Problem, config: SearchConfig, store: PopulationStore):
        self.problem = problem
        self.records = store.candidates(problem.id)
        self.resumed_from = len(self.records)
        self.archive = Archive(config.selection)
        migrations: dict[int, list[tuple[int, int]]] = {}
        for cid, island, after in store.migrations(problem.id):
            migrations.setdefault(after, []).append((cid, island))
        by_id = {r.id: r for r in self.records}
        for r in self.records:  # the archive after a resume is the archive before it
            self.archive.add(r)
            for cid, island in migrations.get(r.id, []):
                self.archive.migrate_into(island, by_id[cid])
        self.usage = Usage.of(self.records)
        self.rng = random.Random(f"{config.seed}:{problem.id}:{len(self.records)}")
        self.llm_steps = sum(r.proposal.operator in LLM_OPERATORS for r in self.records)
        self.in_flight: dict[str, asyncio.Future] = {}  # source sha -> the record being evaluated
        self.pending_llm = 0
        self.pending_evals = 0
        self.claimed: set[str] = set()  # tuner variants handed to a proposer and not yet evaluated
        self.tuned: set[int] = set()  # parents whose variants are all tried
        self.progress = asyncio.Event()
        self.stop_reason = ""

    def best(self) -> CandidateRecord | None:
        live = [r for r in self.records if r.duplicate_of is None]
        return max(live, key=lambda r: (fitness(r.verdict, r.reward), -r.id)) if live else None

    def nearest_floor(self) -> CandidateRecord | None:
        """The correct kernel closest to the physical floor (highest Verdict.speed_of_light); None on CPU."""
        near = [r for r in self.records if r.duplicate_of is None and r.verdict.speed_of_light is not None]
        return max(near, key=lambda r: (r.verdict.speed_of_light, -r.id)) if near else None


class Search:
    """One search over problems with a shared pool, store, policies and bandit."""

    def __init__(
        self,
        config: SearchConfig,
        store: PopulationStore,
        pool: KernelEvaluator,
        policies: list[Policy],
        prompts: PromptBuilder,
        index: KernelIndex | None = None,
        reward: Callable[[Verdict], float] = reward_for_verdict,
    ):
        """`reward`: a verdict's kernel reward at the run's delta (rewards/kernel_reward.py), kept on its record."""
        if not policies:
            raise ValueError("the agent needs at least one policy")
        names = [p.name for p in policies]
        if len(set(names)) != len(names):
            raise ValueError(f"agent policy names must be unique: {names}")
        self.config, self.store, self.pool, self.prompts, self.index = config, store, pool, prompts, index
        self.reward = reward
        self.policies = {p.name: p for p in policies}
        self.bandit = PolicyBandit(names, config.bandit_exploration)
        self.total = Usage()
        self.started = time.monotonic()
        self.states: dict[str, _ProblemState] = {}
        self.profiler = ParentProfiler(pool, store, config.profile_feedback)
        self.notes: list[str] = []  # what the configuration asked for and this pool cannot do (the report says it)
        if self.profiler.note:
            self.notes.append(self.profiler.note)
        if config.budget.stop_at_floor_fraction is not None and getattr(pool, "device", "cpu") != "cuda":
            self.notes.append(
                "stop_at_floor_fraction has no effect: the CPU pool measures no time, so no kernel "
                "is compared with the physical floor"
            )
        for note in self.notes:
            log.info("agent: %s", note)

    # ---- bookkeeping -------------------------------------------------------------------------------------
    def _open(self, problem: Problem) -> _ProblemState:
        self.store.bind(problem)
        state = _ProblemState(problem, self.config, self.store)
        profiles, seconds = self.store.profile_usage(problem.id)  # GPU time already spent on feedback
        for usage in (state.usage, self.total):
            usage.profiles += profiles
            usage.eval_seconds += seconds
        for r in state.records:
            self.total.add(r)
            if r.proposal.operator in LLM_OPERATORS:
                self.bandit.record(r.proposal.policy, r.reward)
        for policy in self.policies.values():
            if policy.replay:  # resume: files already replayed for this problem are not served again
                policy.engine.skip(problem.id, sum(r.proposal.policy == policy.name for r in state.records))
        return state

    def _cap(self, state: _ProblemState, llm: bool) -> str | None:
        b = self.config.budget
        if b.wall_seconds is not None and time.monotonic() - self.started >= b.wall_seconds:
            return f"wall_seconds {b.wall_seconds:g} reached"
        best = state.best()
        if b.target_speedup is not None and best is not None and (best.speedup or 0.0) >= b.target_speedup:
            return f"target speedup {b.target_speedup:g} reached ({best.speedup:.3f}x)"
        near = state.nearest_floor() if b.stop_at_floor_fraction is not None else None
        if near is not None and near.verdict.speed_of_light >= b.stop_at_floor_fraction:
            v = near.verdict
            return (
                f"{FLOOR_STOP}: #{near.id} runs at {100 * v.speed_of_light:.0f}% of the floor's speed "
                f"({v.timings.kernel.median_ms:.4g} ms, floor {v.floor_ms:.4g} ms) >= "
                f"stop_at_floor_fraction {b.stop_at_floor_fraction:g}"
            )
        everywhere = self.states.values()
        pending = (
            (state.pending_llm, state.pending_evals),
            (sum(s.pending_llm for s in everywhere), sum(s.pending_evals for s in everywhere)),
        )
        for (usage, budget, scope), (llm_calls, evaluations) in zip(
            ((state.usage, b.per_problem, "per problem"), (self.total, b.total, "total")), pending
        ):
            planned = dataclasses.replace(
                usage, llm_calls=usage.llm_calls + llm_calls, evaluations=usage.evaluations + evaluations
            )
            reason = planned.exhausted(budget, llm)
            if reason:
                return f"{scope} {reason}"
        return None

    def _choose(self, state: _ProblemState) -> tuple[str | None, str]:
        """The next operator (None: nothing to do now) and why not, if None."""
        available = [n for n, p in self.policies.items() if p.available(state.problem.id)]
        models = [n for n in available if not self.policies[n].replay]  # replayed files ignore prompts: fresh only
        llm_block = self._cap(state, llm=True) or ("" if available else "no policy has answers left")
        tune_block = self._cap(state, llm=False)
        tunable = [e for e in state.archive.elites() if e.correct and e.id not in state.tuned]
        options: list[str] = []
        if not llm_block:
            if state.llm_steps < self.config.initial_fresh:
                return "fresh", ""
            options.append("fresh")
            if models and state.archive.elites():
                options.append("mutate")
            if models and len({e.cell for e in state.archive.elites()}) > 1:
                options.append("crossover")
            if models and self.index is not None and len(self.index):
                options.append("retrieval")
        if not tune_block and tunable:
            options.append("tune")
        weights = [self.config.operator_weights.get(o, 0.0) for o in options]
        options = [o for o, w in zip(options, weights) if w > 0]
        if not options:
            tuner = tune_block or ("" if tunable else "tuner: no correct kernel with an untried launch variant")
            reasons = list(dict.fromkeys(r for r in (llm_block, tuner) if r))  # a shared cap is said once
            return None, "; ".join(reasons) or "no operator applicable"
        return state.rng.choices(options, weights=[self.config.operator_weights[o] for o in options])[0], ""

    # ---- one step ----------------------------------------------------------------------------------------
    async def _ask(self, state: _ProblemState, operator: str, island: int, tag: str) -> Proposal | None:
        problem = state.problem
        name = self.bandit.choose(
            [n for n, p in self.policies.items() if p.available(problem.id) and (operator == "fresh" or not p.replay)]
        )
        policy = self.policies[name]
        parents: tuple[int, ...] = ()
        strategy = ""
        if operator == "fresh":
            strategy = self.config.strategies[state.llm_steps % len(self.config.strategies)]
            messages = fresh_messages(self.prompts, problem, strategy)
        elif operator == "mutate":
            parent = state.archive.select_parent(island, state.rng)
            profile = await self._parent_profile(state, parent)
            parents, messages = (parent.id,), mutate_messages(self.prompts, problem, parent, profile)
        elif operator == "crossover":
            pair = state.archive.select_pair(island, state.rng)
            if pair is None:
                return None
            profiles = [await self._parent_profile(state, parent) for parent in pair]
            parents, messages = (pair[0].id, pair[1].id), crossover_messages(self.prompts, problem, *pair, profiles)
        else:
            messages = retrieval_messages(self.prompts, problem, self.index, self.config.retrieval_k)
        state.llm_steps += 1
        request = RolloutRequest(f"agent/{problem.id}/{tag}", problem.id, messages, policy.sampling)
        try:
            sample = await policy.sample(request)
        except ValueError as e:  # the engine refused the request (e.g. a prompt past max_model_len)
            log.warning("%s: policy %s refused the %s prompt: %s", problem.id, name, operator, e)
            return Proposal(operator, "", strategy, name, parents, messages, finish_reason="error")
        if policy.replay and sample.finish_reason == "error":
            return None  # another proposer took the last file: nothing was asked, nothing to record
        usage = sample.usage or {}
        return Proposal(
            operator,
            sample.text,
            strategy,
            name,
            parents,
            messages,
            int(usage.get("prompt_tokens") or len(sample.prompt_ids)),
            int(usage.get("completion_tokens") or len(sample.completion_ids)),
            usage.get("cost_usd"),
            sample.seconds,
            sample.finish_reason,
        )

    async def _parent_profile(self, state: _ProblemState, parent: CandidateRecord) -> dict | None:
        """A parent's profile facts for its mutation or crossover prompt: stored, or measured now if the profile
        budget has room (reserved before it runs, so parallel proposers do not overshoot); None otherwise."""
        if not self.profiler.wanted(parent):
            return None
        cached = self.profiler.cached(state.problem, parent)
        if cached is not None:
            return profile_facts(cached)
        if self.profiler.running(state.problem, parent):  # another proposer is profiling it: share, spend nothing
            return profile_facts((await self.profiler.run(state.problem, parent))[0])
        b = self.config.budget
        if any(
            cap.profiles is not None and usage.profiles >= cap.profiles
            for usage, cap in ((state.usage, b.per_problem), (self.total, b.total))
        ):
            return None
        state.usage.profiles += 1
        self.total.profiles += 1
        result, seconds = await self.profiler.run(state.problem, parent)
        for usage in (state.usage, self.total):
            if seconds is None:  # another proposer's profile of the same kernel: this one spent nothing
                usage.profiles -= 1
            else:
                usage.eval_seconds += seconds
        return profile_facts(result)

    def _evaluations_left(self, state: _ProblemState) -> int:
        left = self.config.tune_variants
        total_pending = sum(s.pending_evals for s in self.states.values())
        for usage, budget, pending in (
            (state.usage, self.config.budget.per_problem, state.pending_evals),
            (self.total, self.config.budget.total, total_pending),
        ):
            if budget.evaluations is not None:
                left = min(left, budget.evaluations - usage.evaluations - pending)
        return max(left, 0)

    def _tune(self, state: _ProblemState, island: int) -> list[Proposal]:
        wanted = self._evaluations_left(state)  # never more variants than the evaluation budget has room for
        if wanted == 0:
            return []
        tunable = [e for e in state.archive.elites(island) if e.correct and e.id not in state.tuned] or [
            e for e in state.archive.elites() if e.correct and e.id not in state.tuned
        ]
        for parent in tunable:  # best first
            fresh = []
            for v in variants(parent.proposal.text):
                sha = source_key(v.source)
                if sha in state.claimed or self.store.find(state.problem.id, sha) is not None:
                    continue
                state.claimed.add(sha)  # released once evaluated: another proposer will not pick it meanwhile
                fresh.append(Proposal("tune", v.source, v.description, "", (parent.id,)))
                if len(fresh) == wanted:
                    return fresh
            state.tuned.add(parent.id)  # every variant of it is (now being) tried
            if fresh:
                return fresh
        return []

    async def _evaluate(
        self, state: _ProblemState, proposal: Proposal, island: int, turn: asyncio.Future | None = None
    ) -> CandidateRecord:
        """Evaluate and record one proposal. `turn`, when given, is awaited between the verdict and the record:
        concurrent evaluations are then recorded in the order they were proposed, not the order they finished
        (which depends on the pool's timing), so ids, records and the search that follows them repeat."""
        problem = state.problem
        sha = source_key(proposal.text)
        known = self.store.find(problem.id, sha)
        if known is None and sha in state.in_flight:
            known = await asyncio.shield(state.in_flight[sha])
        if known is not None:  # the same kernel again: its verdict, no evaluation
            if turn is not None:
                await turn
            record = self.store.add(
                problem.id, proposal, sha, known.verdict, island, known.cell, 0.0, known.id, reward=known.reward
            )
        else:
            future = asyncio.get_running_loop().create_future()
            state.in_flight[sha] = future
            try:
                t0 = time.monotonic()
                verdict = await self.pool.evaluate_async(problem, proposal.text)
                seconds = time.monotonic() - t0
                if turn is not None:
                    await turn
                record = self.store.add(
                    problem.id,
                    proposal,
                    sha,
                    verdict,
                    island,
                    kernel_cell(proposal.text),
                    seconds,
                    reward=self.reward(verdict),
                )
                future.set_result(record)
            except BaseException as e:
                future.set_exception(e)
                future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
                raise
            finally:
                state.in_flight.pop(sha, None)
        self._recorded(state, record)
        return record

    async def _evaluate_in_order(self, state: _ProblemState, proposals: list[Proposal], island: int) -> None:
        """Evaluate `proposals` concurrently; record each once the one before it is recorded (or failed)."""
        loop = asyncio.get_running_loop()
        recorded = [loop.create_future() for _ in proposals]

        async def one(i: int, proposal: Proposal) -> None:
            try:
                await self._evaluate(state, proposal, island, turn=recorded[i - 1] if i else None)
            finally:
                recorded[i].set_result(None)

        await asyncio.gather(*(one(i, p) for i, p in enumerate(proposals)))

    def _recorded(self, state: _ProblemState, record: CandidateRecord) -> None:
        state.records.append(record)
        state.usage.add(record)
        self.total.add(record)
        if record.proposal.operator in LLM_OPERATORS:
            self.bandit.record(record.proposal.policy, record.reward)
        state.archive.add(record)
        if record.duplicate_of is None and state.archive.migration_due():
            for migrant, island in state.archive.migrations():
                if state.archive.migrate_into(island, migrant):
                    self.store.add_migration(state.problem.id, migrant.id, island, record.id)
        log.info(
            "%s #%d %s%s %s -> %s%s",
            state.problem.id,
            record.id,
            record.proposal.operator,
            f"/{record.proposal.strategy}" if record.proposal.strategy else "",
            record.proposal.policy or "-",
            record.verdict.status.value,
            f" {record.verdict.speedup:.3f}x" if record.verdict.speedup is not None else "",
        )

    async def _proposer(self, state: _ProblemState, k: int) -> None:
        island = k % self.config.selection.islands
        step = 0
        while True:
            operator, why = self._choose(state)
            if operator is None:
                if state.pending_evals or state.pending_llm:  # a result in flight may open new operators
                    state.progress.clear()
                    await state.progress.wait()
                    continue
                if not state.stop_reason:
                    state.stop_reason = why
                    log.info("%s: stopped: %s", state.problem.id, why)
                return
            step += 1
            tag = f"p{k}/s{step}/c{len(state.records)}"
            if operator == "tune":
                proposals = self._tune(state, island)
                if not proposals:
                    continue
                state.pending_evals += len(proposals)
                try:
                    await self._evaluate_in_order(state, proposals, island)
                finally:
                    state.pending_evals -= len(proposals)
                    state.claimed.difference_update(source_key(p.text) for p in proposals)
                    state.progress.set()  # a waiting proposer re-checks, also when nothing was recorded
                continue
            state.pending_llm += 1
            state.pending_evals += 1
            try:
                proposal = await self._ask(state, operator, island, tag)
                if proposal is not None:
                    await self._evaluate(state, proposal, island)
            finally:
                state.pending_llm -= 1
                state.pending_evals -= 1
                state.progress.set()

    async def run(self, problems: list[Problem]) -> list[ProblemOutcome]:
        if len({p.id for p in problems}) != len(problems):
            raise ValueError("the agent's problem list holds a problem id twice")
        states = [self._open(p) for p in problems]
        self.states = {s.problem.id: s for s in states}
        for s in states:
            if s.resumed_from:
                log.info("%s: resuming with %d stored candidates", s.problem.id, s.resumed_from)
        await asyncio.gather(*(self._proposer(s, k) for s in states for k in range(self.config.proposers)))
        return [ProblemOutcome(s.problem, s.records, s.best(), s.stop_reason, s.resumed_from) for s in states]
