"""Run by the role ON THE CONTROLLER: read a tunehost wheel and print, as one JSON object, what the hosts need to
install it: its name, version, sha256 and the requirements it declares (without the optional extras).

    python wheel_info.py WHEEL

Refuses (exit 1, one line on stderr) anything that is not a wheel of the distribution `tunehost-llama`: a package
name, a wheel of another project (PyPI's `tunehost` is an unrelated project), or one that declares tunehost itself
as a requirement (that would be resolved from an index). The sha256 it prints is what each host checks its copy
against before installing it (or the role's tunehost_wheel_sha256, when given).
Standard library only: it runs with whatever Python runs ansible-playbook.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

DISTRIBUTION = "tunehost-llama"
# names that must never be installed from an index on the hosts (PEP 503 normalised)
OWN_NAMES = ("tunehost", "tunehost-llama")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def fail(message: str) -> int:
    print(f"tunehost role: {message}", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        return fail("usage: wheel_info.py WHEEL")
    path = Path(argv[0])
    if not path.name.endswith(".whl"):
        return fail(f"{argv[0]!r} is not a wheel file: the role installs only a wheel built from a tunehost "
                    "checkout, never a package name from an index")
    if not path.is_file():
        return fail(f"no wheel at {path} on the controller")
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    sha256 = digest.hexdigest()
    try:
        with zipfile.ZipFile(path) as wheel:
            metadata = [n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(metadata) != 1:
                return fail(f"{path.name} is not a wheel: {len(metadata)} .dist-info/METADATA files")
            headers = HeaderParser().parsestr(wheel.read(metadata[0]).decode("utf-8", "replace"))
    except (OSError, zipfile.BadZipFile) as error:
        return fail(f"{path.name} cannot be read as a wheel: {error}")
    name = headers.get("Name") or ""
    if normalise(name) != DISTRIBUTION:
        return fail(f"{path.name} is a wheel of {name!r}, not of {DISTRIBUTION} (tunehost's distribution; PyPI's "
                    "`tunehost` is an unrelated project): nothing installed")
    requires = []
    for requirement in headers.get_all("Requires-Dist") or ():
        spec, _, marker = requirement.partition(";")
        if re.search(r"\bextra\s*==", marker):
            continue  # an optional extra (test): not installed on the hosts
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        if match is None:
            return fail(f"{path.name} declares a requirement that cannot be read: {requirement[:120]!r}")
        if normalise(match.group(1)) in OWN_NAMES:
            return fail(f"{path.name} requires {match.group(1)!r}, which would come from an index: refused")
        requires.append(requirement.strip())
    print(json.dumps({"file": str(path.resolve()), "name": DISTRIBUTION, "version": headers.get("Version"),
                      "sha256": sha256, "requires": requires}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
