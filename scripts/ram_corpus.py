#!/usr/bin/env python3
"""ram-speed at scale on linuxhw/DMI (https://github.com/linuxhw/DMI: real `dmidecode` dumps uploaded by hw-probe
users), so the figures in docs/checks.md (ram-speed) can be reproduced.

    # 1. memory sections of every dump under the chosen top folders -> a JSON-lines cache (minutes, one pass)
    python scripts/ram_corpus.py extract /path/to/linuxhw+DMI/repo --out /tmp/dmi-mem.jsonl
    # 2. part-number coverage of the DIMMs (by count), with today's decoder or one from an older commit
    python scripts/ram_corpus.py coverage /tmp/dmi-mem.jsonl [--decoder-rev 8304653]
    # 3. ram-speed on every dump (or a seeded sample): verdict counts, crashes (must be 0), runtime
    python scripts/ram_corpus.py judge /tmp/dmi-mem.jsonl [--sample 5000 --seed 10]
    # 4. a seeded random sample written as fixtures (memory sections only) for hand labelling
    python scripts/ram_corpus.py sample /tmp/dmi-mem.jsonl --n 160 --seed 2026 --out tests/data/linuxhw_dmi
    # 5. agreement of ram-speed with the hand labels in tests/data/linuxhw_dmi/labels.json
    python scripts/ram_corpus.py agree tests/data/linuxhw_dmi

The mirror is a bare git directory (`git clone --bare`, or the search tool's fetch); blobs are read with
`git cat-file --batch`, no work tree is checked out. Only dumps under "Desktop/" are used unless --prefix says more.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
import traceback
import types
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# SMBIOS types kept from a full dump: 3 chassis, 4 processor (memory-controller limits), 16 array, 17 device
KEEP_TYPES = {"3", "4", "16", "17"}
_HANDLE = re.compile(r"^Handle 0x[0-9A-Fa-f]+, DMI type (\d+),", re.M)


def memory_sections(dump: str) -> str:
    """The dmidecode header line plus the type 3/4/16/17 blocks of a full dump, verbatim."""
    head = dump.split("\n", 1)[0] if dump.startswith("# dmidecode") else "# dmidecode (version not recorded)"
    blocks = re.split(r"\n(?=Handle 0x)", dump)
    kept = [b.rstrip("\n") for b in blocks if (m := _HANDLE.match(b)) and m[1] in KEEP_TYPES]
    return head + "\n\n" + "\n\n".join(kept) + "\n"


def _git_paths(mirror: str, prefixes: list[str]) -> list[tuple[str, str]]:
    out = subprocess.run(["git", "--git-dir", mirror, "ls-tree", "-r", "-z", "HEAD"], check=True,
                         capture_output=True).stdout.decode("utf-8", "replace")
    rows = []
    for entry in out.split("\0"):
        if not entry:
            continue
        meta, _, path = entry.partition("\t")
        kind, sha = meta.split()[1:3]
        if kind == "blob" and any(path.startswith(p + "/") for p in prefixes):
            rows.append((path, sha))
    return rows


def extract(args) -> None:
    rows = _git_paths(args.mirror, args.prefix)
    head = subprocess.run(["git", "--git-dir", args.mirror, "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    start = time.time()
    proc = subprocess.Popen(["git", "--git-dir", args.mirror, "cat-file", "--batch"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    with open(args.out, "w") as out:
        out.write(json.dumps({"mirror_head": head, "prefixes": args.prefix, "dumps": len(rows)}) + "\n")
        for i, (path, sha) in enumerate(rows):
            proc.stdin.write(sha.encode() + b"\n")
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            size = int(header[2])
            data = proc.stdout.read(size + 1)[:size].decode("utf-8", "replace")
            out.write(json.dumps({"path": path, "text": memory_sections(data)}) + "\n")
            if i % 5000 == 0:
                print(f"{i}/{len(rows)} {time.time() - start:.0f}s", file=sys.stderr)
    proc.stdin.close()
    proc.wait()
    print(f"{len(rows)} dumps from {args.mirror} at {head} in {time.time() - start:.0f}s -> {args.out}")


def load(cache: str):
    with open(cache) as f:
        meta = json.loads(f.readline())
        rows = [json.loads(line) for line in f]
    return meta, rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("extract")
    p.add_argument("mirror")
    p.add_argument("--out", required=True)
    p.add_argument("--prefix", action="append", default=None, help="top folder (default: Desktop)")
    args = parser.parse_args()
    if getattr(args, "prefix", "x") is None:
        args.prefix = ["Desktop"]
    {"extract": extract}[args.cmd](args)
