"""Multi-turn, tool-augmented rollouts: the policy drafts, calls tools, reads their results, and answers.

    runner = TrajectoryRunner(engine, pool, TrajectoryConfig(tools=("kernel_evaluator", "kernel_search")),
                              solutions=index)
    trajectories = await runner.run(requests, problems)          # request.sampling.n trajectories each

Per turn, every unfinished trajectory of the batch is one engine request (n=1) holding its whole
conversation so far, so one `engine.generate` call serves the turn for all of them. A trajectory ends when
the policy calls `submit`, answers without a tool call, runs out of turns (`max_turns`), of tool calls
(`max_tool_calls`) or of completion tokens (`max_total_tokens`, summed over its turns). Malformed calls,
unknown tools, bad arguments, tools that time out (`tool_timeout_s`) or fail become the call's observation
(the policy reads what went wrong); they never end the batch. The final answer is the submitted code, else
the last code a turn proposed; it is evaluated by the same pool as single-turn answers, and rewarded by
`reward_mode` (rl/rollout/trajectory_rewards.py). Records: rl/rollout/trajectory_record.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from typing import Any, Literal, Mapping

from envs.kernel_evaluator import KernelEvaluator
from envs.problems import Problem
from envs.settings import reject_unknown
from envs.source import extract_code
from envs.tools import SUBMIT, ToolContext, ToolResult, resolve_tools, schemas
from envs.verdict import Verdict
from rewards.kernel_reward import reward_for_verdict
from rewards.shaping import RewardConfig, shaped_reward
from rl.rollout.history import HISTORIES, SUMMARY_INSTRUCTIONS, History, context_messages
from rl.rollout.tool_calls import ParsedCall, ToolFormat, last_python_block, parse_tool_calls, tool_instructions
from rl.rollout.trajectory_record import Layout, ToolCallRecord, Trajectory, Turn
from rl.rollout.trajectory_rewards import REWARD_MODES, RewardMode, trajectory_reward
from rl.types import Message, RolloutRequest, Sample

__all__ = ["TrajectoryConfig", "TrajectoryRunner"]

log = logging.getLogger("kernelrl.trajectory")

_MESSAGE_OVERHEAD_TOKENS = 8  # a chat template's role markers around one message
_MIN_COMPLETION_TOKENS = 32  # a turn with less room than this cannot write a tool call or an answer


@dataclasses.dataclass(frozen=True)
class TrajectoryConfig:
    tools: tuple[str, ...] = ("kernel_evaluator", "kernel_search")  # envs.tools.TOOLS names; submit is implied
    max_turns: int = 4  # generations per trajectory
    max_tool_calls: int = 8  # tool calls per trajectory (submit included)
    max_total_tokens: int = 4096  # completion tokens per trajectory, over all turns
    max_evaluations: int = 4  # kernel_evaluator calls per trajectory
    tool_timeout_s: float = 900.0  # one tool call; past it the observation says it timed out
    tool_format: ToolFormat = "auto"  # auto | native | hermes | fenced (rl/rollout/tool_calls.py)
    observation_role: Literal["tool", "user"] = "tool"  # user: for chat templates without a tool role
    max_observation_chars: int = 6000
    # The engine's context (prompt + completion tokens); None: unbounded (API models). A trajectory whose next
    # prompt would not fit ends (stop_reason "context_limit") instead of failing the engine's request. The
    # next prompt is estimated from the last one's ids plus 1 token per 2 characters of new observations
    # (an over-estimate for code: a trajectory ends a little early rather than too late).
    max_context_tokens: int | None = None
    reward_mode: RewardMode = "final"
    gamma: float = 0.4  # reward_mode=discounted (Kevin-32B)
    # training rows: one per trajectory (concat) or one per turn (per_turn); auto: per_turn for
    # reward_mode=discounted (each turn a sample with its own return), else concat
    layout: Layout | Literal["auto"] = "auto"
    history: History = "full"  # earlier turns in later prompts: as written, or as the policy's own summaries

    def __post_init__(self) -> None:
        resolve_tools(self.tools)  # unknown tool names fail here, before anything runs
        if self.layout == "auto":
            object.__setattr__(self, "layout", "per_turn" if self.reward_mode == "discounted" else "concat")
        if self.history not in HISTORIES:
            raise ValueError(f"trajectory.history must be one of {HISTORIES}, not {self.history!r}")
        if self.max_turns < 1 or self.max_tool_calls < 0 or self.max_total_tokens < 1 or self.max_evaluations < 0:
            raise ValueError("trajectory: max_turns >= 1, max_total_tokens >= 1, max_tool_calls/max_evaluations >= 0")
        if self.reward_mode not in REWARD_MODES:
            raise ValueError(f"trajectory.reward_mode must be one of {REWARD_MODES}, not {self.reward_mode!r}")
        if self.tool_format not in ("auto", "native", "hermes", "fenced"):
            raise ValueError(f"trajectory.tool_format {self.tool_format!r} is not auto, native, hermes or fenced")
        if self.layout not in ("concat", "per_turn"):
            raise ValueError(f"trajectory.layout {self.layout!r} is not concat or per_turn")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError("trajectory.gamma must be in [0, 1]")
        if self.max_context_tokens is not None and self.max_context_tokens < 64:
            raise ValueError("trajectory.max_context_tokens must be >= 64 (or null)")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> TrajectoryConfig:
        m = dict(m or {})
        reject_unknown(cls, m, "trajectory")
        if "tools" in m:
            m["tools"] = tuple(m["tools"] or ())
        return cls(**m)


@dataclasses.dataclass
class _State:
    request: RolloutRequest
    index: int
    problem: Problem
    messages: list[Message]
    context: ToolContext
    turns: list[Turn] = dataclasses.field(default_factory=list)
    tool_calls: int = 0
    tokens: int = 0
    submitted: str | None = None
    stop_reason: str | None = None
    started: float = dataclasses.field(default_factory=time.perf_counter)

    @property
    def trajectory_id(self) -> str:
        return f"{self.request.request_id}#{self.index}"


class TrajectoryRunner:
    def __init__(
        self,
        engine: Any,
        pool: KernelEvaluator,
        config: TrajectoryConfig,
        *,
        reward: RewardConfig | None = None,
        solutions: Any = None,
        profiler: Any = None,
        docs: Any = None,
        store: Any = None,
        store_split: str = "train",
    ):
        """`pool`: evaluates final answers and serves kernel_evaluator (evaluate_async); `solutions`: the
        envs.retrieval.KernelIndex kernel_search uses (held-out problems already excluded); `profiler`: an
        envs.Evaluator for profile; `store`: an envs.solutions.SolutionStore that every correct answer is
        added to (`store_split` says which side of the split the run's problems are on)."""
        self.engine, self.pool, self.config = engine, pool, config
        self.reward = reward or RewardConfig()
        self.tools = resolve_tools(config.tools)
        self.by_name = {t.name: t for t in self.tools}
        self.solutions, self.profiler, self.docs = solutions, profiler, docs
        self.store, self.store_split = store, store_split
        # wall seconds of the last run: generation calls, tool calls, evaluation of the final answers
        self.timings = {"generate_s": 0.0, "tools_s": 0.0, "final_evaluation_s": 0.0}

    # ------------------------------------------------------------------------------------------ setup
    def _messages(self, request: RolloutRequest) -> list[Message]:
        """The request's messages with the tool offer appended to the system prompt (text formats), or a
        system message of its own when the request has none."""
        messages = [dict(m) for m in request.messages]
        parts = [] if self.config.tool_format == "native" else [tool_instructions(self.tools, self.config.tool_format)]
        if self.config.history == "summary":
            parts.append(SUMMARY_INSTRUCTIONS)
        if not parts:
            return messages
        offer = "\n\n".join(parts)
        if messages and messages[0]["role"] == "system":
            messages[0]["content"] = messages[0]["content"].rstrip() + "\n\n" + offer
        else:
            messages.insert(0, {"role": "system", "content": offer})
        return messages

    def _state(self, request: RolloutRequest, index: int, problem: Problem, priority: str) -> _State:
        context = ToolContext(
            problem,
            evaluator=self.pool,
            profiler=self.profiler,
            solutions=self.solutions,
            docs=self.docs,
            priority=priority,
            evaluations_left=self.config.max_evaluations,
            reward=functools.partial(reward_for_verdict, delta=self.reward.delta),
        )
        return _State(request, index, problem, self._messages(request), context)

    # ------------------------------------------------------------------------------------------ run
    async def run(
        self, requests: list[RolloutRequest], problems: Mapping[str, Problem], priority: str = "train"
    ) -> list[Trajectory]:
        states = [self._state(r, i, problems[r.problem_id], priority) for r in requests for i in range(r.sampling.n)]
        self.timings = dict.fromkeys(self.timings, 0.0)
        for turn in range(self.config.max_turns):
            active = [s for s in states if s.stop_reason is None]
            if not active:
                break
            started = time.perf_counter()
            samples = await self._generate(active, turn)
            generated = time.perf_counter()
            await asyncio.gather(*(self._step(s, samples[s.trajectory_id], turn) for s in active))
            self.timings["generate_s"] += generated - started
            self.timings["tools_s"] += time.perf_counter() - generated
        for s in states:
            s.stop_reason = s.stop_reason or "max_turns"
        started = time.perf_counter()
        trajectories = list(await asyncio.gather(*(self._finish(s) for s in states)))
        self.timings["final_evaluation_s"] = time.perf_counter() - started
        return trajectories

    async def _generate(self, active: list[_State], turn: int) -> dict[str, Sample]:
        from rl.scoring import EngineFailure

        requests = {}
        offered = schemas(self.tools) if self.config.tool_format == "native" else None
        for s in active:
            sampling = dataclasses.replace(
                s.request.sampling,
                n=1,
                max_tokens=min(s.request.sampling.max_tokens, self.config.max_total_tokens - s.tokens),
            )
            requests[f"{s.trajectory_id}/t{turn}"] = (
                s,
                RolloutRequest(
                    f"{s.trajectory_id}/t{turn}",
                    s.request.problem_id,
                    context_messages(s.messages, self.config.history),
                    sampling,
                    s.request.policy_version,
                    tools=offered,
                ),
            )
        out: dict[str, Sample] = {}
        try:
            async for sample in self.engine.generate([r for _, r in requests.values()]):
                out[requests[sample.request_id][0].trajectory_id] = sample
        except Exception as e:
            raise EngineFailure(f"{type(e).__name__}: {e}") from e
        missing = [s.trajectory_id for s, _ in requests.values() if s.trajectory_id not in out]
        if missing:
            raise EngineFailure(f"the rollout engine returned no sample for {missing[:3]}")
        return out

    async def _step(self, s: _State, sample: Sample, turn: int) -> None:
        """Record the turn, run its tool calls, append the observations; set stop_reason when it ends."""
        s.tokens += len(sample.completion_ids)
        native = sample.tool_calls
        calls = parse_tool_calls(sample.text, self.tools, self.config.tool_format, native)
        assistant: dict[str, Any] = {"role": "assistant", "content": sample.text}
        if native and self.config.tool_format in ("auto", "native"):
            assistant["tool_calls"] = native
        s.messages.append(assistant)
        records: list[ToolCallRecord] = []
        answer = None
        for call in calls:
            if s.tool_calls >= self.config.max_tool_calls:
                records.append(
                    ToolCallRecord(
                        call.name,
                        call.arguments,
                        "tool call limit reached: answer now (submit).",
                        False,
                        call_id=call.call_id,
                    )
                )
                continue
            s.tool_calls += 1
            record = await self._call(call, s.context)
            records.append(record)
            if call.error is None and call.name in ("kernel_evaluator", "profile", SUBMIT):
                answer = call.arguments["code"]
            if call.error is None and call.name == SUBMIT:
                s.submitted = call.arguments["code"]
                break
        if answer is None:
            answer = last_python_block(sample.text)
        s.turns.append(
            Turn(
                turn,
                list(sample.prompt_ids),
                list(sample.completion_ids),
                None if sample.logprobs is None else list(sample.logprobs),
                sample.text,
                sample.finish_reason,
                sample.seconds,
                records,
                answer,
                usage=dict(sample.usage) if sample.usage else None,
            )
        )
        if s.submitted is not None:
            s.stop_reason = SUBMIT
        elif not calls:
            s.stop_reason = "length" if sample.finish_reason == "length" else "no_tool_call"
        elif sample.finish_reason == "error":
            s.stop_reason = "error"
        elif s.tokens >= self.config.max_total_tokens:
            s.stop_reason = "token_budget"
        for record in records:
            s.messages.append(self._observation(record))
        if s.stop_reason is None and not self._next_prompt_fits(sample, records):
            s.stop_reason = "context_limit"

    def _next_prompt_fits(self, sample: Sample, records: list[ToolCallRecord]) -> bool:
        limit = self.config.max_context_tokens
        if limit is None:
            return True
        new_chars = sum(len(r.result) for r in records)
        known = len(sample.prompt_ids) + len(sample.completion_ids) if sample.prompt_ids else len(sample.text) // 2
        estimate = known + new_chars // 2 + _MESSAGE_OVERHEAD_TOKENS * (len(records) + 1)
        return estimate + _MIN_COMPLETION_TOKENS <= limit

    async def _call(self, call: ParsedCall, context: ToolContext) -> ToolCallRecord:
        started = time.perf_counter()
        if call.error is not None:
            result = ToolResult(f"tool call error: {call.error}", ok=False)
        else:
            try:
                result = await asyncio.wait_for(
                    self.by_name[call.name].run(call.arguments, context), self.config.tool_timeout_s
                )
            except asyncio.TimeoutError:
                result = ToolResult(f"{call.name} timed out after {self.config.tool_timeout_s:g} s", ok=False)
            except Exception as e:  # the tool's own failure: the policy is told, the run goes on (and logs it)
                log.warning("tool %s failed: %s: %s", call.name, type(e).__name__, e)
                result = ToolResult(f"{call.name} failed: {type(e).__name__}: {str(e)[:300]}", ok=False)
        text = result.text
        if len(text) > self.config.max_observation_chars:
            text = text[: self.config.max_observation_chars] + "\n... (truncated)"
        return ToolCallRecord(
            call.name,
            call.arguments,
            text,
            result.ok,
            time.perf_counter() - started,
            dict(result.cost),
            call.call_id,
            result.verdict,
        )

    def _observation(self, record: ToolCallRecord) -> Message:
        if self.config.observation_role == "user":
            return {"role": "user", "content": f"[{record.name} result]\n{record.result}"}
        if record.call_id:  # a native call: the API's schema (tool_call_id, no name)
            return {"role": "tool", "content": record.result, "tool_call_id": record.call_id}
        return {"role": "tool", "content": record.result, "name": record.name}

    # ------------------------------------------------------------------------------------------ rewards
    async def _finish(self, s: _State) -> Trajectory:
        proposed = [t.answer for t in s.turns if t.answer is not None]
        final_answer = (
            s.submitted
            if s.submitted is not None
            else (proposed[-1] if proposed else (s.turns[-1].text if s.turns else ""))
        )
        to_score = {final_answer}
        if self.config.reward_mode != "final":
            to_score |= set(proposed)
        # An answer kernel_evaluator already judged keeps that verdict (the same checks; the verdict cache
        # would return it anyway): only new answers are evaluated.
        judged = {c.arguments["code"]: c.verdict for t in s.turns for c in t.tool_calls if c.verdict is not None}
        fresh = [a for a in to_score if a not in judged]
        verdicts = {a: judged[a] for a in to_score if a in judged}
        verdicts.update(
            zip(
                fresh,
                await asyncio.gather(
                    *(self.pool.evaluate_async(s.problem, a, priority=s.context.priority) for a in fresh)
                ),
            )
        )
        tokens = sum(len(t.completion_ids) for t in s.turns)
        rewards = {
            a: shaped_reward(v, a, tokens, self.config.max_total_tokens, self.reward)[0] for a, v in verdicts.items()
        }
        turns = [
            dataclasses.replace(
                t,
                verdict=verdicts.get(t.answer) if t.answer is not None else None,
                reward=rewards.get(t.answer, 0.0) if t.answer is not None else 0.0,
            )
            for t in s.turns
        ]
        reward, returns = trajectory_reward(
            self.config.reward_mode, rewards[final_answer], [t.reward for t in turns], self.config.gamma
        )
        self._store(s, verdicts)
        return Trajectory(
            s.trajectory_id,
            s.request.request_id,
            s.request.problem_id,
            s.index,
            s.request.policy_version,
            turns,
            s.messages,
            final_answer,
            verdicts[final_answer],
            reward,
            returns,
            self.config.reward_mode,
            s.stop_reason or "max_turns",
            time.perf_counter() - s.started,
        )

    def _store(self, s: _State, verdicts: dict[str, Verdict]) -> None:
        """Every correct answer of the trajectory (scored or checked with kernel_evaluator) into the store."""
        if self.store is None:
            return
        found = {a: v for a, v in verdicts.items() if v.correct}
        for turn in s.turns:
            for call in turn.tool_calls:
                if call.verdict is not None and call.verdict.correct:
                    found.setdefault(call.arguments["code"], call.verdict)
        for answer, verdict in found.items():
            self.store.add_verified(
                s.problem, extract_code(answer), verdict, self.store_split, f"trajectory {s.trajectory_id}"
            )
