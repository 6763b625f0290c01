import pytest

from envs.source import SourceError, canonicalize, extract_code, prepare_solution

GOOD = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_extracts_first_python_block():
    text = f"Here:\n```python\n{GOOD}```\nand another\n```python\nprint(2)\n```"
    assert extract_code(text) == GOOD


def test_accepts_py_tag_and_unterminated_fence():
    assert extract_code(f"```py\n{GOOD}```") == GOOD
    assert extract_code(f"text\n```python\n{GOOD}") == GOOD


def test_whole_text_without_fence():
    assert extract_code(GOOD) == GOOD


def test_non_python_fences_are_not_taken():
    text = f"```bash\nls\n```\n```python\n{GOOD}```"
    assert extract_code(text) == GOOD


def test_canonical_form_ignores_comments_docstrings_and_formatting():
    a = canonicalize(GOOD)
    b = canonicalize(
        '"""doc"""\nimport torch  # c\n\nclass ModelNew(torch.nn.Module):\n'
        '    """doc"""\n    def forward(self,x):\n        # why\n        return (x)\n'
    )
    assert a.sha256 == b.sha256 and a.source == b.source


def test_docstring_only_body_stays_valid():
    c = canonicalize('def f():\n    """only a docstring"""\n')
    compile(c.source, "x", "exec")


def test_syntax_error_message_is_actionable():
    with pytest.raises(SourceError, match=r"SyntaxError.*line 2"):
        prepare_solution("x = 1\ndef f(:\n")


def test_missing_model_new():
    with pytest.raises(SourceError, match="ModelNew"):
        prepare_solution("class Model:\n    pass\n")


def test_empty_answer():
    with pytest.raises(SourceError, match="no code"):
        prepare_solution("```python\n\n```")
