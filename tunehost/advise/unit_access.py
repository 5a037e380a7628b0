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
import re
import shlex
import stat
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tunehost.errors import TunehostError
from tunehost.host.access import PathEntry, path_chain
from tunehost.host.samples import ggml_libs
from tunehost.printable import one_line

if TYPE_CHECKING:
    from tunehost.host import Host
    from tunehost.launch import LaunchConfig

SHARED_PREFIX = "/opt/llama.cpp"
SHARED_BIN = f"{SHARED_PREFIX}/bin/llama-server"
GPU_GROUPS = ("video", "render")  # the GPU device nodes: /dev/dri/card* (video), render nodes and /dev/kfd (render)
API_KEY_CREDENTIAL = "llama-api-keys"  # LoadCredential= name of --api-key-file in a system unit
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
    "create" (a file to be saved there: its directory must exist and be reachable; it is written world-readable),
    "write" (a file advise --write writes itself: as "create", but directories not there yet are made 0755),
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
    target = os.path.normpath(os.path.dirname(need.path) if need.kind in ("create", "write") else need.path)
    finals = {target, os.path.realpath(target)}
    if who.private_tmp and any(e.path in PRIVATE_DIRS for e in chain):
        return ("DynamicUser=yes gives the service its own /tmp and /var/tmp (PrivateTmp=yes): "
                "it never sees files there")
    for e in chain:
        final = e.path in finals
        if e.mode is None and need.kind == "write" and e.error == "does not exist":
            return None  # advise --write creates it 0755, whatever the umask (tunehost.advise.artifacts)
        if e.mode is None:
            return f"{e.path} {e.error}"
        if final and need.kind in ("dir", "create", "write") and not e.is_dir:
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
        target = os.path.dirname(need.path) if need.kind in ("create", "write") else need.path
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
        return _copy_server(need.path), f"--llama-server {SHARED_BIN}"
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


def _copy_server(path: str) -> str:
    """The command that copies llama-server to SHARED_BIN: the binary alone for a static build; with the ggml/llama
    shared libraries it loads (beside it, or in ../lib of its prefix: tunehost.host.samples.ggml_libs) the whole
    bin directory and that lib directory, which the binary finds through its RUNPATH ($ORIGIN, $ORIGIN/../lib)."""
    q = shlex.quote
    real = os.path.realpath(path)
    here = os.path.dirname(real)
    libs = ggml_libs(path)
    if not libs:
        return f"install -D -m 755 {q(path)} {SHARED_BIN}"
    lib_dir = os.path.join(os.path.dirname(here), "lib")
    beside = any(os.path.exists(os.path.join(here, n)) for n in libs)
    parts = [f"install -d -m 755 {SHARED_PREFIX}/bin", f"cp -a {q(here)}/. {SHARED_PREFIX}/bin/"]
    if not beside or any(os.path.exists(os.path.join(lib_dir, n)) for n in libs):
        parts += [f"install -d -m 755 {SHARED_PREFIX}/lib", f"cp -a {q(lib_dir)}/. {SHARED_PREFIX}/lib/"]
    if os.path.basename(real) != "llama-server":
        parts.append(f"ln -sf {q(os.path.basename(real))} {SHARED_BIN}")
    parts.append(f"chmod -R a+rX {SHARED_PREFIX}")
    return " && ".join(parts) + f" (a shared-library build: {len(libs)} libggml/libllama libraries go with it)"


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


def needed_paths(launch: "LaunchConfig", *, preset_created: bool = False, preset_written: bool = False,
                 credentials: frozenset[str] = frozenset()) -> list[Needed]:
    """Every path a unit running `launch` opens: llama-server, the models (a router's too), projector, draft,
    API key file, models directory and preset file (`preset_created`: not there yet, it is saved there;
    `preset_written`: advise --write writes it, making its directory). A path in
    `credentials` is read by the service manager (LoadCredential=), not by the service."""
    out = [Needed("llama-server", unit_server(launch.server), "exec")]
    configs = (launch, *launch.models, replace(launch, flags=launch.preset))
    for config in configs:
        for f in config.flags:
            if f.name in PATH_FLAGS and f.value:
                what, kind = PATH_FLAGS[f.name]
                if f.name == "--models-preset" and (preset_created or preset_written):
                    kind = "write" if preset_written else "create"
                if f.value in credentials and f.name == "--api-key-file":
                    kind = "credential"
                need = Needed(what, f.value, kind)
                if need not in out:
                    out.append(need)
    return out


def credential_path(path: str) -> bool:
    """Whether a key file's path can be written into LoadCredential=ID:PATH as it is (no quoting there: an absolute
    path of plain characters; else the unit passes the path itself and the check wants it readable)."""
    return bool(re.fullmatch(r"/[A-Za-z0-9._+@/-]*", path))


@dataclass(frozen=True)
class UnitKind:
    """Which unit is handed out: for the user manager (`user_unit`, --user), or the system one run as a dynamic
    user or as `service_user` (--service-user NAME, User=)."""

    user_unit: bool = False
    service_user: str | None = None


def unit_kind(fmt: str, user_unit: bool, service_user: str | None) -> UnitKind:
    """--user / --service-user as given to advise or tune, validated (one TunehostError line each)."""
    if user_unit and fmt != "systemd":
        raise TunehostError("--user chooses the kind of systemd unit: use it with --format systemd")
    if service_user is not None:
        if fmt != "systemd" or user_unit:
            raise TunehostError("--service-user sets User= of a system unit: use it with --format systemd, "
                                "without --user")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}", service_user):
            raise TunehostError(f"--service-user {one_line(service_user, 40)!r} is not an account name")
    return UnitKind(user_unit, service_user)


@dataclass(frozen=True)
class UnitCheck:
    """What check_unit found: who the unit runs as, the GPU groups it may name (only those the host has), notes
    for its header, and the access report (checked, or why not)."""

    kind: UnitKind
    run_as: RunAs
    groups: tuple[str, ...]
    notes: tuple[str, ...]
    report: AccessReport

    @property
    def comment(self) -> str:
        """The unit header's line on what was checked."""
        if self.report.checked:
            return (f"checked on this host: {self.run_as.label} can reach every path below (the mode bits of each "
                    "directory on the way; ACLs and SELinux/AppArmor not read)")
        return (f"NOT CHECKED: {self.report.reason}; every directory on the way to each path needs o+x, "
                "the files o+r, for the account the unit runs as")


def unit_user(host: "Host", kind: UnitKind) -> tuple[RunAs, tuple[str, ...], tuple[str, ...]]:
    """Who the unit runs as (for the access check), the GPU groups it may add, and what was left out and why."""
    from tunehost.host.access import account, current_account, group_id

    if kind.user_unit:
        me = current_account(host)
        return (RunAs(f"you ({me.name})", me.uid, me.gids) if me else RunAs("you", None, frozenset())), (), ()
    groups, notes, gids = GPU_GROUPS, [], frozenset()
    if host.live:  # systemd refuses to start a unit whose SupplementaryGroups= names a group that does not exist
        found = {g: group_id(host, g) for g in GPU_GROUPS}
        groups = tuple(g for g in GPU_GROUPS if found[g] is not None)
        gids = frozenset(gid for gid in found.values() if gid is not None)
        missing = [g for g in GPU_GROUPS if found[g] is None]
        if missing:
            notes.append(f"no {' or '.join(missing)} group on this host: left out of SupplementaryGroups= (systemd "
                         "would refuse to start the unit)")
    if kind.service_user is None:
        return RunAs("the unit's dynamic user (DynamicUser=yes)", None, gids, private_tmp=True, dynamic=True), \
            groups, tuple(notes)
    name = kind.service_user
    acct = account(host, name)
    if host.live and acct is None:
        raise TunehostError(f"--service-user {name}: no such account on this host (create one: useradd --system "
                            f"--no-create-home --shell /usr/sbin/nologin {name})")
    if name == "nobody" or (acct is not None and acct.uid == 65534):
        raise TunehostError(f"--service-user {name}: the overflow user owns whatever cannot be mapped and is shared "
                            "by everything unprivileged (systemd calls it not safe); create an account for llama-server:"
                            f" useradd --system --no-create-home --shell /usr/sbin/nologin llama")
    if acct is not None and acct.uid == 0:
        raise TunehostError(f"--service-user {name} is root: llama-server answers the network; run it as an "
                            "unprivileged account, or leave --service-user out for a dynamic user")
    return RunAs(f"user {name} (User={name})", acct.uid if acct else None, (acct.gids if acct else frozenset()) | gids), \
        groups, tuple(notes)


def check_unit(host: "Host", launch: "LaunchConfig", kind: UnitKind, *, preset_created: bool = False,
               preset_written: bool = False) -> UnitCheck:
    """The one check before a unit is handed out (advise --format systemd, tune --format systemd before its race):
    who it runs as (unit_user), whether that account reaches every path `launch` names (check_access), and the GPU
    groups this host has. A unit that would fail at start is one TunehostError saying what to do (fixes); on a
    snapshot the report says "not checked"."""
    keys = {c.value("--api-key-file") for c in (launch, *launch.models)} - {None}
    credentials = frozenset() if kind.user_unit else frozenset(k for k in keys if k and credential_path(k))
    run_as, groups, notes = unit_user(host, kind)
    report = check_access(host, needed_paths(launch, preset_created=preset_created, preset_written=preset_written,
                                         credentials=credentials), run_as)
    if report.checked and report.blocked:
        raise TunehostError(fixes(report))
    return UnitCheck(kind, run_as, groups, notes, report)


__all__ = ["AccessReport", "Blocked", "DEFAULT_UNIT_SERVER", "Needed", "OPTION_OF", "RunAs", "SHARED_BIN",
           "SHARED_CONFIG", "SHARED_MODELS", "UnitCheck", "UnitKind", "check_access", "check_unit", "credential_path",
           "fixes", "needed_paths", "unit_kind", "unit_server", "unit_user", "GPU_GROUPS", "API_KEY_CREDENTIAL"]
