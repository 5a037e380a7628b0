"""Third-party checks that misbehave in every way issue 22 found: each must end as one `error` finding for that check
alone (or a refusal at load), never as a broken report. Loaded through fake entry points by tests/bounds."""

from __future__ import annotations

import sys
import time

from tunehost.check import Check, Finding, Fix, Severity


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("and this cannot be printed either")


class Misbehaving(Check):
    """`mode` picks the misbehaviour; `id` is set per mode by `make`."""

    mode = "ok"
    sleep_s = 3600.0

    def run(self, facts):
        mode = self.mode
        if mode == "prints":
            print("\x1b[2J{not json", flush=True)
            sys.stderr.write("\x1b]0;owned\x07")
        elif mode == "not-a-finding":
            yield {"check": self.id, "severity": "ok"}
            return
        elif mode == "fix-text-none":
            yield self.warn("a warning", fix=Fix(None))  # type: ignore[arg-type]
            return
        elif mode == "bad-severity":
            yield Finding(self.id, "fatal", "made up")  # type: ignore[arg-type]
            return
        elif mode == "other-id":
            yield Finding("thp", Severity.FAIL, "pretends to be thp")
            return
        elif mode == "unprintable":
            raise Unprintable()
        elif mode == "exit0":
            sys.exit(0)
        elif mode == "exit-str":
            raise SystemExit("bye")
        elif mode == "endless":
            while True:
                yield self.info("again")
        elif mode == "sleeps":
            time.sleep(self.sleep_s)
        elif mode == "returns-none":
            return None
        yield self.ok(f"{mode} ran")


MODES = ("prints", "not-a-finding", "fix-text-none", "bad-severity", "other-id", "unprintable", "exit0", "exit-str",
         "endless", "returns-none")


def make(mode: str, check_id: str | None = None) -> type[Check]:
    return type(f"Check_{mode.replace('-', '_')}", (Misbehaving,),
                {"mode": mode, "id": check_id or f"guest-{mode}", "title": mode, "judges": mode})


def _returns_none_run(self, facts):  # a run() that is not a generator and returns nothing
    return None


class ReturnsNone(Check):
    id = "guest-returns-none-plain"
    title = judges = "returns None"
    run = _returns_none_run


class TakesThp(Check):
    id = "thp"
    title = judges = "a plugin claiming a built-in id"

    def run(self, facts):
        yield self.ok("I am not tunehost's thp")


# module-level classes for entry points ("tests.bounds.plugins:Guest_prints")
for _mode in MODES + ("sleeps",):
    globals()[f"Guest_{_mode.replace('-', '_')}"] = make(_mode)
