"""Writable host roots in real sysfs/procfs formats, and a fake kernel that behaves like the real one on write.

Roots (see `build_root`): intel_pstate active with EPP and no_turbo; amd-pstate-epp with per-policy boost;
acpi-cpufreq with the global cpufreq/boost and no EPP; a VM without cpufreq. cpuN/cpufreq is a relative link to
../cpufreq/policyN, as on real machines. Values are the ones in tests/data/corpus/cpufreq/.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from tunehost.host import Host
from tunehost.host.commands import CommandResult
from tunehost.host.files import HostFiles
from tunehost.apply.root import open_writable_root

THP = "sys/kernel/mm/transparent_hugepage"

DRIVERS = {
    # driver: (governors available, starting governor, EPP?, boost file)
    "intel_pstate": ("performance powersave", "powersave", True, "no_turbo"),
    "amd-pstate-epp": ("performance powersave", "powersave", True, "per-policy"),
    "acpi-cpufreq": ("conservative ondemand userspace powersave performance schedutil", "schedutil", False, "global"),
}
EPP_AVAILABLE = "default performance balance_performance balance_power power"


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def build_root(root: Path, driver: str | None = "intel_pstate", cpus: int = 4, *, online: str | None = None,
               thp: str = "always [madvise] never", defrag: str = "always defer defer+madvise [madvise] never",
               swappiness: str = "60") -> Path:
    """A writable root in real formats. driver None: no cpufreq at all (a VM)."""
    root.mkdir(parents=True, exist_ok=True)
    cpu = "sys/devices/system/cpu"
    write(root, f"{cpu}/online", online if online is not None else (f"0-{cpus - 1}\n" if cpus > 1 else "0\n"))
    write(root, f"{cpu}/possible", f"0-{cpus - 1}\n")
    for n in range(cpus):
        write(root, f"{cpu}/cpu{n}/topology/core_id", f"{n}\n")
        if driver is None:
            continue
        governors, gov, epp, boost = DRIVERS[driver]
        pol = f"{cpu}/cpufreq/policy{n}"
        write(root, f"{pol}/scaling_driver", f"{driver}\n")
        write(root, f"{pol}/scaling_governor", f"{gov}\n")
        write(root, f"{pol}/scaling_available_governors", f"{governors}\n")
        write(root, f"{pol}/cpuinfo_max_freq", "5000000\n")
        write(root, f"{pol}/scaling_max_freq", "5000000\n")
        if epp:
            write(root, f"{pol}/energy_performance_preference", "balance_performance\n")
            write(root, f"{pol}/energy_performance_available_preferences", f"{EPP_AVAILABLE} \n")
        if boost == "per-policy":
            write(root, f"{pol}/boost", "1\n")
        os.symlink(f"../cpufreq/policy{n}", root / cpu / f"cpu{n}" / "cpufreq")
    if driver is not None:
        boost = DRIVERS[driver][3]
        if boost == "no_turbo":
            write(root, f"{cpu}/intel_pstate/no_turbo", "1\n")
            write(root, f"{cpu}/intel_pstate/status", "active\n")
        elif boost == "global":
            write(root, f"{cpu}/cpufreq/boost", "0\n")
    write(root, f"{THP}/enabled", thp + "\n")
    write(root, f"{THP}/defrag", defrag + "\n")
    write(root, "proc/sys/vm/swappiness", swappiness + "\n")
    (root / "etc").mkdir(exist_ok=True)
    return root


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file (bytes), link (target) and directory under root: compare two for byte-for-byte equality."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "<dir>"
            else:
                out[rel] = p.read_bytes()
    return out


class Crash(BaseException):
    """The process dies here: nothing catches it, nothing is reverted."""


class KernelFiles(HostFiles):
    """HostFiles over a root that answers writes the way the kernel does.

    Selector files take a plain word and move the brackets; governor/EPP writes must be offered by the available
    file (EINVAL otherwise); values are stored with one newline, as sysfs shows them. Faults:
    fail_at=k makes the k-th write raise OSError (EIO) without writing; crash_at=k makes it raise Crash, before the
    write or (crash_after_write=True) after it; readonly paths raise EACCES.
    """

    def __init__(self, root, *, fail_at: int | None = None, crash_at: int | None = None,
                 crash_after_write: bool = False, readonly: tuple[str, ...] = ()):
        super().__init__(root)
        self.writes = 0
        self.written: list[tuple[str, str]] = []
        self.fail_at, self.crash_at, self.crash_after_write = fail_at, crash_at, crash_after_write
        self.readonly = readonly

    def write(self, path: str, text: str) -> None:
        self.writes += 1
        if self.writes == self.fail_at:
            raise OSError(errno.EIO, f"injected failure at write {self.writes}", path)
        if self.writes == self.crash_at and not self.crash_after_write:
            raise Crash(path)
        if path in self.readonly:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        local = self.local(path)
        if path.startswith(("/sys/", "/proc/")):
            self._sysfs_write(path, local, text)
        else:
            super().write(path, text)
        self.written.append((path, text))
        if self.writes == self.crash_at and self.crash_after_write:
            raise Crash(path)

    def _sysfs_write(self, path: str, local: str, text: str) -> None:
        if not os.path.exists(local):
            raise OSError(errno.ENOENT, "No such file or directory", path)
        value = text.strip()
        current = Path(local).read_text()
        if "[" in current:
            options = current.replace("[", "").replace("]", "").split()
            if value not in options:
                raise OSError(errno.EINVAL, "Invalid argument", path)
            Path(local).write_text(" ".join(f"[{o}]" if o == value else o for o in options) + "\n")
            return
        name = os.path.basename(path)
        available = {"scaling_governor": "scaling_available_governors",
                     "energy_performance_preference": "energy_performance_available_preferences"}.get(name)
        if available:
            offered = Path(os.path.dirname(local), available).read_text().split()
            if value not in offered:
                raise OSError(errno.EINVAL, "Invalid argument", path)
        Path(local).write_text(value + "\n")


class FakeTools:
    """powerprofilesctl, tuned-adm and systemctl with in-memory state, answering like the real tools."""

    def __init__(self, *, ppd: str | None = "balanced", tuned: str | None = "balanced", tuned_ppd: bool = False,
                 fail: tuple[str, ...] = ()):
        self.ppd = ppd  # None: power-profiles-daemon not installed
        self.tuned = tuned  # None: tuned not installed; "off": no active profile
        self.units = {"power-profiles-daemon": ppd is not None, "tuned-ppd": False}
        # systemctl is-enabled: "enabled", "disabled", "masked"; a unit missing here is not installed
        self.boot = {"power-profiles-daemon": "enabled"} if ppd is not None else {}
        if tuned_ppd:
            self.boot["tuned-ppd"] = "disabled"
        self.tuned_ppd_installed = tuned_ppd
        self.fail = fail  # command lines (joined) that exit 1
        self.calls: list[str] = []

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if self._tool(name) else None

    def _tool(self, name: str) -> bool:
        return {"powerprofilesctl": self.ppd is not None, "tuned-adm": self.tuned is not None,
                "systemctl": True}.get(name, False)

    def run(self, argv, timeout: float = 10.0) -> CommandResult | None:
        argv = tuple(argv)
        line = " ".join(argv)
        if not self._tool(argv[0]):
            return None
        self.calls.append(line)
        if line in self.fail:
            return CommandResult(argv, "", "injected failure", 1)
        if argv[0] == "powerprofilesctl":
            if argv[1] == "get":
                return CommandResult(argv, self.ppd + "\n")
            self.ppd = argv[2]
            return CommandResult(argv, "")
        if argv[0] == "tuned-adm":
            if argv[1] == "active":
                text = ("No current active profile.\n" if self.tuned == "off"
                        else f"Current active profile: {self.tuned}\n")
                return CommandResult(argv, text)
            self.tuned = "off" if argv[1] == "off" else argv[2]
            return CommandResult(argv, "")
        if argv[0] == "systemctl":
            verb, unit = argv[1], argv[2]
            if verb == "is-active":
                active = self.units.get(unit, False)
                return CommandResult(argv, "active\n" if active else "inactive\n", "", 0 if active else 3)
            if verb == "is-enabled":
                state = self.boot.get(unit)
                if state is None:
                    return CommandResult(argv, "", f"Failed to get unit file state for {unit}.service: "
                                                   "No such file or directory\n", 1)
                return CommandResult(argv, state + "\n", "", 0 if state.startswith("enabled") else 1)
            if verb in ("enable", "disable"):
                if self.boot.get(unit) in (None, "masked"):
                    why = "is masked" if unit in self.boot else "does not exist"
                    return CommandResult(argv, "", f"Failed to {verb} unit: Unit file {unit}.service {why}.\n", 1)
                self.boot[unit] = "enabled" if verb == "enable" else "disabled"
                return CommandResult(argv, "")
            self.units[unit] = verb == "start"
            return CommandResult(argv, "")
        return None


def kernel_host(root: Path, tools: FakeTools | None = None, **faults) -> Host:
    host = open_writable_root(root, tools)
    host.files = KernelFiles(root, **faults)
    return host
