"""With the embedded real model: a cursor on an empty line whose indentation is typed (as an editor leaves it
after Enter) gets the line the model knows, tokenized as the tokenizer splits that line, in Python, JavaScript
and Java; where the line closes a block left open above it (``}``), the brace is shown, not cut.

The files are HumanEval problems (``below_zero``, ``has_close_elements`` as MultiPL-E translates it) with one
line left out, the cursor at its indentation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from lookahead_lsp.lsp_server.cli import main

pytestmark = [pytest.mark.real_model, pytest.mark.usefixtures("keep_logging")]
DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    ("name", "line", "closes"),
    [("below_zero.py", 16, False), ("close_elements.js", 15, True), ("CloseElements.java", 8, True)],
)
def test_typed_indentation_gives_the_tokenizers_split_and_a_line(
    name: str, line: int, closes: bool, tmp_path: Path, tokenizer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    shutil.copy(DATA / f"{name}.txt", path)  # stored as .txt: a hole is not valid code for the linters
    indent = path.read_text().split("\n")[line]
    assert indent and not indent.strip()  # the cursor's line holds its indentation only
    argv = ["complete", str(path), "--line", str(line), "--character", str(len(indent)), "--json"]
    assert main([*argv, "--model", "embedded", "--no-index"]) == 0
    result = json.loads(capsys.readouterr().out)
    text, ids = result["text"], result["token_ids"]
    assert text.strip(), result  # a line, not nothing
    # the model re-typed the indentation's last character with its first word, and the line as the tokenizer
    # splits it whole is the prompt's whitespace tokens followed by the generated ones
    raw = tokenizer.decode(ids)
    assert raw[:1] == indent[-1] and raw[1:].lstrip(" \t") == raw[1:], raw
    kept = tokenizer.encode(indent[:-1], add_special_tokens=False)
    assert tokenizer.encode(indent[:-1] + raw, add_special_tokens=False) == kept + ids, (kept, ids)
    if closes:
        assert text.strip().startswith("}"), text
