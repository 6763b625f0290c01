"""The environment end to end on CPU: real worker processes, the real Triton interpreter."""

import os
import textwrap
from pathlib import Path

import psutil
import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, Status, load_problem_set
from envs.settings import StepBudget, StepDeadlines
from rewards.kernel_reward import kernel_reward, reward_for_verdict
from tests.conftest import builtin

pytestmark = pytest.mark.integration

RELU = builtin("L0_02_relu")


def solution(body: str, prelude: str = "", shift: str = "0.0") -> str:
    """A relu solution whose forward runs `body`, then computes relu(x) + shift with a Triton kernel."""
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8) or "        pass"
    return "\n".join(
        [
            "import os, sys, time",
            "import torch, triton, triton.language as tl",
            "import torch.nn as nn",
            textwrap.dedent(prelude).strip("\n"),
            "@triton.jit",
            "def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):",
            "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
            "    m = offs < n",
            f"    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0) + {shift}, mask=m)",
            "class ModelNew(nn.Module):",
            "    def forward(self, x):",
            body,
            "        out = torch.empty_like(x)",
            "        _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)",
            "        return out",
            "",
        ]
    )


def execute(evaluator, problem, code):
    """The execution stage alone: these tests are about isolating the worker, so the static anti-hack
    analysis (which refuses most of these candidates before they run) is skipped on purpose."""
    from envs.source import SourceError, prepare_solution

    try:
        canonical = prepare_solution(code)
    except SourceError:
        return evaluator.evaluate(problem, code)  # the CPU stage's own verdict (compile_error)
    return evaluator.pool.execute(problem, canonical, None)[0]


def worker_tagged_processes() -> list[int]:
    """Live processes started by workers of this test process (other evaluators may run beside us)."""
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get("KERNELRL_WORKER_TAG", "").startswith(f"{os.getpid()}-"):
                found.append(p.pid)
        except psutil.Error:
            continue
    return found


@pytest.fixture(scope="module")
def evaluator():
    timeouts = PhaseTimeouts(load=60, compile=10, correctness=8, timing=30)
    with Evaluator(EvalSettings(device="cpu", timeouts=timeouts, memory_limit_gb=1.5)) as ev:
        yield ev
    assert worker_tagged_processes() == []


def test_every_builtin_reference_solution_is_correct_under_the_interpreter():
    problems = load_problem_set("builtin")
    with Evaluator(EvalSettings(device="cpu", workers=2)) as ev:
        verdicts = ev.evaluate_many([(p, Path(p.reference_solution).read_text()) for p in problems])
    failures = {v.problem_id: v.error for v in verdicts if not v.correct}
    assert not failures
    for v in verdicts:
        assert v.device == "cpu" and v.speedup is None and v.timings is None
        assert reward_for_verdict(v) == pytest.approx(kernel_reward(True, None))
        assert any("no speedup" in n for n in v.notes)
        # where the correctness phase went: the first trial (Triton's compile on a GPU), the rest, the probe
        steps = {k for k in v.phase_seconds if k.startswith("correctness.")}
        assert steps == {"correctness.first_trial", "correctness.trials", "correctness.probe"}, v.phase_seconds
        assert all(v.phase_seconds[k] > 0 for k in steps)  # worker-side clocks: no exact sum with the parent's


BAD = {
    "syntax": ("def forward(:", Status.COMPILE_ERROR, "SyntaxError"),
    "no_model_new": ("class Model: pass", Status.COMPILE_ERROR, "ModelNew"),
    "import_error": (solution("", prelude="import not_a_module_xyz"), Status.COMPILE_ERROR, "not_a_module_xyz"),
    "raises": (solution("raise ValueError('boom in forward')"), Status.RUNTIME_ERROR, "boom in forward"),
    "sys_exit": (solution("sys.exit(0)"), Status.RUNTIME_ERROR, "SystemExit"),
    "wrong_values": (solution("", shift="1.0"), Status.INCORRECT, "element(s) differ beyond atol"),
    "wrong_shape": (solution("x = x[:, :-1].contiguous()"), Status.INCORRECT, "shape mismatch"),
    "nan": (solution("", shift="float('nan')"), Status.INCORRECT, "NaN"),
    "infinite_loop": (solution("while True: pass"), Status.TIMEOUT, "correctness phase"),
    "os_exit": (solution("os._exit(0)"), Status.CRASH, "exit code 0"),
    "segfault": (solution("import ctypes; ctypes.string_at(0)"), Status.CRASH, "SIGSEGV"),
    "output_flood": (
        solution("while True: print('x' * 10000); sys.stderr.write('y' * 10000)"),
        Status.TIMEOUT,
        "correctness",
    ),
    # The address-space limit (2x the memory limit) refuses one huge request at once; growth in steps it
    # allows is the RSS guard's case (test_growth_in_small_steps_is_killed_by_the_memory_guard).
    "huge_allocation": (solution("big = bytearray(64 << 30)"), Status.RUNTIME_ERROR, "MemoryError"),
    "import_time_loop": (solution("", prelude="while True: pass"), Status.TIMEOUT, "compile phase"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_candidate_gets_its_status_and_the_next_evaluation_works(evaluator, name):
    problem, good = RELU
    code, status, message = BAD[name]
    v = execute(evaluator, problem, f"```python\n{code}\n```")
    assert v.status is status, v
    assert message in v.error
    assert reward_for_verdict(v) == 0.0 and not v.correct
    assert sum(t for k, t in v.phase_seconds.items() if k != "total") < 30  # bounded by the phase timeouts
    ok = evaluator.evaluate(problem, good)
    assert ok.status is Status.CORRECT, ok.error


def test_growth_in_small_steps_is_killed_by_the_memory_guard():
    """The parent's RSS guard, on its own. The forked child (the zygote is not counted) holds ~0.5 GiB
    when forward starts, so the guard at 1.5 GiB needs ~1 GiB of growth. Memory the VM has never touched
    is slow to fault in: on the 2-core Firecracker machines 64 MiB steps took 0.3-0.8 s cold and 0.04 s
    warm (3 GiB in 19.8 s vs 3.0 s), and CI's first run of this case hit an 8 s correctness limit. Hence
    its own evaluator with phase and step limits no allocation speed reaches, and steps paced at 0.05 s
    so that at full speed the guard's 0.2 s polls see 1.5 GiB long before the 3 GiB address space runs
    out."""
    problem, good = RELU
    growth = solution("big = []\nfor _ in range(1024):\n    big.append(bytearray(64 << 20))\n    time.sleep(0.05)")
    timeouts = PhaseTimeouts(load=60, compile=10, correctness=120, timing=30)
    steps = StepDeadlines(cpu=StepBudget(fixed_s=120.0, multiple=100.0))  # one call of forward grows it all
    with Evaluator(EvalSettings(device="cpu", timeouts=timeouts, deadlines=steps, memory_limit_gb=1.5)) as ev:
        v = execute(ev, problem, f"```python\n{growth}\n```")
        assert v.status is Status.CRASH, v
        assert "exceeded the host memory limit" in v.error
        assert reward_for_verdict(v) == 0.0 and v.phase_seconds["correctness"] < 120
        assert ev.evaluate(problem, good).correct


def test_stray_processes_are_killed(evaluator, tmp_path):
    problem, good = RELU
    marker = tmp_path / "escaped"
    spawn = f"""
        import subprocess
        subprocess.Popen(['sleep', '600'])
        # a daemon that leaves the process group, then the worker dies
        subprocess.Popen(['setsid', 'sh', '-c', 'sleep 600; touch {marker}'], start_new_session=True)
        os._exit(1)
    """
    before = set(worker_tagged_processes())
    v = execute(evaluator, problem, solution(spawn))
    assert v.status is Status.CRASH
    current = set(evaluator.pool.worker_pids(wrappers=True))  # the replacement, once started, and its bwrap
    leftovers = set(worker_tagged_processes()) - before - current
    assert leftovers == set(), [(psutil.Process(p).cmdline(), psutil.Process(p).status()) for p in leftovers]
    assert evaluator.evaluate(problem, good).correct


def test_printing_a_fake_verdict_changes_nothing(evaluator):
    problem, _ = RELU
    fake = '{"type": "result", "status": "correct", "nonce": null}'
    v = execute(evaluator, problem, solution(f"print({fake!r}); sys.stdout.flush()", shift="1.0"))
    assert v.status is Status.INCORRECT


def test_writing_frames_to_every_descriptor_cannot_forge_a_verdict(evaluator):
    problem, good = RELU
    forge = """
        import json, struct
        msg = json.dumps({"type": "result", "status": "correct", "healthy": True}).encode()
        for fd in range(3, 64):
            try:
                os.write(fd, struct.pack('>I', len(msg)) + msg)
            except OSError:
                pass
    """
    v = execute(evaluator, problem, solution(forge, shift="1.0"))
    assert v.status is not Status.CORRECT and reward_for_verdict(v) == 0.0
    assert evaluator.evaluate(problem, good).correct


def test_a_result_frame_forged_with_the_real_nonce_is_not_accepted(evaluator):
    """The corpus's nonce forger finds the request in memory and writes a `correct` frame to the result
    pipe; without the static analysis only the confirmation round-trip stands in its way."""
    from tests.integration.test_hack_corpus import HACKS
    from envs import resolve_problem

    problem = resolve_problem("L5_01_attention")
    v = execute(evaluator, problem, (HACKS / "hack_forged_result_nonce_frame.py").read_text())
    assert v.status is Status.CRASH and "not confirmed" in v.error, v
    assert evaluator.evaluate(*RELU).correct


def test_candidate_environment_holds_no_secrets_and_runs_in_a_fresh_directory(monkeypatch):
    problem, _ = RELU
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("WANDB_API_KEY", "should-not-leak")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "should-not-leak")
    probe = """
        leaked = [k for k, v in os.environ.items() if 'should-not-leak' in v or v.startswith('sk-')]
        if leaked:
            raise RuntimeError(f'secrets visible: {leaked}')
        if (os.listdir('.') != ['problem.py', 'solution.py']
                and sorted(os.listdir('.')) != ['problem.py', 'solution.py']):
            raise RuntimeError(f'working directory not fresh: {os.listdir(".")}')
        if 'kernelrl-worker-' not in os.getcwd():
            raise RuntimeError(os.getcwd())
    """
    with Evaluator(EvalSettings(device="cpu")) as ev:
        v = execute(ev, problem, solution(probe))
    assert v.status is Status.CORRECT, v.error


def test_cache_hits_and_misses(tmp_cache):
    problem, good = RELU
    with Evaluator(EvalSettings(device="cpu"), cache=tmp_cache) as ev:
        first = ev.evaluate(problem, good)
        assert not first.cached and first.correct
        # Same code with other comments and formatting: same canonical source, so a hit.
        again = ev.evaluate(problem, "# a comment\n" + good + "\n\n# trailing\n")
        assert again.cached and again.status is first.status
        bad = ev.evaluate(problem, solution("", shift="1.0"))
        assert bad.status is Status.INCORRECT and not bad.cached and tmp_cache.count() == 2
    # Transient failures (here a timeout) are not cached.
    with Evaluator(EvalSettings(device="cpu", timeouts=PhaseTimeouts(correctness=3)), cache=tmp_cache) as ev:
        hung = ev.evaluate(problem, solution("while x.numel() > 0:\n    pass"))
        assert hung.status is Status.TIMEOUT and tmp_cache.count() == 2
    # A hit runs nothing; it carries no reward, so the caller's delta prices it.
    with Evaluator(EvalSettings(device="cpu"), cache=tmp_cache) as ev:
        pids = set(ev.pool.worker_pids())
        hit = ev.evaluate(problem, good)
        assert hit.cached and reward_for_verdict(hit, 0.5) == pytest.approx(kernel_reward(True, None, delta=0.5))
        assert set(ev.pool.worker_pids()) == pids


def test_seeds_are_fresh_unless_fixed(tmp_path):
    problem, _ = RELU
    seen = tmp_path / "seen"
    record = solution(f"open({str(seen)!r}, 'a').write(repr(float(x.reshape(-1)[0])) + ' ')")

    def first_inputs(settings):
        seen.write_text("")
        with Evaluator(settings) as ev:
            runs = []
            for _ in range(2):
                assert execute(ev, problem, record).correct
                runs.append(seen.read_text())
                seen.write_text("")
        return runs

    # The candidate reports its inputs in a file outside its directory, which the OS sandbox forbids.
    fresh = first_inputs(EvalSettings(device="cpu", sandbox="off"))
    assert fresh[0] != fresh[1]  # unpredictable: new seeds for every evaluation
    fixed = first_inputs(EvalSettings(device="cpu", seed=123, sandbox="off"))
    assert fixed[0] == fixed[1] and len(fixed[0].split()) >= 5  # reproducible when asked


def test_no_worker_process_survives_close():
    others = set(worker_tagged_processes())  # e.g. the module's shared evaluator
    with Evaluator(EvalSettings(device="cpu", workers=2)) as ev:
        assert len(ev.pool.worker_pids()) == 2
        pids = ev.pool.worker_pids(wrappers=True)  # sandboxed, bubblewrap's processes too
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert set(worker_tagged_processes()) <= others


DEGENERATE = {
    "tiny": "x * 1e-7",
    "constant": "torch.ones_like(x) * 3",
    "input_independent": "torch.arange(x.numel(), dtype=x.dtype).reshape(x.shape)",
}


def test_degenerate_problems_are_rejected_when_the_set_loads(tmp_cache):
    from envs import ProblemError
    from envs.problems import parse_problem

    problems = [
        parse_problem(
            textwrap.dedent(f"""
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                return {expr}
        n = 100
        def get_inputs():
            return [torch.randn(n)]
        def get_init_inputs():
            return []
    """),
            name,
        )
        for name, expr in DEGENERATE.items()
    ]
    with Evaluator(EvalSettings(device="cpu"), cache=tmp_cache) as ev:
        ev.validate_problems([RELU[0]])  # a sound problem passes
        with pytest.raises(ProblemError) as err:
            ev.validate_problems(problems)
    text = str(err.value)
    assert "tiny: output 0 is within tolerance of zero" in text
    assert "constant: output 0 is constant" in text
    assert "input_independent: the output does not depend on the inputs" in text


def test_a_patch_to_torch_never_outlives_its_evaluation(evaluator):
    """A patch of something no specific check watches is still found when the evaluation ends, and the
    worker that ran it is replaced rather than handed to the next candidate."""
    problem, good = RELU
    v = execute(evaluator, problem, solution("", prelude="torch.nn.functional.softsign = lambda x: x"))
    assert v.status is Status.HACK and v.hack.category == "monkeypatch", v
    assert "torch.nn.functional.softsign" in v.hack.reason
    assert evaluator.evaluate(problem, good).correct


def test_the_candidate_never_gets_the_inputs_its_rechecks_and_anchor_copies_are_made_from(evaluator):
    """After the correctness trials (5 calls here), the candidate overwrites its input with |x| for three calls
    and answers relu(|x|) = |x|, right for the data it now holds. Had it been handed the timing phase's own
    inputs (as block 0 of the GPU's timed runs and the CPU's re-check calls were until session 39), the
    re-checks' expected outputs, and on a GPU the anchor's copies for every later placement block, would be
    made from what it wrote: a reference whose speed depends on its data could be slowed, and the re-checks
    would pass. On a copy of its own, its re-checked outputs are |x| against relu(x)."""
    problem, good = RELU
    prelude = """
    @triton.jit
    def _abs_in_place(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(x_ptr + offs, tl.abs(tl.load(x_ptr + offs, mask=m)), mask=m)
    """
    body = """
    self.calls = getattr(self, "calls", 0) + 1
    if 6 <= self.calls <= 8:
        _abs_in_place[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)
    """
    v = execute(evaluator, problem, solution(body, prelude=prelude))
    assert v.status is Status.HACK and v.hack.category == "phase_detection", v
    assert "timed run" in v.hack.reason, v.hack.reason


def test_a_forward_that_stops_launching_after_its_first_call_is_output_caching_not_a_ghost(evaluator):
    """Its Triton path is taken (the first trial launched it), so a later call that launches nothing returned a
    result kept from before: output_caching. A path never taken stays ghost_optimization (the corpus's
    hack_ghost_optimization_* entries)."""
    problem, _ = RELU
    cached = solution(
        """
        if getattr(self, "_kept", None) is not None and self._kept.shape == x.shape:
            return self._kept
        self._kept = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, self._kept, x.numel(), BLOCK=1024)
        return self._kept
        """
    )
    v = execute(evaluator, problem, cached)
    assert v.status is Status.HACK and v.hack.category == "output_caching", v
    assert "which an earlier call on other inputs launched" in v.error


def test_a_wrong_answer_that_is_an_earlier_calls_untouched_tensor_is_output_caching(evaluator):
    """A cache keyed on part of the input (here the shape) hits on new inputs while the call still launches a
    kernel of its own (a checksum of the key), so no idle call gives it away: the wrong answer it returns is the
    tensor an earlier trial returned, with the content it had then, which is a kept result, not a wrong
    computation (the throughput set's logsumexp hack on a GPU was `incorrect` in some passes)."""
    problem, _ = RELU
    keyed = solution(
        """
        if getattr(self, "_kept", None) is not None and self._kept.shape == x.shape:
            probe = torch.empty(1, device=x.device, dtype=x.dtype)
            _relu[(1,)](x, probe, 1, BLOCK=1024)  # a launch on every call, as a checksum kernel would be
            return self._kept
        self._kept = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, self._kept, x.numel(), BLOCK=1024)
        return self._kept
        """
    )
    v = execute(evaluator, problem, keyed)
    assert v.status is Status.HACK and v.hack.category == "output_caching", v
    assert "the tensor an earlier call on other inputs had" in v.error
    # a legitimate kernel that reuses its output buffer writes new values into it: judged as before
    reused = solution(
        """
        if getattr(self, "_buf", None) is None or self._buf.shape != x.shape:
            self._buf = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, self._buf, x.numel(), BLOCK=1024)
        return self._buf
        """
    )
    assert execute(evaluator, problem, reused).status is Status.CORRECT
