#!/usr/bin/env python3
"""The shape of the code: the longest functions and the functions that take more than six inputs.

    python scripts/code_shape.py            # tunehost/ and checks/
    python scripts/code_shape.py --top 20 --json

House style (DEVELOPERS.md): a function that needs more than about six inputs takes a small frozen dataclass.
The CLI's command functions are listed apart: their parameters are the command's options, parsed by typer.
Only the standard library's `ast` is used, so anyone can run it from a fresh clone.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_INPUTS = 6


def functions(paths: list[Path]):
    for path in paths:
        for file in sorted(path.rglob("*.py")):
            tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = node.args
                    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg not in ("self", "cls")]
                    yield {
                        "where": f"{file.relative_to(ROOT)}:{node.name}",
                        "lines": node.end_lineno - node.lineno + 1,
                        "inputs": len(names),
                        "cli": file.relative_to(ROOT).parts[:2] == ("tunehost", "cli"),
                    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = list(functions([ROOT / "tunehost", ROOT / "checks"]))
    longest = sorted(rows, key=lambda r: -r["lines"])[: args.top]
    many = sorted((r for r in rows if r["inputs"] > MAX_INPUTS), key=lambda r: -r["inputs"])
    out = {
        "functions": len(rows),
        "longest": longest,
        "over_six_inputs": [r for r in many if not r["cli"]],
        "cli_commands_over_six_options": [r for r in many if r["cli"]],
    }
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    print(f"{out['functions']} functions")
    print(f"longest {args.top}:")
    for r in longest:
        print(f"  {r['lines']:4d} lines  {r['where']}")
    print(f"over {MAX_INPUTS} inputs, below the CLI: {len(out['over_six_inputs'])}")
    for r in out["over_six_inputs"]:
        print(f"  {r['inputs']:4d} inputs {r['where']}")
    print(f"CLI commands with over {MAX_INPUTS} options (typer): {len(out['cli_commands_over_six_options'])}")
    for r in out["cli_commands_over_six_options"]:
        print(f"  {r['inputs']:4d} inputs {r['where']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
