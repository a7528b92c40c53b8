"""Convert Qwen2.5-Coder's ``hm_fim/data/train.parquet`` into the compact per-language files vendored here.

Run once, by hand (the project's runtime reads only the JSON lines this writes, never the parquet):

    pip install pyarrow   # anywhere; only this script needs it
    git -C <Qwen2.5-Coder mirror> show HEAD:qwencoder-eval/base/benchmarks/fim-bench/hm_fim/data/train.parquet \
        > /tmp/train.parquet
    python scripts/convert-hm-fim.py /tmp/train.parquet evaluation/data

The parquet holds one row per single-line hole (columns ``name``, ``language``, ``prompt``, ``suffix``,
``canonical_solution``, ``tests``); ``name`` is ``humaneval-HumanEval_<n>_<entry>.json-L<line>``. Rows are
grouped by problem into one JSON line per problem: ``{"name", "language", "tests", "holes": [{"line",
"prompt", "middle", "suffix"}, ...]}``, the holes in line order, every text exactly as the parquet has it (the
loader in ``evaluation/infill_suites.py`` applies the cursor convention). Languages written: js, java (Python
comes from OpenAI's human-eval-infilling instead). The gzip header carries no time stamp, so a rerun writes the
same bytes.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

LANGUAGES = ("js", "java")


def grouped(rows: list[dict[str, Any]], language: str) -> list[dict[str, Any]]:
    """One record per problem of ``language``, problems and holes in order."""
    problems: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["language"] == language:
            problems[row["name"].rsplit("-L", 1)[0]].append(row)
    records = []
    for name, holes in sorted(problems.items(), key=lambda item: _problem_number(item[0])):
        tests = {row["tests"] for row in holes}
        if len(tests) != 1:
            raise ValueError(f"{name}: its rows carry different tests")
        ordered = sorted(holes, key=lambda row: int(row["name"].rsplit("-L", 1)[1]))
        records.append(
            {
                "name": name.removeprefix("humaneval-").removesuffix(".json"),
                "language": language,
                "tests": tests.pop(),
                "holes": [
                    {
                        "line": int(row["name"].rsplit("-L", 1)[1]),
                        "prompt": row["prompt"],
                        "middle": row["canonical_solution"],
                        "suffix": row["suffix"],
                    }
                    for row in ordered
                ],
            }
        )
    return records


def _problem_number(name: str) -> int:
    """``humaneval-HumanEval_59_largest_prime_factor.json`` -> 59."""
    return int(name.split("HumanEval_", 1)[1].split("_", 1)[0])


def write_jsonl_gz(records: list[dict[str, Any]], path: Path) -> None:
    data = "".join(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n" for record in records)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as out:
        out.write(data.encode("utf-8"))


def main(argv: list[str]) -> int:
    import pyarrow.parquet as pq  # only this one-off conversion needs pyarrow

    source, out_dir = Path(argv[0]), Path(argv[1])
    rows = pq.read_table(source).to_pylist()
    for language in LANGUAGES:
        records = grouped(rows, language)
        path = out_dir / f"humaneval-fim-{language}.jsonl.gz"
        write_jsonl_gz(records, path)
        holes = sum(len(r["holes"]) for r in records)
        print(f"{path}: {len(records)} problems, {holes} holes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
