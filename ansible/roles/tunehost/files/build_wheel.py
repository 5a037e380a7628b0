"""Run by the role ON THE CONTROLLER: build the wheel of a tunehost checkout into OUT and print its path.

    python build_wheel.py CHECKOUT OUT

The checkout's files are copied to OUT/src first (what git tracks or would track; without git, everything but
virtualenvs, build outputs and caches), so that a stale build/ or *.egg-info left in the checkout never ends up in
the wheel, and the checkout itself is left as it was. Then `pip wheel --no-deps` builds it (pip fetches the build
backend, setuptools, as the checkout's pyproject.toml asks). Standard library only.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

SKIPPED = {".git", ".venv", "venv", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis", ".tox"}


def tracked_files(root: Path) -> list[Path] | None:
    """The files git tracks or would track, or None where the checkout is not a git work tree."""
    if shutil.which("git") is None or not (root / ".git").exists():
        return None
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, check=False, timeout=120)
    if listed.returncode != 0:
        return None
    return [root / rel for rel in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if rel]


def all_files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file() and not path.is_symlink()
            and not any(part in SKIPPED or part.endswith(".egg-info") for part in path.relative_to(root).parts)]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: build_wheel.py CHECKOUT OUT", file=sys.stderr)
        return 2
    root, out = Path(argv[0]).resolve(), Path(argv[1])
    if not (root / "pyproject.toml").is_file() or not (root / "tunehost" / "__init__.py").is_file():
        print(f"tunehost role: {root} is not a tunehost checkout (no pyproject.toml and tunehost/)", file=sys.stderr)
        return 1
    src = out / "src"
    for path in tracked_files(root) or all_files(root):
        if path.is_file():
            target = src / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
                            "--quiet", "--wheel-dir", str(out), str(src)], stdin=subprocess.DEVNULL, check=False)
    if built.returncode != 0:
        print(f"tunehost role: pip wheel failed on {root} (exit {built.returncode})", file=sys.stderr)
        return 1
    wheels = sorted(out.glob("tunehost_llama-*.whl"))
    if len(wheels) != 1:
        print(f"tunehost role: pip wheel left {len(wheels)} tunehost_llama wheels in {out}", file=sys.stderr)
        return 1
    shutil.rmtree(src)
    print(wheels[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
