"""Greedy's second completion where the first one's first line was wrong, recorded for replay.py: at each bench hole
whose middle spans lines, greedy completes (the first completion); where its text does not begin with the real
first line, the user types that line (the held ghost text cannot be typed through) and greedy completes again
at the start of the next line. Records the second completion as record.py records a hole, with the first
completion's tokens (``previous``) and the hole it came from (``hole1``). argv as record.py's."""

import sys

from record import Recorder  # this folder's
from replay import retyped

recorder = Recorder(sys.argv[2:])
rows = []
for hole in recorder.holes:
    second = retyped(hole)
    if second is None:
        continue
    _, first = recorder.complete(hole)
    typed = hole.middle[: len(hole.middle) - len(second.middle)]
    if recorder.loaded.tokenizer.decode(first.token_ids).startswith(typed):
        continue  # the first line was right: typing it goes through the held ghost text, no second completion
    inputs, out = recorder.complete(second)
    rows.append({**recorder.row(second.id, inputs, out), "hole1": hole.id, "previous": list(first.token_ids)})
    print(hole.id, len(first.token_ids), len(out.token_ids), file=sys.stderr)
recorder.write(sys.argv[1], rows)
