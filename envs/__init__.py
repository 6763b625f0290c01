"""KernelRL's environment: problems, isolated evaluation of candidate kernels, verdicts."""

from envs.evaluator import Evaluator, EvaluatorError
from envs.problems import Problem, ProblemError, load_problem_set, resolve_problem
from envs.settings import EvalSettings, PhaseTimeouts
from envs.verdict import HackFinding, SpeedupInterval, Status, Timings, TimingStats, Verdict

__all__ = [
    "Evaluator",
    "EvaluatorError",
    "Problem",
    "ProblemError",
    "load_problem_set",
    "resolve_problem",
    "EvalSettings",
    "PhaseTimeouts",
    "HackFinding",
    "SpeedupInterval",
    "Status",
    "Timings",
    "TimingStats",
    "Verdict",
]
