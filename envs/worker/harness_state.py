"""What a harness process holds for its whole life, beside any one evaluation.

The launch recorder, the identities of torch and triton as the worker started, and the progress board
the parent's step deadlines read. Set up by envs/worker/harness.py (`prepare`, `serve`) before any problem
or candidate code exists, and read by the evaluation (envs/worker/evaluation.py and its phases). A
module of its own so that the harness, started as `python -m envs.worker.harness` (and so named
`__main__`), and the modules it imports share one copy: importing the harness from them would load a
second one.
"""

from __future__ import annotations

from envs.antihack import runtime as guard
from envs.worker.parent_link import ParentLink
from envs.worker.progress import ProgressBoard

LAUNCHES = guard.LaunchRecorder()  # installed in prepare(), before any candidate code exists
BASELINE_IDENTITIES: dict[str, int] = {}  # torch/triton as the worker started, taken in prepare()
PROGRESS: ProgressBoard | None = None  # completed candidate calls, read by the parent's step deadlines; set by serve()
LINK: ParentLink | None = None  # the link to the parent, set by serve(); lent by compiles (compile_lend.py)
