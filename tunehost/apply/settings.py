"""Settings as get/set pairs (TuneD style), all through the host layer.

A profile key ("governor") is a `Setting`; on one host it expands into `Knob`s, one per thing that holds a value
("governor[cpu3]" is /sys/devices/system/cpu/cpu3/cpufreq/scaling_governor). Every knob has

    get(host) -> str | None            the current value in the profile's terms ("on"/"off" for boost); None = unsupported
    set(host, value, sim=False) -> str what it wrote (or, with sim, would write); raises OSError when the host refuses

so verify (get == target) and rollback (set what get returned before) follow mechanically. A knob is plain data
(`to_record()` / `knob_from_record()`), so the journal can undo exactly what was done even if the topology changes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, ClassVar

from tunehost.cpulist import ONLINE
from tunehost.facts.cpu import online_cpus
from tunehost.facts.memory import THP_DEFRAG, THP_ENABLED, selected_mode, selector_options

if TYPE_CHECKING:
    from tunehost.host import Host

CPU_DIR = "/sys/devices/system/cpu"
GLOBAL_BOOST = f"{CPU_DIR}/cpufreq/boost"
NO_TURBO = f"{CPU_DIR}/intel_pstate/no_turbo"
SWAPPINESS = "/proc/sys/vm/swappiness"
SYSTEMD_UNIT_DIRS = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")


def cpufreq_path(cpu: int, name: str) -> str:
    return f"{CPU_DIR}/cpu{cpu}/cpufreq/{name}"


# --- knobs -----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Knob:
    """One value on the host that a setting reads and writes."""

    key: str
    unit: str = ""  # "cpu3" for per-CPU knobs, "" for global ones
    kind: ClassVar[str] = ""

    @property
    def name(self) -> str:
        return f"{self.key}[{self.unit}]" if self.unit else self.key

    @property
    def where(self) -> str:
        """The file or command behind this knob (evidence in plans and reports)."""
        raise NotImplementedError

    def get(self, host: "Host") -> str | None:
        raise NotImplementedError

    def set(self, host: "Host", value: str, sim: bool = False) -> str:
        raise NotImplementedError

    def to_record(self) -> dict:
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class FileKnob(Knob):
    """A one-value sysfs/procfs file. `codec`: plain, selector ("always [madvise] never"), bool ("1"/"0" = on/off),
    or inverted-bool (intel_pstate/no_turbo: "1" = boost off)."""

    path: str = ""
    codec: str = "plain"
    kind: ClassVar[str] = "file"

    @property
    def where(self) -> str:
        return self.path

    def get(self, host: "Host") -> str | None:
        raw = host.files.read_value(self.path)
        if raw is None:
            return None
        if self.codec == "selector":
            # a plain single word reads as itself: a test root, or a file rewritten by hand
            return selected_mode(raw) or (raw if " " not in raw else None)
        if self.codec in ("bool", "inverted-bool"):
            if raw not in ("0", "1"):
                return None
            on = (raw == "1") if self.codec == "bool" else (raw == "0")
            return "on" if on else "off"
        return raw

    def encode(self, value: str) -> str:
        if self.codec in ("bool", "inverted-bool"):
            if value not in ("on", "off"):
                raise ValueError(f"{self.name}: {value!r} is not on/off")
            on = value == "on"
            return ("1" if on else "0") if self.codec == "bool" else ("0" if on else "1")
        return value  # a selector file takes the plain word and brackets it itself

    def set(self, host: "Host", value: str, sim: bool = False) -> str:
        text = self.encode(value)
        if not sim:
            host.files.write(self.path, text + "\n")
        return text


@dataclass(frozen=True)
class PowerProfileKnob(Knob):
    """power-profiles-daemon (or tuned-ppd, which answers the same API): powerprofilesctl get / set."""

    kind: ClassVar[str] = "power-profile"

    @property
    def where(self) -> str:
        return "powerprofilesctl get"

    def get(self, host: "Host") -> str | None:
        result = host.run(["powerprofilesctl", "get"])
        if result is None or not result.ok or not result.stdout.strip():
            return None
        return result.stdout.strip().split()[0]

    def set(self, host: "Host", value: str, sim: bool = False) -> str:
        if not sim:
            _checked(host, ["powerprofilesctl", "set", value])
        return value


@dataclass(frozen=True)
class TunedProfileKnob(Knob):
    """TuneD's active profile: tuned-adm active / tuned-adm profile NAME ("off" = no profile: tuned-adm off)."""

    kind: ClassVar[str] = "tuned-profile"

    @property
    def where(self) -> str:
        return "tuned-adm active"

    def get(self, host: "Host") -> str | None:
        result = host.run(["tuned-adm", "active"])
        if result is None:
            return None
        return parse_tuned_active(result.stdout)

    def set(self, host: "Host", value: str, sim: bool = False) -> str:
        argv = ["tuned-adm", "off"] if value == "off" else ["tuned-adm", "profile", value]
        if not sim:
            _checked(host, argv)
        return " ".join(argv)


@dataclass(frozen=True)
class PowerDaemonKnob(Knob):
    """Which daemon serves power profiles: "ppd", "tuned-ppd" or "none" (systemctl is-active / stop / start)."""

    kind: ClassVar[str] = "power-daemon"
    UNITS: ClassVar[dict[str, str]] = {"ppd": "power-profiles-daemon", "tuned-ppd": "tuned-ppd"}

    @property
    def where(self) -> str:
        return "systemctl is-active tuned-ppd power-profiles-daemon"

    def get(self, host: "Host") -> str | None:
        states = {}
        for name, unit in self.UNITS.items():
            result = host.run(["systemctl", "is-active", unit])
            if result is None:
                return None
            states[name] = result.stdout.strip() == "active"
        if states["tuned-ppd"]:
            return "tuned-ppd"
        return "ppd" if states["ppd"] else "none"

    def set(self, host: "Host", value: str, sim: bool = False) -> str:
        steps = [["systemctl", "stop", unit] for name, unit in self.UNITS.items() if name != value]
        if value in self.UNITS:
            steps.append(["systemctl", "start", self.UNITS[value]])
        return _run_systemctl(host, steps, sim)


@dataclass(frozen=True)
class PowerDaemonBootKnob(Knob):
    """Which power-profile daemon starts at boot (`apply --persist` with a power_daemon switch): "ppd",
    "tuned-ppd", "both" or "none", from `systemctl is-enabled`; set enables/disables only the units that differ.

    A masked or static unit counts as not enabled and is never unmasked: enabling it fails, and the apply reverts."""

    kind: ClassVar[str] = "power-daemon-boot"
    UNITS: ClassVar[dict[str, str]] = PowerDaemonKnob.UNITS

    @property
    def where(self) -> str:
        return "systemctl is-enabled tuned-ppd power-profiles-daemon"

    def _enabled(self, host: "Host") -> dict[str, bool] | None:
        states = {}
        for name, unit in self.UNITS.items():
            result = host.run(["systemctl", "is-enabled", unit])
            if result is None:
                return None
            # "enabled", "enabled-runtime", "alias"...; "disabled", "masked", "static" or nothing (not installed)
            states[name] = result.ok and result.stdout.strip().startswith("enabled")
        return states

    def get(self, host: "Host") -> str | None:
        states = self._enabled(host)
        if states is None:
            return None
        if states["ppd"] and states["tuned-ppd"]:
            return "both"
        return next((name for name, on in states.items() if on), "none")

    @classmethod
    def _wanted(cls, value: str) -> dict[str, bool]:
        if value not in (*cls.UNITS, "both", "none"):
            raise ValueError(f"power_daemon[boot]: {value!r} is not ppd, tuned-ppd, both or none")
        return {name: value in (name, "both") for name in cls.UNITS}

    def set(self, host: "Host", value: str, sim: bool = False) -> str:
        wanted = self._wanted(value)
        states = self._enabled(host) if not sim else None
        steps = [["systemctl", "enable" if on else "disable", self.UNITS[name]] for name, on in wanted.items()
                 if states is None or states[name] != on]
        # disable first, so two daemons are never both enabled in between
        steps.sort(key=lambda argv: argv[1] != "disable")
        return _run_systemctl(host, steps, sim)


KNOB_KINDS: dict[str, type[Knob]] = {k.kind: k for k in (
    FileKnob, PowerProfileKnob, TunedProfileKnob, PowerDaemonKnob, PowerDaemonBootKnob)}


def knob_from_record(record: dict) -> Knob:
    """The knob a journal record describes (raises KeyError/TypeError for a record that is not one)."""
    fields = dict(record)
    cls = KNOB_KINDS[fields.pop("kind")]
    return cls(**fields)


def _checked(host: "Host", argv: list[str]) -> None:
    result = host.run(argv, timeout=60.0)
    if result is None:
        raise OSError(f"{argv[0]} is not available on this host")
    if not result.ok:
        why = (result.stderr or result.stdout).strip().splitlines()
        raise OSError(f"`{' '.join(argv)}` failed (exit {result.rc}){': ' + why[-1] if why else ''}")


def _run_systemctl(host: "Host", steps: list[list[str]], sim: bool) -> str:
    """Run systemctl steps in order (a stop/disable of a unit that is not installed is a no-op); what they are."""
    if not sim:
        for argv in steps:
            if argv[1] in ("stop", "disable") and not unit_installed(host, argv[2]):
                continue
            _checked(host, argv)
    return "; ".join(" ".join(a) for a in steps)


def parse_tuned_active(text: str) -> str | None:
    """`tuned-adm active` -> the profile name, "off" for no active profile, None when it says neither."""
    for line in text.splitlines():
        if line.strip().startswith("Current active profile:"):
            name = line.split(":", 1)[1].strip()
            return name or None
        if "No current active profile" in line:
            return "off"
    return None


def unit_installed(host: "Host", unit: str) -> bool:
    return any(host.files.exists(f"{d}/{unit}.service") for d in SYSTEMD_UNIT_DIRS)


# --- settings: profile key -> knobs on this host ---------------------------------------------------------------------

@dataclass(frozen=True)
class Skip:
    """A knob (or a whole setting, unit "") that this host does not support, and why."""

    key: str
    unit: str
    reason: str

    @property
    def name(self) -> str:
        return f"{self.key}[{self.unit}]" if self.unit else self.key


class Setting:
    key: ClassVar[str] = ""

    def expand(self, host: "Host", target: str) -> list[Knob | Skip]:
        """The knobs that hold this setting on `host`; a Skip for each part that is unsupported (never an error)."""
        raise NotImplementedError

    def skip(self, reason: str, unit: str = "") -> Skip:
        return Skip(self.key, unit, reason)


class PerCpuFileSetting(Setting):
    """A cpufreq file on every online CPU; the target must be one the CPU offers (its `available` file)."""

    file: ClassVar[str] = ""
    available: ClassVar[str] = ""

    def expand(self, host: "Host", target: str) -> list[Knob | Skip]:
        cpus = online_cpus(host)
        if cpus is None:
            return [self.skip(f"cannot read {ONLINE}: the online CPUs are unknown")]
        out: list[Knob | Skip] = []
        for cpu in cpus:
            unit = f"cpu{cpu}"
            path = cpufreq_path(cpu, self.file)
            if host.files.read_value(path) is None:
                out.append(self.skip(f"no {path} ({self.missing_reason(host, cpu)})", unit))
                continue
            offered = host.files.read_value(cpufreq_path(cpu, self.available))
            if offered is not None and target not in offered.split():
                driver = host.files.read_value(cpufreq_path(cpu, "scaling_driver")) or "the cpufreq driver"
                out.append(self.skip(f"{target} is not offered by {driver} (available: {offered})", unit))
                continue
            out.append(FileKnob(self.key, unit, path))
        if out and all(isinstance(o, Skip) for o in out) and not any(host.files.is_dir(f"{CPU_DIR}/cpu{c}/cpufreq")
                                                                      for c in cpus):
            return [self.skip(f"no cpufreq on this host (no {CPU_DIR}/cpu*/cpufreq: a VM, a container, "
                              f"or no cpufreq driver)")]
        return out

    def missing_reason(self, host: "Host", cpu: int) -> str:
        return "no cpufreq for this CPU"


class GovernorSetting(PerCpuFileSetting):
    key = "governor"
    file = "scaling_governor"
    available = "scaling_available_governors"


class EppSetting(PerCpuFileSetting):
    key = "epp"
    file = "energy_performance_preference"
    available = "energy_performance_available_preferences"

    def missing_reason(self, host: "Host", cpu: int) -> str:
        driver = host.files.read_value(cpufreq_path(cpu, "scaling_driver"))
        if driver is None:
            return "no cpufreq for this CPU"
        return f"driver {driver} has no EPP: only intel_pstate and amd-pstate in active mode have one"


class BoostSetting(Setting):
    key = "boost"

    def expand(self, host: "Host", target: str) -> list[Knob | Skip]:
        if host.files.read_value(GLOBAL_BOOST) in ("0", "1"):
            return [FileKnob(self.key, "", GLOBAL_BOOST, "bool")]
        if host.files.read_value(NO_TURBO) in ("0", "1"):
            return [FileKnob(self.key, "", NO_TURBO, "inverted-bool")]
        cpus = online_cpus(host) or []
        per_cpu = [FileKnob(self.key, f"cpu{c}", cpufreq_path(c, "boost"), "bool") for c in cpus]
        if per_cpu and all(host.files.read_value(k.path) in ("0", "1") for k in per_cpu):
            return list(per_cpu)  # amd-pstate on newer kernels: one boost file per policy
        return [self.skip(f"no boost control ({GLOBAL_BOOST}, {NO_TURBO} and per-CPU cpufreq/boost are absent)")]


class SelectorSetting(Setting):
    path: ClassVar[str] = ""

    def expand(self, host: "Host", target: str) -> list[Knob | Skip]:
        raw = host.files.read_value(self.path)
        if raw is None:
            return [self.skip(f"no {self.path} (kernel without transparent huge pages)")]
        offered = selector_options(raw)
        if target not in offered:
            return [self.skip(f"{target} is not offered by this kernel ({self.path}: {raw})")]
        return [FileKnob(self.key, "", self.path, "selector")]


class ThpSetting(SelectorSetting):
    key = "thp"
    path = THP_ENABLED


class ThpDefragSetting(SelectorSetting):
    key = "thp_defrag"
    path = THP_DEFRAG


class SwappinessSetting(Setting):
    key = "swappiness"

    def expand(self, host: "Host", target: str) -> list[Knob | Skip]:
        if host.files.read_value(SWAPPINESS) is None:
            return [self.skip(f"no {SWAPPINESS}")]
        return [FileKnob(self.key, "", SWAPPINESS)]


class PowerProfileSetting(Setting):
    key = "power_profile"

    def expand(self, host: "Host", target: str) -> list[Knob | Skip]:
        knob = PowerProfileKnob(self.key)
        if knob.get(host) is None:
            return [self.skip("power-profiles-daemon is not running here (no answer from `powerprofilesctl get`)")]
        return [knob]


class TunedProfileSetting(Setting):
    key = "tuned_profile"

    def expand(self, host: "Host", target: str) -> list[Knob | Skip]:
        result = host.run(["tuned-adm", "active"])
        if result is None:
            return [self.skip("TuneD is not installed (no tuned-adm)")]
        if parse_tuned_active(result.stdout) is None:
            return [self.skip("tuned-adm active reports no profile (is the tuned service running?)")]
        return [TunedProfileKnob(self.key)]


class PowerDaemonSetting(Setting):
    key = "power_daemon"

    def expand(self, host: "Host", target: str) -> list[Knob | Skip]:
        unit = PowerDaemonKnob.UNITS[target] if target in PowerDaemonKnob.UNITS else None
        if unit is None:
            return [self.skip(f"unknown power daemon {target!r}")]
        if not unit_installed(host, unit):
            return [self.skip(f"{unit}.service is not installed")]
        knob = PowerDaemonKnob(self.key)
        if knob.get(host) is None:
            return [self.skip("systemctl is not available (no systemd?)")]
        return [knob]


SETTINGS: dict[str, Setting] = {s.key: s for s in (
    PowerDaemonSetting(), TunedProfileSetting(), PowerProfileSetting(), GovernorSetting(), EppSetting(),
    BoostSetting(), ThpSetting(), ThpDefragSetting(), SwappinessSetting(),
)}
