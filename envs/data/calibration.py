"""Known duplicates for calibrating and testing the similarity stages: a problem disguised the ways a copy is
disguised (identifiers renamed, module-level statements reordered, comments and docstrings changed), and
semantic duplicates (a crawled torch.nn module and the KernelBench problem computing the same op).

`scripts/calibrate_decontam.py` measures the embedders' distances on these against the distances between
different KernelBench problems, which is where the default thresholds come from (docs/curation.md)."""

from __future__ import annotations

import ast
import random

from envs.data.textsim import bound_names

__all__ = ["rename_identifiers", "reorder_statements", "change_comments", "disguise", "SEMANTIC_PAIRS"]


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.mapping.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.mapping.get(node.arg, node.arg)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self.mapping.get(node.name, node.name)
        return self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self.mapping.get(node.name, node.name)
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            node.attr = self.mapping.get(node.attr, node.attr)
        return self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        return self.generic_visit(node)  # keyword names belong to the callee's signature: kept


def rename_identifiers(source: str, seed: int = 0) -> str:
    tree = ast.parse(source)
    rng = random.Random(seed)
    bound = sorted(bound_names(tree))
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "zeta", "rho"]
    mapping = {n: f"{rng.choice(words)}_{i}" for i, n in enumerate(bound)}
    tree = _Renamer(mapping).visit(tree)
    for node in tree.body:  # SMALL_SIZES names constants by string: rename its keys with them
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Dict)
            and any(isinstance(t, ast.Name) and t.id == "SMALL_SIZES" for t in node.targets)
        ):
            for key in node.value.keys:
                if isinstance(key, ast.Constant) and key.value in mapping:
                    key.value = mapping[key.value]
    return ast.unparse(tree) + "\n"


def reorder_statements(source: str) -> str:
    """get_init_inputs before get_inputs, and the module constants after the functions that read them (legal:
    the functions run later)."""
    tree = ast.parse(source)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    functions = sorted(
        (n for n in tree.body if isinstance(n, ast.FunctionDef)), key=lambda n: n.name != "get_init_inputs"
    )
    rest = [n for n in tree.body if n not in imports and n not in classes and n not in functions]
    tree.body = imports + classes + functions + rest
    return ast.unparse(tree) + "\n"


def change_comments(source: str) -> str:
    """A different docstring and comments on every line: nothing the pipeline compares may change."""
    lines = ['"""A program I wrote myself, honestly."""']
    for i, line in enumerate(source.splitlines()):
        lines.append(
            f"{line}  # note {i}"
            if line.strip() and not line.rstrip().endswith(("\\", ",", "(")) and '"""' not in line and "'''" not in line
            else line
        )
    return "\n".join(lines) + "\n"


def disguise(source: str, seed: int = 0) -> str:
    return change_comments(reorder_statements(rename_identifiers(source, seed)))


# (torch.nn class crawled, KernelBench level-1 problem number): the same computation, different code.
SEMANTIC_PAIRS = [
    ("ReLU", 19),
    ("LeakyReLU", 20),
    ("Sigmoid", 21),
    ("Tanh", 22),
    ("Softmax", 23),
    ("LogSoftmax", 24),
    ("GELU", 26),
    ("SELU", 27),
    ("Hardsigmoid", 28),
    ("Softplus", 29),
    ("Softsign", 30),
    ("ELU", 31),
    ("Hardtanh", 32),
    ("BatchNorm2d", 33),
    ("InstanceNorm2d", 34),
    ("GroupNorm", 35),
    ("LayerNorm", 40),
    ("MaxPool1d", 41),
    ("MaxPool2d", 42),
    ("MaxPool3d", 43),
    ("AvgPool1d", 44),
    ("AvgPool2d", 45),
    ("AvgPool3d", 46),
    ("MSELoss", 94),
    ("CrossEntropyLoss", 95),
    ("HuberLoss", 96),
    ("KLDivLoss", 98),
    ("TripletMarginLoss", 99),
]
