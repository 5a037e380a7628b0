"""`--format systemd`: a llama-server.service unit for the system manager (a dynamic user, or User=NAME) or a user
manager, handed out only after tunehost.advise.unit_access.check_unit found its account may run it; in router mode
the preset file beside it. `--write DIR` writes the unit, the preset and a README.txt of where they go."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from tunehost.formats.quoting import commented, systemd_quote, unit_text
from tunehost.printable import one_line

if TYPE_CHECKING:
    from tunehost.advise.artifacts import Artifact
    from tunehost.advise.unit_access import UnitCheck, UnitKind
    from tunehost.formats import Subject
    from tunehost.launch import LaunchConfig

SYSTEM_UNIT_DIR = "/etc/systemd/system"
USER_UNIT_DIR = "~/.config/systemd/user"
UNIT_FILE = "llama-server.service"


def _checked(subject: "Subject") -> "UnitCheck":
    from tunehost.errors import TunehostError

    if subject.unit_check is None:
        raise TunehostError("internal: a unit is rendered only after its access check")
    return subject.unit_check


def render(subject: "Subject") -> str:
    """The unit (and a router's preset file, commented, after it) as printed without --write."""
    from tunehost.formats.router_ini import render_preset

    launch = subject.launch
    preset_text = render_preset(launch) if launch.is_router else None  # refused first, as before the unit
    text = render_checked_unit(launch, _checked(subject))
    if preset_text is not None:
        text += commented(preset_text, f"save as {subject.preset_file} (or: advise --write DIR writes both "
                                       "files)") + "\n"
    return text


def files(subject: "Subject", directory: Path) -> list["Artifact"]:
    """--write DIR: the unit, a router's preset file, and README.txt."""
    from tunehost.advise.artifacts import Artifact
    from tunehost.advise.router import PRESET_FILE
    from tunehost.formats.router_ini import render_preset

    launch, check = subject.launch, _checked(subject)
    preset_text = render_preset(launch) if launch.is_router else None
    artifacts = [Artifact(UNIT_FILE, render_checked_unit(launch, check))]
    if preset_text is not None:
        artifacts.append(Artifact(PRESET_FILE, preset_text))
    artifacts.append(Artifact("README.txt", readme_systemd(directory, check.kind, subject.preset_file
                                                           if preset_text is not None else None, check.comment)))
    return artifacts


def render_checked_unit(launch: "LaunchConfig", check: "UnitCheck") -> str:
    """The unit for `launch` as check_unit (tunehost.advise.unit_access) found it may run: its kind, only the GPU
    groups this host has, and a header saying what was checked. advise and tune hand out units only through this."""
    return render_systemd(launch, user=check.kind.user_unit, service_user=check.kind.service_user,
                          groups=check.groups, comments=(*check.notes, check.comment))


def render_systemd(p: "LaunchConfig", *, user: bool = False, service_user: str | None = None,
                   groups: tuple[str, ...] | None = None, comments: tuple[str, ...] = ()) -> str:
    """A systemd service unit (ExecStart, CPUAffinity, LimitMEMLOCK, Nice, Environment) for the system manager, or
    with `user` for a user manager: no Nice below 0, no --prio, no LimitMEMLOCK above the user's hard limit, no
    system targets (a user manager cannot raise priority or limits, nor order itself after system units).
    A system unit runs as a dynamic user, or as `service_user` (User=), in the GPU `groups`; `comments` go into its
    header (what was checked). A relative --models-preset is refused: a unit has no working directory for it."""
    from tunehost.advise.unit_access import API_KEY_CREDENTIAL, GPU_GROUPS, credential_path, unit_server
    from tunehost.cpulist import format_cpu_list
    from tunehost.errors import TunehostError

    groups = GPU_GROUPS if groups is None else groups
    argv = p.argv()
    argv[0] = unit_server(argv[0])
    preset = p.value("--models-preset")
    if preset is not None and not preset.startswith("/"):
        raise TunehostError(f"--models-preset {one_line(preset)!r} must be an absolute path in a unit (it has no "
                            "working directory)")
    notes: list[str] = []
    from tunehost.launch import LaunchConfig

    every = (p, *p.models, LaunchConfig("", p.preset))  # a router: its models' (and shared) flags lock too
    lock = any(c.flag("--mlock") or c.mlock_wanted or c.value("--load-mode") in ("mlock", "mmap+mlock")
               for c in every)
    if user:
        if "--prio" in argv:
            i = argv.index("--prio")
            del argv[i:i + 2]
            notes.append("# no --prio and no Nice=: a user manager cannot raise priority (that needs CAP_SYS_NICE); "
                         "use --system for both")
        elif p.nice is not None and p.nice < 0:
            notes.append("# no Nice=: a user manager cannot raise priority; use --system for it")
        if p.mlock_wanted:
            notes.append("# no --mlock: the memlock limit is below what it locks, and a user manager cannot raise "
                         "its own hard limit (LimitMEMLOCK= is capped at it); raise memlock for your user in "
                         "/etc/security/limits.conf and log in again, or use --system")
        elif lock:
            notes.append("# --mlock within your user's memlock limit (a user unit cannot raise it: no LimitMEMLOCK=)")
    elif p.mlock_wanted and "--mlock" not in argv:
        argv.append("--mlock")  # LimitMEMLOCK=infinity below lifts the limit that kept it out of the shell form
    words = [systemd_quote(a) for a in argv]
    credential = None
    if not user and "--api-key-file" in argv[:-1] and credential_path(argv[argv.index("--api-key-file") + 1]):
        # the manager reads the key file as root and hands the service a private copy (systemd.exec(5),
        # LoadCredential=): the keys stay readable by root only, whoever the unit runs as
        i = argv.index("--api-key-file") + 1
        credential = f"LoadCredential={API_KEY_CREDENTIAL}:{argv[i]}"
        words[i] = "${CREDENTIALS_DIRECTORY}/" + API_KEY_CREDENTIAL
    exec_start = " ".join(words)
    name = unit_text(p.model_name or Path(p.model).name)
    lines = _unit_head(user, name, comments)
    lines += notes
    if not user and service_user is None:  # never root: a throw-away user that may open the GPUs (/dev/dri, /dev/kfd)
        lines += ["# runs as an unprivileged dynamic user, not root: it reads only what any account may read (each",
                  "# directory on the way o+x, the files o+r), and has its own /tmp; or advise --service-user NAME",
                  "DynamicUser=yes"]
    elif not user:
        lines += [f"# runs as {service_user} (advise --service-user), not root", f"User={service_user}"]
    if not user and groups:
        lines.append(f"SupplementaryGroups={' '.join(groups)}")
    if credential is not None:
        lines.append(credential)
    lines.append(f"ExecStart={exec_start}")
    if p.pin_cpus:
        lines.append(f"CPUAffinity={format_cpu_list(p.pin_cpus)}")  # a user manager may narrow affinity too
    for e in p.env:
        lines.append(f"Environment={systemd_quote(f'{e.name}={e.value}')}")
    if lock and not user:
        lines.append("LimitMEMLOCK=infinity")
    if p.nice is not None and (not user or p.nice >= 0):
        lines.append(f"Nice={p.nice}")
    lines += ["Restart=on-failure", "RestartSec=5", "", "[Install]",
              "WantedBy=default.target" if user else "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


def _unit_head(user: bool, name: str, comments: tuple[str, ...]) -> list[str]:
    """The unit's header comment (where it goes, how to start it, what was checked), [Unit], and [Service]'s
    Type=: a user unit orders itself after no system target."""
    if user:
        return [f"# written by tunehost advise --format systemd --user: save it as {UNIT_FILE}, check the paths,",
                "# then, as yourself (not root):",
                f"#   mkdir -p {USER_UNIT_DIR} && install -m 644 {UNIT_FILE} {USER_UNIT_DIR}/",
                f"#   systemctl --user daemon-reload && systemctl --user enable --now {UNIT_FILE}",
                "#   loginctl enable-linger \"$USER\"   # optional: start at boot, keep running after you log out",
                *(f"# {one_line(c)}" for c in comments),
                "[Unit]", f"Description=llama-server: {name}", "", "[Service]", "Type=simple"]
    return [f"# written by tunehost advise --format systemd: save it as {UNIT_FILE}, check the paths,",
            "# then, as root:",
            f"#   install -m 644 {UNIT_FILE} {SYSTEM_UNIT_DIR}/ && systemctl daemon-reload",
            f"#   systemctl enable --now {UNIT_FILE}",
            *(f"# {one_line(c)}" for c in comments),
            "[Unit]", f"Description=llama-server: {name}",
            "After=network-online.target", "Wants=network-online.target", "", "[Service]", "Type=simple"]


def readme_systemd(directory: Path, kind: "UnitKind", preset_file: str | None, checked: str) -> str:
    """README.txt beside a written unit: what each file is, and the commands that install and start it."""
    from tunehost.advise.router import PRESET_FILE

    here = os.path.abspath(directory.expanduser())
    q = shlex.quote
    unit = q(os.path.join(here, UNIT_FILE))
    lines = ["Written by tunehost advise --format systemd --write: what each file is and where it goes.", "",
             f"{UNIT_FILE}  the systemd unit for "
             + ("your user manager (systemctl --user)" if kind.user_unit else
                f"the system manager, run as {kind.service_user} (User=)" if kind.service_user else
                "the system manager, run as a dynamic unprivileged user (DynamicUser=yes)")]
    if preset_file is not None:
        local = os.path.join(here, PRESET_FILE)
        lines.append(f"{PRESET_FILE}  the router's preset (--models-preset): the unit reads it from {preset_file}")
        if preset_file != local:
            lines.append(f"    put it there first: install -D -m 644 {q(local)} {q(preset_file)}")
        else:
            lines.append("    keep it where it is (or move it and run advise again with --preset-file PATH)")
    lines += ["README.txt  this file", ""]
    if kind.user_unit:
        lines += ["Install and start it as yourself (not root):",
                  f"  mkdir -p {USER_UNIT_DIR} && install -m 644 {unit} {USER_UNIT_DIR}/",
                  "  systemctl --user daemon-reload",
                  f"  systemctl --user enable --now {UNIT_FILE}",
                  f"  systemctl --user status {UNIT_FILE}    # its log: journalctl --user -u {UNIT_FILE}",
                  "  loginctl enable-linger \"$USER\"   # optional: start at boot, keep running after you log out"]
    else:
        lines += ["Install and start it as root:",
                  f"  install -m 644 {unit} {SYSTEM_UNIT_DIR}/",
                  "  systemctl daemon-reload",
                  f"  systemctl enable --now {UNIT_FILE}",
                  f"  systemctl status {UNIT_FILE}    # its log: journalctl -u {UNIT_FILE}"]
    lines += ["", "Paths: " + checked, ""]
    return "\n".join(lines)
