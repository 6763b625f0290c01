"""The progress bar over training steps: on stderr only when it is a terminal, off by loop.progress_bar."""

import io

from rl.config import LoopConfig
from rl.loop import step_progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_bar_is_drawn_on_a_terminal_only():
    assert LoopConfig().progress_bar is True
    assert step_progress(6, 0, True, io.StringIO()) is None  # a log file or CI: no bar, clean lines
    assert step_progress(6, 0, False, Terminal()) is None  # loop.progress_bar=false
    term = Terminal()
    bar = step_progress(6, 2, True, term)  # a resumed run starts at its step
    bar.update(1)
    bar.close()
    assert "3/6" in term.getvalue() and "steps" in term.getvalue()
