"""BM25 snippets: relevance, exclusion, deterministic order, incremental updates, size limits."""

from __future__ import annotations

import time

from lookahead_lsp.context.snippets import COMMON_MIN_FILES, SnippetIndex, defined_names, terms

PARSER = "\n".join(
    ["import json", "", "def parse_config(path):", "    with open(path) as handle:", "        return json.load(handle)"]
    + [f"# filler {i}" for i in range(40)]
    + ["def render_template(name, context):", "    return TEMPLATES[name].format(**context)"]
)
NETWORK = "\n".join(
    ["import socket", "", "def open_socket(host, port):", "    return socket.create_connection((host, port))"]
)


def make_index() -> SnippetIndex:
    index = SnippetIndex(chunk_lines=20, stride=10)
    index.add_document("src/config.py", PARSER)
    index.add_document("src/net.py", NETWORK)
    return index


def test_terms_split_identifiers_and_drop_keywords() -> None:
    found = set(terms("def parseConfig(self, file_path): return HTTPServer"))
    assert {"parseconfig", "parse", "config", "file_path", "file", "path", "httpserver", "http", "server"} <= found
    assert not {"def", "self", "return"} & found


def test_most_relevant_window_first() -> None:
    hits = make_index().query("cfg = parse_config(config_path)", k=3)
    assert hits and hits[0].path == "src/config.py"
    assert "def parse_config" in hits[0].text and hits[0].start_line == 0
    assert make_index().query("sock = open_socket(host, 80)")[0].path == "src/net.py"


def test_later_window_has_its_own_start_line() -> None:
    hit = make_index().query("render_template('index', context)", k=1)[0]
    assert "def render_template" in hit.text and hit.start_line > 0


def test_exclude_current_file() -> None:
    hits = make_index().query("parse_config json", exclude_path="src/config.py")
    assert all(h.path != "src/config.py" for h in hits)


def test_typing_in_the_excluded_file_moves_no_other_windows_score() -> None:
    """The file being completed is excluded from the results and from the statistics that score them: a
    keystroke there (new terms, new lines, new windows) leaves every snippet and score as it was."""
    index = make_index()
    typing = "import json\n\ndef load(path):\n    return parse_config(path)\n"
    index.add_document("src/app.py", typing)
    query = "settings = parse_config(path) or open_socket(host, port)"
    before = index.query(query, exclude_path="src/app.py", k=4)
    assert {h.path for h in before} == {"src/config.py", "src/net.py"}
    for more in ("    socket = open_socket(host, port)\n", "\n".join(f"# json path {i}" for i in range(60))):
        typing += more
        index.add_document("src/app.py", typing)
        assert index.query(query, exclude_path="src/app.py", k=4) == before
    assert index.query(query, k=4) != before  # not excluded, the same file counts (and is found)


def test_update_and_remove_are_incremental() -> None:
    index = make_index()
    index.add_document("src/net.py", "def parse_config_from_env():\n    return parse_config(ENV)\n")
    paths = [h.path for h in index.query("parse_config", k=5)]
    assert "src/net.py" in paths and "src/config.py" in paths
    assert not index.query("create_connection")  # the old text is gone
    index.remove_document("src/config.py")
    assert [h.path for h in index.query("parse_config", k=5)] == ["src/net.py"]
    assert "src/config.py" not in index and len(index) == 1


def test_ties_break_by_path_then_line() -> None:
    index = SnippetIndex(chunk_lines=20, stride=10)
    for path in ("b.py", "a.py", "c.py"):
        index.add_document(path, "def shared_helper():\n    pass\n")
    index.add_document("z.py", "unrelated = 1\n")
    assert [h.path for h in index.query("shared_helper()", k=3)] == ["a.py", "b.py", "c.py"]


def test_overlapping_windows_of_one_file_are_not_both_returned() -> None:
    hits = make_index().query("parse_config json handle", k=5)
    config_hits = [h for h in hits if h.path == "src/config.py"]
    starts = sorted(h.start_line for h in config_hits)
    assert all(b - a >= 20 for a, b in zip(starts, starts[1:], strict=False))


def test_max_chars_bounds_the_total_on_line_ends() -> None:
    hits = make_index().query("parse_config render_template open_socket", k=5, max_chars=120)
    assert sum(len(h.text) for h in hits) <= 120
    assert all(h.text.endswith("\n") or len(h.text) < 120 for h in hits)


def test_query_is_cheap_on_a_big_workspace() -> None:
    index = SnippetIndex()
    for f in range(300):
        index.add_document(
            f"pkg/mod{f}.py", "".join(f"def func_{f}_{i}(arg):\n    return helper_{i}(arg)\n" for i in range(60))
        )
    started = time.perf_counter()
    for _ in range(10):
        hits = index.query("value = helper_7(func_12_3(x))", k=4)
    assert (time.perf_counter() - started) / 10 < 0.05
    assert hits[0].path == "pkg/mod12.py"


HELPERS = "\n".join(
    [
        "from typing import List",
        "",
        "def mean_of(numbers: List[float]) -> float:",
        "    return sum(numbers) / len(numbers)",
    ]
)
UNRELATED = "\n".join(
    [
        "from typing import List",
        "",
        "def below_zero(operations: List[int]) -> bool:",
        "    balance = 0",
        "    for op in operations:",
        "        balance += op",
        "    return balance < 0",
    ]
)
CURSOR_CODE = "\n".join(
    [
        "from typing import List",
        "from helpers import mean_of",
        "",
        "def spread(numbers: List[float]) -> float:",
        "    centre = mean_of(numbers)",
    ]
)


def test_relevance_bar_keeps_definitions_the_cursor_uses_and_drops_common_words() -> None:
    """A window that only shares common names (``typing``, ``List``, ``numbers``) stays out; one that defines a
    name the cursor's code calls gets in."""
    index = SnippetIndex(chunk_lines=20, stride=10)
    index.add_document("helpers.py", HELPERS)
    index.add_document("bank.py", UNRELATED)
    assert [hit.path for hit in index.query(CURSOR_CODE)] == ["helpers.py"]
    query = (
        "from typing import List\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        '    """Check if in given list of numbers, are any two numbers closer to each other than threshold."""\n'
    )
    assert [hit.path for hit in index.query(query)] == []


def test_relevance_bar_keeps_code_like_the_cursors() -> None:
    """A window holding most of the query's rare names is relevant without defining any of them (a sibling)."""
    index = SnippetIndex(chunk_lines=20, stride=10)
    index.add_document("bank.py", UNRELATED)
    query = "def above_zero(operations: List[int]) -> bool:\n    balance = 0\n    for op in operations:\n"
    assert [hit.path for hit in index.query(query)] == ["bank.py"]


def test_defined_names() -> None:
    code = (
        "class Parser:\n    def parse_line(self, s):\n        local = 1\n"
        "MAX_SIZE = 3\nconst limit = 4;\n  public static int countAll(int[] xs) {\n    return helper(xs);\n"
    )
    assert defined_names(code) == {"parser", "parse_line", "max_size", "limit", "countall"}


def test_relevance_bar_reads_code_not_prose() -> None:
    """Two documented functions share the words of their comments; that alone does not let one's window into
    the other's prompt. The same names in code do."""
    index = SnippetIndex(chunk_lines=20, stride=10)
    other = "// Return the given array of integers sorted, the smallest first.\nfunction sort_array(arr){\n"
    index.add_document("other.js", other + "  return arr.sort();\n}\n")
    query = "// Return the given array of integers, the smallest first.\nfunction smallest_first(values){\n"
    assert index.query(query, exclude_path="cursor.js") == []
    code = "function smallest_first(values){\n  const arr = values.slice();\n  return sort_array(arr);\n"
    assert [hit.path for hit in index.query(code, exclude_path="cursor.js")] == ["other.js"]


JAVA_HEADER = "import java.util.*;\nimport java.math.*;\nimport java.util.stream.*;\nclass Problem {\n"


def _java_file(method: str) -> str:
    return (
        JAVA_HEADER
        + f"    public static ArrayList<Long> {method}(ArrayList<Long> values) {{\n        return values;\n    }}\n}}\n"
    )


def test_relevance_bar_skips_what_most_files_hold() -> None:
    """Imports and a class header that most files share do not make a file relevant once the workspace has
    COMMON_MIN_FILES other files (a project's boilerplate); a small workspace keeps them, and a file holding the
    cursor's own rare name still gets in."""
    query = JAVA_HEADER + "    public static ArrayList<Long> incrList(ArrayList<Long> values) {\n        for (\n"
    names = [f"method{chr(ord('a') + i)}" for i in range(COMMON_MIN_FILES)]
    index = SnippetIndex()
    for name in names[:2]:
        index.add_document(f"{name}.java", _java_file(name))
    assert len(index.query(query, exclude_path="Incr.java")) == 2  # two files: nothing is known to be common
    for name in names[2:]:
        index.add_document(f"{name}.java", _java_file(name))
    assert index.query(query, exclude_path="Incr.java") == []  # only what every file holds is shared
    index.add_document("Helper.java", _java_file("incrList").replace("values;", "values.stream().map(x -> x + 1);"))
    assert [hit.path for hit in index.query(query, exclude_path="Incr.java")] == ["Helper.java"]
    index.remove_document("Helper.java")
    assert index.query(query, exclude_path="Incr.java") == []  # the counts follow a removal
