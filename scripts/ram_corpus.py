#!/usr/bin/env python3
"""ram-speed at scale on linuxhw/DMI (https://github.com/linuxhw/DMI: real `dmidecode` dumps uploaded by hw-probe
users), so the figures in docs/checks.md (ram-speed) can be reproduced.

    # 1. memory sections of every dump under the chosen top folders -> a JSON-lines cache (minutes, one pass)
    python scripts/ram_corpus.py extract /path/to/linuxhw+DMI/repo --out /tmp/dmi-mem.jsonl
    # 2. part-number coverage of the DIMMs (by count), with today's decoder or one from an older commit
    python scripts/ram_corpus.py coverage /tmp/dmi-mem.jsonl [--decoder-rev 8304653] [--distinct-csv parts.csv]
    # 3. ram-speed on every dump (or a seeded sample): verdict counts, crashes (must be 0), runtime
    python scripts/ram_corpus.py judge /tmp/dmi-mem.jsonl [--sample 5000 --seed 10]
    # 4. a seeded random sample written as fixtures (memory sections only) for hand labelling
    python scripts/ram_corpus.py sample /tmp/dmi-mem.jsonl --n 160 --seed 2027 --out tests/data/linuxhw_dmi
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

# SMBIOS types kept from a full dump: 2 board (chipset limits), 3 chassis, 4 processor (memory-controller limits),
# 16 memory array, 17 memory device
KEEP_TYPES = {"2", "3", "4", "16", "17"}
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



def context(text: str) -> dict:
    """Chassis type, CPU model, populated CPU sockets and board name of a dump (the facts RamFacts.gather reads from
    /sys and /proc)."""
    from tunehost.facts.chassis import CHASSIS_NAMES
    names = {v.lower(): k for k, v in CHASSIS_NAMES.items()}
    found = {"chassis": None, "cpu": None, "board": None, "sockets": 0}
    for block in re.split(r"\n(?=Handle 0x)", text):
        m = _HANDLE.match(block)
        if not m:
            continue
        if m[1] == "3" and found["chassis"] is None:
            t = re.search(r"^\tType: (.+)$", block, re.M)
            found["chassis"] = names.get(t[1].strip().lower()) if t else None
        elif m[1] == "4":
            found["sockets"] += bool(re.search(r"^\tStatus: Populated", block, re.M))
            v = re.search(r"^\tVersion: (.+)$", block, re.M)
            if found["cpu"] is None:
                found["cpu"] = v[1].strip() if v and v[1].strip() not in ("Not Specified", "") else None
        elif m[1] == "2" and found["board"] is None:
            v = re.search(r"^\tProduct Name: (.+)$", block, re.M)
            found["board"] = v[1].strip() if v else None
    return found


# the chassis type a machine filed under each linuxhw top folder has, for dumps whose type 3 block is missing or odd
FOLDER_CHASSIS = {"Desktop": 3, "Notebook": 10, "Convertible": 31, "Tablet": 30, "Mini Pc": 35, "Stick Pc": 35,
                  "All In One": 13, "Server": 17, "System On Chip": 3, "Firewall": 3}


def judge_text(text: str, path: str = "Desktop/"):
    """ram-speed's findings on one dump, the way `tunehost doctor` would judge that machine."""
    from tunehost.checks.ram_speed import RamSpeedCheck
    from tunehost.facts import HostFacts
    from tunehost.facts.ram import RamFacts
    ctx = context(text)
    # linuxhw files a machine by its chassis: a missing/odd chassis type is judged as its folder's (Desktop: 3)
    chassis = ctx["chassis"] if ctx["chassis"] is not None else FOLDER_CHASSIS.get(path.split("/")[0], 3)
    facts = RamFacts.from_text(text, chassis_type=chassis, cpu_model=ctx["cpu"],
                               product=f"(board {ctx['board']})" if ctx["board"] else None,
                               sockets=ctx["sockets"] or None)
    return list(RamSpeedCheck().run(HostFacts.of(facts)))


def _decoder(rev: str | None):
    if not rev:
        import tunehost.facts.memory_parts as current
        return current
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:tunehost/facts/memory_parts.py"], check=True,
                         capture_output=True, text=True).stdout
    module = types.ModuleType(f"memory_parts_{rev}")
    sys.modules[module.__name__] = module
    exec(compile(src, f"{rev}:tunehost/facts/memory_parts.py", "exec"), module.__dict__)
    return module


def coverage(args) -> None:
    from tunehost.facts.ram import describe_module
    from tunehost.facts.memory_parts import module_family, module_vendor
    from tunehost.parsers.dmidecode import parse_dmidecode_memory
    old = _decoder(args.decoder_rev)
    meta, rows = load(args.cache)
    total: Counter = Counter()
    by_vendor: dict[str, Counter] = {}
    distinct = set()
    missed: Counter = Counter()
    for row in rows:
        for dev in parse_dmidecode_memory(row["text"]).installed:
            mod = describe_module(dev)
            gen = mod.mem_type if mod.mem_type in ("DDR3", "DDR4", "DDR5") else None
            if gen is None or (dev.form_factor or "").upper() != "DIMM" or dev.registered:
                continue
            distinct.add((dev.manufacturer, dev.part_number, dev.speed_mts, dev.configured_mts, dev.type))
            vendor = module_vendor(dev.manufacturer)
            group = "rated" if vendor and vendor[1] else "jedec-maker" if vendor else "unidentified"
            decoded = old.rated_speed(dev.part_number) is not None
            family = module_family(dev.part_number) if not args.decoder_rev else None
            for k in ((group, gen, "all"), (group, "ddr45" if gen in ("DDR4", "DDR5") else gen, "all")):
                total[k] += 1
                total[k[:2] + ("decoded",)] += decoded
                total[k[:2] + ("known",)] += decoded or bool(family and family.jedec)
                total[k[:2] + ("no part",)] += not dev.part_number
            if vendor and vendor[1] and gen in ("DDR4", "DDR5"):
                c = by_vendor.setdefault(vendor[0], Counter())
                c["all"] += 1
                c["decoded"] += decoded
                c["known"] += decoded or bool(family and family.jedec)
                if not decoded and not (family and family.jedec):
                    missed[(vendor[0], dev.part_number)] += 1
    if args.distinct_csv:
        import csv
        with open(args.distinct_csv, "w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["manufacturer", "part_number", "speed_mts", "configured_mts", "type", "decoded_mts"])
            for row in sorted(distinct, key=lambda r: tuple(str(x) for x in r)):
                rating = old.rated_speed(row[1])
                out.writerow([*row, rating.speed_mts if rating else ""])
    print(f"linuxhw/DMI {meta['mirror_head']} ({', '.join(meta['prefixes'])}), decoder "
          f"{args.decoder_rev or 'working tree'}: {len(distinct)} distinct (manufacturer, part, Speed, Configured, "
          f"type) of unbuffered DDR3/4/5 DIMMs")
    for group in ("rated", "jedec-maker", "unidentified"):
        for gen in ("ddr45", "DDR3"):
            n = total[(group, gen, "all")]
            if n:
                print(f"  {group:12s} {gen:5s}: {total[(group, gen, 'decoded')]}/{n} decoded by part number "
                      f"({100 * total[(group, gen, 'decoded')] / n:.1f} %), {total[(group, gen, 'known')]} with the "
                      f"JEDEC families; {total[(group, gen, 'no part')]} without a part number")
    print("  rated-kit vendors, DDR4/DDR5 DIMMs: vendor, decoded by part number / all, with the JEDEC families")
    for name, c in sorted(by_vendor.items(), key=lambda kv: -kv[1]["all"]):
        print(f"    {name:14s} {c['decoded']:6d}/{c['all']:<6d} {100 * c['decoded'] / c['all']:5.1f} %   "
              f"{c['known']:6d} {100 * c['known'] / c['all']:5.1f} %")
    if args.show_missed:
        for (vendor, part), n in missed.most_common(args.show_missed):
            print(f"    missed {n:5d} {vendor}: {part}")


def judge(args) -> None:
    from tunehost.facts.cpu_memory import cpu_memory
    meta, rows = load(args.cache)
    if args.sample:
        rows = random.Random(args.seed).sample(rows, min(args.sample, len(rows)))
    verdicts: Counter = Counter()
    per_class: dict[str, Counter] = {}
    known: Counter = Counter()
    reasons: Counter = Counter()
    unknown_cpus: Counter = Counter()
    crashes = []
    start = time.time()
    for row in rows:
        folder = row["path"].split("/")[0]
        cpu = context(row["text"])["cpu"]
        known[(folder, "all")] += 1
        known[(folder, "named")] += cpu is not None
        if cpu_memory(cpu) is not None:
            known[(folder, "known")] += 1
        elif cpu:
            unknown_cpus[" ".join(cpu.split())[:60]] += 1
        try:
            findings = judge_text(row["text"], row["path"])
        except Exception:  # noqa: BLE001 - counting crashes is the point
            crashes.append((row["path"], traceback.format_exc(limit=3)))
            continue
        first = findings[0].severity.value if findings else "none"
        verdicts[first] += 1
        per_class.setdefault(folder, Counter())[first] += 1
        if findings and findings[0].severity.value == "skip":
            reasons[re.sub(r"\d+", "N", findings[0].summary)[:90]] += 1
    wall = time.time() - start
    print(f"judged {len(rows)} dumps of linuxhw/DMI {meta['mirror_head']} in {wall:.1f}s: crashes {len(crashes)}; "
          f"first finding {dict(verdicts.most_common())}")
    total = Counter()
    for folder in sorted(per_class, key=lambda f: -known[(f, "all")]):
        n, named, hit = known[(folder, "all")], known[(folder, "named")], known[(folder, "known")]
        total.update({"all": n, "named": named, "known": hit})
        print(f"  {folder:15s} {n:6d} dumps: {dict(per_class[folder].most_common())}; CPU memory data knows "
              f"{hit} ({100 * hit / n:.1f} %; {100 * hit / max(named, 1):.1f} % of the {named} naming a CPU)")
    print(f"  CPU memory-limit data coverage: {total['known']}/{total['all']} dumps "
          f"({100 * total['known'] / max(total['all'], 1):.1f} %), {100 * total['known'] / max(total['named'], 1):.1f} "
          f"% of those naming a CPU")
    for reason, n in reasons.most_common(8):
        print(f"  skip x{n}: {reason}")
    if args.show_unknown:
        for name, n in unknown_cpus.most_common(args.show_unknown):
            print(f"  unknown CPU x{n}: {name}")
    for path, tb in crashes[:5]:
        print(f"CRASH {path}\n{tb}")


def sample(args) -> None:
    meta, rows = load(args.cache)
    from tunehost.parsers.dmidecode import parse_dmidecode_memory
    judged = [r for r in rows if parse_dmidecode_memory(r["text"]).installed]
    if args.per_prefix:  # a stratified sample: "Notebook=60,Mini Pc=35" draws that many from each top folder
        rng, picked = random.Random(args.seed), []
        for part in args.per_prefix.split(","):
            prefix, _, n = part.partition("=")
            pool = [r for r in judged if r["path"].startswith(prefix + "/")]
            picked += rng.sample(pool, min(int(n), len(pool)))
        picked.sort(key=lambda r: r["path"])
    else:
        picked = sorted(random.Random(args.seed).sample(judged, args.n), key=lambda r: r["path"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    listing = []
    for row in picked:
        name = row["path"].replace("/", "__").replace(" ", "_") + ".txt"
        (out / name).write_text(row["text"])
        listing.append({"path": row["path"], "file": name})
    (out / "sample.json").write_text(json.dumps({"mirror_head": meta["mirror_head"], "seed": args.seed,
                                                 "per_prefix": args.per_prefix,
                                                 "dumps": listing}, indent=1) + "\n")
    print(f"{len(picked)} dumps (seed {args.seed}) of {len(judged)} with installed memory -> {out}")


def agree(args) -> None:
    folder = Path(args.folder)
    labels = json.loads((folder / "labels.json").read_text())
    agree_n, rows, crashes = 0, [], 0
    per: dict[str, Counter] = {}
    for entry in labels["labels"]:
        cls = per.setdefault(entry["path"].split("/")[0], Counter())
        cls["all"] += 1
        try:
            got = [f.severity.value for f in judge_text((folder / entry["file"]).read_text(), entry["path"])]
        except Exception:  # noqa: BLE001 - a crash is counted, not fatal
            crashes += 1
            rows.append(f"  CRASH {entry['file']}: {traceback.format_exc(limit=2)}")
            continue
        ok = got == entry["expert"]
        agree_n += ok
        cls["agree"] += ok
        if not ok:
            rows.append(f"  {entry['file']}: expert {entry['expert']}, tunehost {got} — "
                        f"{entry.get('why', entry.get('reason', ''))}")
    print(f"agreement {agree_n}/{len(labels['labels'])}, crashes {crashes}; "
          + ", ".join(f"{k} {c['agree']}/{c['all']}" for k, c in sorted(per.items())))
    if args.verbose:
        print("\n".join(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("extract")
    p.add_argument("mirror")
    p.add_argument("--out", required=True)
    p.add_argument("--prefix", action="append", default=None, help="top folder (default: Desktop)")
    p = sub.add_parser("coverage")
    p.add_argument("cache")
    p.add_argument("--decoder-rev", help="judge with tunehost/facts/memory_parts.py from this git revision (before/after)")
    p.add_argument("--show-missed", type=int, default=0)
    p.add_argument("--distinct-csv", help="write every distinct (manufacturer, part, Speed, Configured, type) here")
    p = sub.add_parser("judge")
    p.add_argument("cache")
    p.add_argument("--sample", type=int, default=0)
    p.add_argument("--seed", type=int, default=10)
    p.add_argument("--show-unknown", type=int, default=0, help="list the N most common CPUs the data does not know")
    p = sub.add_parser("sample")
    p.add_argument("cache")
    p.add_argument("--n", type=int, default=160)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--per-prefix", help='stratified: "Notebook=60,Mini Pc=35,..." (top folder=count)')
    p.add_argument("--out", required=True)
    p = sub.add_parser("agree")
    p.add_argument("folder")
    p.add_argument("-v", "--verbose", action="store_true", help="list every disagreement")
    args = parser.parse_args()
    if getattr(args, "prefix", "x") is None:
        args.prefix = ["Desktop"]
    {"extract": extract, "coverage": coverage, "judge": judge, "sample": sample, "agree": agree}[args.cmd](args)
