"""context/scopes.py: the names a Python function binds itself at a cursor (its parameters, what its lines
above the cursor assign), which hide the file's imports spelled like them."""

from __future__ import annotations

from lookahead_lsp.context.languages import detect_language
from lookahead_lsp.context.scopes import bound_at

PY = detect_language(path="core.py")

OPTION = """from .termui import prompt, style


class Option:
    def __init__(
        self,
        param_decls: list[str],
        prompt: bool | str = False,
        *flags: str,
        **attrs: object,
    ) -> None:
        super().__init__(
            param_decls,
            style=attrs,
        )
        for flag in flags:
            shown = flag
        with open(param_decls[0]) as handle:
            if prompt is True:
                pass
        if """


def test_a_functions_parameters_and_statement_level_assignments_are_bound() -> None:
    bound = bound_at(OPTION, len(OPTION), PY)
    assert {"param_decls", "prompt", "flags", "attrs", "flag", "shown", "handle"} <= bound
    assert "self" not in bound  # the instance, never an import's name
    assert "style" not in bound  # a keyword argument of a call is not the function's


def test_a_nested_function_sees_the_enclosing_functions_names_and_module_level_code_none() -> None:
    text = "def outer(prompt):\n    def inner(style):\n        value = 1\n        return "
    assert bound_at(text, len(text), PY) == {"prompt", "style", "value"}
    module = "from .termui import prompt\n\nprompt('name')\nif "
    assert bound_at(module, len(module), PY) == frozenset()
    header = "def validate(deprecated: bool, prompt"  # a def line binds the parameters before the cursor
    assert bound_at(header, len(header), PY) == {"deprecated", "prompt"}
    after = "def f(prompt):\n    return prompt\n\n\nx = "  # the function ended above the cursor
    assert bound_at(after, len(after), PY) == frozenset()


def test_other_languages_bind_nothing_here() -> None:
    text = "function f(prompt) {\n  return "
    assert bound_at(text, len(text), detect_language(path="a.js")) == frozenset()
