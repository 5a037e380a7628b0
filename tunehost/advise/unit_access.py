"""Whether a systemd unit's user can reach every file the unit needs, before the unit is handed out.

A system unit runs llama-server as an unprivileged user: `DynamicUser=yes` (a user allocated at start, in no group
but the unit's SupplementaryGroups=, owning no file; systemd gives it its own /tmp and /var/tmp, PrivateTmp=yes), or
`User=NAME` (`advise --service-user NAME`: that account's uid and groups). A user unit runs as you. The kernel walks
every directory from / down to a file: each needs search (x) permission for that user, and the file itself read
(a model, the preset) or execute (llama-server) permission; a directory the router scans needs read and search.
Permission bits are judged as the kernel does (owner bits for the owner, else group bits for a member, else the
others' bits). POSIX ACLs and security modules (SELinux, AppArmor) are not read: an ACL that grants access makes a
refusal here a false alarm, one that denies it goes unseen.

The modes come from the host layer (tunehost.host.access): on a snapshot nothing is known and the report says
"not checked". What to do when a file is out of reach (`fixes`): copy it to a shared place (/opt/llama.cpp/bin,
/srv/models, /etc/llama.cpp) with the exact commands, or run the unit as an account that can read it.
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tunehost.host.access import PathEntry, path_chain

if TYPE_CHECKING:
    from tunehost.host import Host
    from tunehost.launch import LaunchConfig

SHARED_BIN = "/opt/llama.cpp/bin/llama-server"
SHARED_MODELS = "/srv/models"
SHARED_CONFIG = "/etc/llama.cpp"
PRIVATE_DIRS = ("/tmp", "/var/tmp")  # PrivateTmp=yes (implied by DynamicUser=yes) hides the host's copies

# what a needed path is for -> the advise option that names it
OPTION_OF = {"llama-server": "--llama-server", "the model": "--model", "the draft model": "--draft",
             "the vision projector": "--mmproj", "the models directory": "--models-dir",
             "the preset file": "--preset-file", "the API key file": "--api-key-file"}


@dataclass(frozen=True)
class Needed:
    """One path the unit needs. `kind`: "exec" (run it), "read" (read it), "dir" (list it and what is in it),
    "create" (a file to be saved there: its directory must be reachable; it is written world-readable),
    "credential" (read by the service manager as root: LoadCredential=)."""

    what: str
    path: str
    kind: str


@dataclass(frozen=True)
class RunAs:
    """Who the unit runs as. `uid` None: a dynamic user, which owns no file."""

    label: str
    uid: int | None
    gids: frozenset[int]
    private_tmp: bool = False
    dynamic: bool = False


@dataclass(frozen=True)
class Blocked:
    needed: Needed
    why: str


@dataclass(frozen=True)
class AccessReport:
    """`checked` False: the host could not say (a snapshot records no modes); `reason` says so."""

    run_as: RunAs
    checked: bool
    blocked: tuple[Blocked, ...] = ()
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.checked and not self.blocked


def _describe(e: PathEntry) -> str:
    assert e.mode is not None
    return f"{e.path} is {stat.filemode(e.mode)} owner uid {e.uid} group gid {e.gid}"


def _may(e: PathEntry, who: RunAs, bits: int) -> bool:
    """Whether `who` has all of `bits` (4 read, 1 execute/search) on `e`, as the kernel decides without ACLs."""
    assert e.mode is not None
    if who.uid == 0:  # root: everything, except running a file nobody may execute
        return not (bits & 1) or e.is_dir or bool(e.mode & 0o111)
    if who.uid is not None and e.uid == who.uid:
        shift = 6
    elif e.gid in who.gids:
        shift = 3
    else:
        shift = 0
    return (e.mode >> shift) & bits == bits


def _blocked(chain: list[PathEntry], need: Needed, who: RunAs) -> str | None:
    target = os.path.normpath(os.path.dirname(need.path) if need.kind == "create" else need.path)
    finals = {target, os.path.realpath(target)}
    if who.private_tmp and any(e.path in PRIVATE_DIRS for e in chain):
        return ("DynamicUser=yes gives the service its own /tmp and /var/tmp (PrivateTmp=yes): "
                "it never sees files there")
    for e in chain:
        final = e.path in finals
        if e.mode is None and need.kind == "create" and e.error == "does not exist":
            return None  # created with mode 0755 where the file is saved (advise --write does)
        if e.mode is None:
            return f"{e.path} {e.error}"
        if final and need.kind in ("dir", "create") and not e.is_dir:
            return f"{e.path} is not a directory"
        if final and need.kind == "exec":
            if not stat.S_ISREG(e.mode):
                return f"{e.path} is not a regular file"
            if not _may(e, who, 1):
                return f"{_describe(e)}: not executable for it"
        elif final and need.kind == "read":
            if not stat.S_ISREG(e.mode):
                return f"{e.path} is not a regular file"
            if not _may(e, who, 4):
                return f"{_describe(e)}: not readable for it"
        elif final and need.kind == "dir":
            if not _may(e, who, 5):
                return f"{_describe(e)}: not listable for it"
        elif e.is_dir and not _may(e, who, 1):
            return f"{_describe(e)}: it may not enter it (no x)"
    return None


def check_access(host: "Host", needs: list[Needed], who: RunAs) -> AccessReport:
    """Which of `needs` the unit's user cannot reach (all of them looked at), or not checked on a snapshot."""
    out = []
    for need in needs:
        target = os.path.dirname(need.path) if need.kind == "create" else need.path
        chain = path_chain(host, target)
        if chain is None:
            why = ("a snapshot records no file modes" if not host.live else
                   f"{need.path} cannot be walked (not an absolute path, or too deep)")
            return AccessReport(who, False, reason=f"paths not checked for {who.label}: {why}")
        if need.kind == "credential":  # LoadCredential=: the service manager reads it, as root
            why = _blocked(chain, replace(need, kind="read"), RunAs("the service manager", 0, frozenset()))
        else:
            why = _blocked(chain, need, who)
        if why is not None:
            out.append(Blocked(need, why))
    return AccessReport(who, True, tuple(out))


def _copy(b: Blocked) -> tuple[str | None, str | None]:
    """The command that copies one blocked file to a shared place, and the advise option that then names it."""
    q = shlex.quote
    need = b.needed
    name = os.path.basename(need.path.rstrip("/")) or "model"
    if need.what == "llama-server":
        return f"install -D -m 755 {q(need.path)} {SHARED_BIN}", f"--llama-server {SHARED_BIN}"
    if need.what == "the models directory":
        dest = f"{SHARED_MODELS}/{name}"
        return (f"install -d -m 755 {SHARED_MODELS} && cp -r {q(need.path)} {q(dest)} && chmod -R a+rX {q(dest)}",
                f"--models-dir {q(dest)}")
    if need.what in ("the model", "the draft model", "the vision projector"):
        dest = f"{SHARED_MODELS}/{name}"
        if "-00001-of-" in name:  # a split model: every part, beside the first (llama.cpp finds them there)
            stem, _, rest = need.path.rpartition("-00001-of-")
            return (f"install -D -m 644 -t {SHARED_MODELS} {q(stem)}-*-of-{q(rest)}",
                    f"{OPTION_OF[need.what]} {q(dest)}")
        return f"install -D -m 644 {q(need.path)} {q(dest)}", f"{OPTION_OF[need.what]} {q(dest)}"
    if need.what == "the preset file":
        return f"install -d -m 755 {SHARED_CONFIG}", f"--preset-file {SHARED_CONFIG}/models.ini"
    return None, None


def fixes(report: AccessReport) -> str:
    """One line: what is out of reach and why, then what to do (the commands to copy each file to a shared place
    and the options that then name it, or an account that can read them)."""
    dirs = [b.needed.path.rstrip("/") + "/" for b in report.blocked if b.needed.what == "the models directory"]
    shown = [b for b in report.blocked  # a model inside a blocked models directory goes with it
             if b.needed.what == "the models directory" or not any(b.needed.path.startswith(d) for d in dirs)]
    head = "; ".join(f"{b.needed.what} {b.needed.path} ({b.why})" for b in shown)
    missing = [b for b in shown if b.why.endswith("does not exist")]
    copies = [c for c in (_copy(b) for b in shown if b not in missing) if c[0]]
    secret = any(b.needed.what == "the API key file" for b in report.blocked)
    ways = []
    if missing:
        ways.append("Put what is missing in place, or name where it is: "
                    + ", ".join(dict.fromkeys(f"{OPTION_OF.get(b.needed.what, b.needed.what)} PATH" for b in missing)))
    if copies:
        ways.append(("Either c" if not ways else "c") + "opy them where any account can read them (as root): "
                    + "; ".join(c for c, _ in copies) + "; then run advise again with "
                    + " ".join(o for _, o in copies if o))
    if report.run_as.dynamic or report.run_as.uid is not None:
        ways.append(("or" if ways else "Or") + " run the service as " + ("an existing" if report.run_as.dynamic
                                                                         else "another") +
                    " unprivileged account that can read them: --service-user NAME "
                    "(User=NAME, checked the same way)" + ("; never make an API key file world-readable" if secret
                                                             else ""))
    return (f"the unit would fail at start: {report.run_as.label} cannot reach {head}. "
            + ("; ".join(ways) if ways else "Make them readable for the account the unit runs as"))




DEFAULT_UNIT_SERVER = "/usr/local/bin/llama-server"  # a unit's ExecStart= when no llama-server was found
PATH_FLAGS = {"-m": ("the model", "read"), "-mm": ("the vision projector", "read"),
              "-md": ("the draft model", "read"), "--api-key-file": ("the API key file", "read"),
              "--models-dir": ("the models directory", "dir"), "--models-preset": ("the preset file", "read")}


def unit_server(server: str) -> str:
    """The llama-server a unit runs: an absolute path (systemd wants one), else the usual install location."""
    return server if server.startswith("/") else DEFAULT_UNIT_SERVER


def needed_paths(launch: "LaunchConfig", *, preset_created: bool = False,
                 credentials: frozenset[str] = frozenset()) -> list[Needed]:
    """Every path a unit running `launch` opens: llama-server, the models (a router's too), projector, draft,
    API key file, models directory and preset file (`preset_created`: not there yet, it is saved there). A path in
    `credentials` is read by the service manager (LoadCredential=), not by the service."""
    out = [Needed("llama-server", unit_server(launch.server), "exec")]
    configs = (launch, *launch.models, replace(launch, flags=launch.preset))
    for config in configs:
        for f in config.flags:
            if f.name in PATH_FLAGS and f.value:
                what, kind = PATH_FLAGS[f.name]
                if f.name == "--models-preset" and preset_created:
                    kind = "create"
                if f.value in credentials and f.name == "--api-key-file":
                    kind = "credential"
                need = Needed(what, f.value, kind)
                if need not in out:
                    out.append(need)
    return out


__all__ = ["AccessReport", "Blocked", "DEFAULT_UNIT_SERVER", "Needed", "OPTION_OF", "RunAs", "SHARED_BIN",
           "SHARED_CONFIG", "SHARED_MODELS", "check_access", "fixes", "needed_paths", "unit_server"]
