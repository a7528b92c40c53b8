"""Instructions of one tile-group (8 weight rows x 32 weights = 256 weights) in the native kernel's product loop
(decoder/kernels/woq_kernel.cpp: block<LAYOUT, MT>, MT rows of the pass), read from objdump of a built library:
the group loop (the backward branch that spans the most code) walked once along the path that scale mode MODE
takes (the switch's compares against MODE evaluated, the prefetch loop run its count of 64-byte lines).
Prints the count, the count per row and the most frequent mnemonics. Usage: loops.py OBJDUMP LIBRARY LAYOUT MODE MT
(run.sh builds the libraries and prints the table)."""
import re
import subprocess
import sys

objdump, library, layout, mode, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
block_bytes = {0: 16, 1: 32, 2: 64, 3: 48}[mode] + {4: 128, 5: 160, 8: 256}[layout]
symbol = f"_Z5blockILi{layout}ELi{rows}EEvRK5TiledlRK11Activationsl"
text = subprocess.run([objdump, "-d", "--no-show-raw-insn", library], capture_output=True, text=True).stdout
body = text.split(f"<{symbol}>:\n", 1)[1].split("\n\n", 1)[0]
code = []
for line in body.splitlines():
    m = re.match(r"\s*([0-9a-f]+):\s+(\S+)\s*(.*)", line)
    if m:
        code.append((int(m.group(1), 16), m.group(2), m.group(3)))
at = {addr: i for i, (addr, _, _) in enumerate(code)}
CONDITIONAL = re.compile(r"^(j(?!mp)[a-z]+|b\.[a-z]+|cbz|cbnz|tbz|tbnz)$")
def target(ops):
    m = re.search(r"\b([0-9a-f]+) <", ops)
    return int(m.group(1), 16) if m else None
DOTS = re.compile(r"\b(vpdpbusd|vpmaddubsw|sdot|usdot|usmmla)\b")
# the group loop: of the backward conditional branches, the one whose span holds the most integer dots (the
# innermost such: the shortest span)
backs = [i for i, (a, op, ops) in enumerate(code) if CONDITIONAL.match(op) and target(ops) is not None and target(ops) < a]
def dots(i):
    return sum(1 for a, op, ops in code[at[target(code[i][2])] : i] if DOTS.search(f"{op} {ops}"))
back = max(backs, key=lambda i: (dots(i), -(code[i][0] - target(code[i][2]))))
head = at[target(code[back][2])]
prefetch_runs = (block_bytes + 63) // 64
i, count, last_imm, loops = head, 0, None, {}
mnemonics = {}
while True:
    addr, op, ops = code[i]
    count += 1
    mnemonics[op] = mnemonics.get(op, 0) + 1
    if i == back:
        break
    imm = re.search(r"(?:\$0x|#0x|#)([0-9a-f]+)", ops) if op in ("cmp", "cmpl", "cmpq") else None
    if imm:
        last_imm = int(imm.group(1), 16) if "0x" in ops else int(imm.group(1))
    t = target(ops)
    if CONDITIONAL.match(op) and t is not None:
        if t < addr:  # an inner loop (the prefetches): taken until it has run its count
            loops[addr] = loops.get(addr, 0) + 1
            i = at[t] if loops[addr] < prefetch_runs else i + 1
            continue
        taken = {"je": last_imm == mode, "b.eq": last_imm == mode, "jne": last_imm != mode, "b.ne": last_imm != mode,
                 "cbz": mode == 0, "cbnz": mode != 0}.get(op)
        if taken is None:  # a forward branch that skips an inner loop of no runs: never taken here
            taken = False
        i = at[t] if taken else i + 1
        continue
    if op in ("jmp", "b") and t is not None:
        i = at[t]
        continue
    i += 1
top = sorted(mnemonics.items(), key=lambda kv: -kv[1])[:6]
print(f"| {library.rsplit('/', 1)[-1].removesuffix('.so')} | {layout} | {rows} | {count} | {count / rows:.1f} | "
      + ", ".join(f"{k} {v}" for k, v in top) + " |")
