"""The harness's link lends a shared GPU hold back and takes it again (envs/worker/parent_link.py), with the
parent's end played over real pipes by a thread that grants every lock."""

from __future__ import annotations

import os
import threading
import time

import pytest

from envs.worker.parent_link import ParentLink
from envs.worker.protocol import read_frame, write_frame


def granting_parent(to_parent_r: int, to_worker_w: int, messages: list[dict]) -> threading.Thread:
    """The parent's end of a link on a thread: reads every message into `messages` and grants every lock."""

    def parent() -> None:
        while True:
            try:
                message = read_frame(to_parent_r)
            except EOFError:
                return
            messages.append(message)
            if message["type"] == "lock":
                write_frame(to_worker_w, {"type": "granted"})

    thread = threading.Thread(target=parent, daemon=True)
    thread.start()
    return thread


@pytest.fixture()
def link_and_messages():
    to_worker_r, to_worker_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    messages: list[dict] = []
    thread = granting_parent(to_parent_r, to_worker_w, messages)
    yield ParentLink(to_worker_r, to_parent_w), messages
    os.close(to_parent_w)
    thread.join(5)
    for fd in (to_worker_r, to_worker_w, to_parent_r):
        os.close(fd)


def _kinds(messages: list[dict], count: int) -> list[str]:
    """The first `count` messages the parent read (it reads them on its own thread)."""
    deadline = time.monotonic() + 5
    while len(messages) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return [m["type"] + (f":{m['mode']}" if "mode" in m else "") for m in messages]


def test_a_shared_hold_is_lent_for_the_compile_and_taken_again(link_and_messages):
    link, messages = link_and_messages
    with link.gpu("shared"):
        assert link.held == "shared"
        with link.lent():
            assert link.held is None
        assert link.held == "shared"
    assert link.held is None and link.lent_seconds > 0
    assert _kinds(messages, 4) == ["lock:shared", "unlock", "lock:shared", "unlock"]


def test_an_exclusive_hold_or_none_is_not_lent(link_and_messages):
    link, messages = link_and_messages
    with link.lent():
        pass
    with link.gpu("exclusive"), link.lent():
        assert link.held == "exclusive"
    assert _kinds(messages, 2) == ["lock:exclusive", "unlock"] and link.lent_seconds == 0


def test_a_failing_compile_still_takes_the_hold_back_before_it_is_let_go(link_and_messages):
    link, messages = link_and_messages
    with pytest.raises(SyntaxError):
        with link.gpu("shared"), link.lent():
            raise SyntaxError("the candidate's kernel does not compile")
    assert _kinds(messages, 4) == ["lock:shared", "unlock", "lock:shared", "unlock"]


def test_the_baselines_inductor_compile_runs_with_the_hold_lent(link_and_messages):
    """TorchInductor lowers and compiles the reference with the shared hold given back (timing_phase.py), and
    the compiled reference still computes what eager does."""
    import types

    import torch

    from envs.worker.timing_phase import TimingPhase

    link, messages = link_and_messages
    backend = TimingPhase._inductor_lending_the_gpu(types.SimpleNamespace(link=link))
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend=backend)
    try:
        with torch.no_grad(), link.gpu("shared"):
            out = compiled(x)
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(out, model(x).detach())
    assert link.lent_seconds > 0
    assert _kinds(messages, 4) == ["lock:shared", "unlock", "lock:shared", "unlock"]
