"""Grammar-generated Python (hypothesmith) as fuzz cases: alone, and spliced into a correct reference at
module level or at the start of its forward, so that generated code meets the analysis of a real kernel.

Needs `hypothesis` and `hypothesmith` (the dev extras): callers skip when they are missing.
"""

from __future__ import annotations

import re
import textwrap
import warnings

import hypothesmith
from hypothesis import HealthCheck, Phase, given, seed as fixed_seed, settings, strategies as st

from tests.fuzz.mutations import FuzzCase, seeds


def splice(reference: str, code: str, where: str) -> str:
    """`code` inserted after the reference's imports ("module") or as the first lines of forward ("forward")."""
    if where == "forward" and (m := re.search(r"^( *)def forward\(.*\n", reference, re.MULTILINE)):
        return reference[: m.end()] + textwrap.indent(code, m.group(1) + "    ") + "\n" + reference[m.end() :]
    imports = list(re.finditer(r"^(?:import|from) .*\n", reference, re.MULTILINE))
    at = imports[-1].end() if imports else 0
    return reference[:at] + code + "\n" + reference[at:]


def strategy() -> st.SearchStrategy[FuzzCase]:
    """Generated source alone (for L0_02_relu), or spliced into one of the built-in references."""
    references = [s for s in seeds() if s.name == s.problem_id]
    code = st.one_of(hypothesmith.from_grammar(), hypothesmith.from_node())
    alone = code.map(lambda c: FuzzCase("generated+hypothesmith(alone)", "L0_02_relu", c))
    spliced = st.builds(
        lambda i, c, where: FuzzCase(
            f"{references[i].name}+hypothesmith({where})",
            references[i].problem_id,
            splice(references[i].source, c, where),
        ),
        st.integers(0, len(references) - 1),
        code,
        st.sampled_from(["module", "forward"]),
    )
    return st.one_of(alone, spliced)


SETTINGS = dict(database=None, deadline=None, suppress_health_check=list(HealthCheck))


def draw(count: int, seed: int = 0) -> list[FuzzCase]:
    """`count` generated cases, the same ones for the same seed (for the fuzz script's report)."""
    out: list[FuzzCase] = []

    @fixed_seed(seed)
    @settings(max_examples=count, phases=[Phase.generate], **SETTINGS)
    @given(strategy())
    def collect(case):
        out.append(case)

    with warnings.catch_warnings():  # generated code is compiled here too; its SyntaxWarnings are noise
        warnings.simplefilter("ignore")
        collect()
    return out
