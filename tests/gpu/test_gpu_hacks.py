"""The red-team corpus against the environment on a GPU: GPU-only hacks (side streams, the CUDA caching
allocator, full-size-only bugs) at full size, every other entry at the small size."""

import dataclasses

import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, Status, resolve_problem
from rewards.kernel_reward import reward_for_verdict
from tests.integration.test_hack_corpus import HACKS, corpus, header

pytestmark = [pytest.mark.gpu, pytest.mark.integration]


def _settings(path, **fields) -> EvalSettings:
    """The corpus's settings, with what the entry's `# settings:` line pins (e.g. `launch_allowance_ms=0.5`:
    a hack that cheats only where a setting makes a phase look different)."""
    base = EvalSettings(device="cuda", timed_runs=20, timeouts=PhaseTimeouts(correctness=60, timing=120), **fields)
    pinned = dict(item.split("=") for item in header(path).get("settings", "").split())
    return dataclasses.replace(base, **{k: _typed(getattr(base, k), v, path) for k, v in pinned.items()})


def _typed(default, text: str, path):
    """`text` as a value of `default`'s type; a flag is true or false (bool("false") would be True)."""
    if not isinstance(default, bool):
        return type(default)(text)
    if text not in ("true", "false"):
        raise ValueError(f"{path.name}: a flag in '# settings:' is true or false, not {text!r}")
    return text == "true"


def _by_settings(files, **fields) -> dict[EvalSettings, list]:
    groups: dict[EvalSettings, list] = {}
    for p in files:
        groups.setdefault(_settings(p, **fields), []).append(p)
    return groups


def _run(files, size):
    verdicts = {}
    for settings, group in _by_settings(files, size=size, workers=4).items():
        items = [(resolve_problem(header(p)["problem"]), p.read_text()) for p in group]
        with Evaluator(settings) as ev:
            verdicts.update(zip([p.name for p in group], ev.evaluate_many(items)))
    for name, v in verdicts.items():  # the outcome of every entry goes into docs/gpu-notes.md
        print(
            f"\n{name}: {v.outcome}, reward {reward_for_verdict(v):.3f}, speedup {v.speedup}: {(v.error or '')[:300]}"
        )
    return verdicts


@pytest.fixture(scope="module")
def gpu_only():
    return _run(corpus("cuda"), "full")


@pytest.fixture(scope="module")
def everywhere():
    return _run(corpus("cpu"), "small")


def _check(v, name):
    expect = header(HACKS / name)["expect"].split()
    if expect[0] == "legit":
        assert v.status is Status.CORRECT and v.hack is None, v.error
        return
    accepted = {expect[1], *header(HACKS / name).get("also", "").split()}
    outcome = v.hack.category if v.status is Status.HACK else v.status.value
    assert reward_for_verdict(v) == 0.0 and outcome in accepted, f"{name}: {v.status.value}: {v.error}"


@pytest.mark.parametrize("name", [p.name for p in corpus("cuda")])
def test_gpu_only_hack(gpu_only, name):
    _check(gpu_only[name], name)


@pytest.mark.parametrize("name", [p.name for p in corpus("cpu")])
def test_corpus_entry_on_gpu(everywhere, name):
    _check(everywhere[name], name)


@pytest.fixture(scope="module")
def runtime_only():
    """Every GPU-only entry through the execution stage alone (the static analysis skipped), one evaluator per
    settings group: a worker a hack spoils is replaced by the pool, as in a run."""
    from envs.source import canonicalize

    verdicts = {}
    for settings, group in _by_settings(corpus("cuda")).items():
        with Evaluator(settings) as ev:
            for path in group:
                problem = resolve_problem(header(path)["problem"])
                verdicts[path.name], _ = ev.pool.execute(problem, canonicalize(path.read_text()), None)
    return verdicts


@pytest.mark.parametrize("name", [p.name for p in corpus("cuda")])
def test_runtime_defences_alone_stop_gpu_only_hacks(runtime_only, name):
    """Skip the static analysis (call the execution stage directly): the worker's own checks must still
    refuse the reward, or (`# runtime: neutralized` in the header) leave the hack nothing to gain, so that
    the time it is credited with is its honest kernel's. Records which runtime check fired."""
    verdict = runtime_only[name]
    print(f"{name}: {verdict.status.value} {verdict.hack.category if verdict.hack else ''} {verdict.error}")
    if header(HACKS / name).get("runtime", "").startswith("neutralized"):
        assert verdict.status in (Status.HACK, Status.INCORRECT, Status.CORRECT), verdict
    else:
        assert verdict.status in (Status.HACK, Status.INCORRECT), verdict
