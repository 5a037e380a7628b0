"""Power-manager facts: power-profiles-daemon, tuned (+ tuned-ppd), TLP (+ tlp-pd), auto-cpufreq, thermald.

Sources, all optional (what is missing stays unknown):
- `systemctl is-active <units...>` — one call for all units (cmd/systemctl_is-active_power-profiles-daemon_tuned_...);
- the `processes` sample — daemons seen running (works without systemd, e.g. in containers);
- `powerprofilesctl get` (one word) and `powerprofilesctl` (the list, with CpuDriver/PlatformDriver/Degraded);
- `tuned-adm active`; `tlp-stat -s`; /etc/tlp.conf.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from tunehost.parsers.power import (PpdList, TlpStatus, TunedActive, parse_is_active, parse_ppd_get, parse_ppd_list,
                                    parse_tlp_conf, parse_tlp_status, parse_tuned_active)

if TYPE_CHECKING:
    from tunehost.host import Host

PPD = "power-profiles-daemon"
TUNED = "tuned"
TUNED_PPD = "tuned-ppd"
TLP = "tlp"
TLP_PD = "tlp-pd"
AUTO_CPUFREQ = "auto-cpufreq"
THERMALD = "thermald"
MANAGERS = (PPD, TUNED, TUNED_PPD, TLP, TLP_PD, AUTO_CPUFREQ, THERMALD)

IS_ACTIVE_ARGV = ("systemctl", "is-active", *MANAGERS)
PPD_GET_ARGV = ("powerprofilesctl", "get")
PPD_LIST_ARGV = ("powerprofilesctl",)
TUNED_ARGV = ("tuned-adm", "active")
TLP_STAT_ARGV = ("tlp-stat", "-s")
TLP_CONF = "/etc/tlp.conf"

# process names (comm, 15 characters at most; psutil extends it from the command line when it can)
PROCESS_NAMES = {
    "power-profiles-daemon": PPD, "power-profiles-": PPD, "tuned": TUNED, "tuned-ppd": TUNED_PPD,
    "tlp-pd": TLP_PD, "auto-cpufreq": AUTO_CPUFREQ, "thermald": THERMALD,
}
RUNNING_STATES = ("active", "activating", "reloading", "refreshing")


def _line(argv: tuple[str, ...]) -> str:
    return " ".join(argv)


@dataclass(frozen=True)
class PowerFacts:
    services: Mapping[str, str] = field(default_factory=dict)  # unit -> systemd state; {} when unknown
    services_reason: str | None = None  # why the services are unknown
    processes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # manager -> pids seen running
    processes_known: bool = False
    processes_reason: str | None = None
    ppd_profile: str | None = None  # powerprofilesctl get (or the "*" of the list)
    ppd_list: PpdList = field(default_factory=PpdList)
    tuned: TunedActive | None = None  # None: tuned-adm not available
    tlp: TlpStatus | None = None  # None: tlp-stat not available
    tlp_conf: Mapping[str, str] = field(default_factory=dict)
    tlp_stat_available: bool = False
    evidence: Mapping[str, str] = field(default_factory=dict)

    @property
    def services_known(self) -> bool:
        return bool(self.services)

    @property
    def anything_known(self) -> bool:
        return self.services_known or self.processes_known

    def running(self, manager: str) -> bool | None:
        """True: active (systemd) or its process is running; False: known not to be; None: cannot tell."""
        state = self.services.get(manager)
        if state in RUNNING_STATES or self.processes.get(manager):
            return True
        if manager == TUNED and self.tuned is not None and self.tuned.daemon_running and self.tuned.profile:
            return True  # "Current active profile" comes from the running daemon over D-Bus
        if manager == PPD and self.ppd_profile and not (self.running(TUNED_PPD) or self.running(TLP_PD)):
            return True  # powerprofilesctl answered, and no other daemon provides its D-Bus API
        if manager == TLP:
            # TLP is not a daemon (a oneshot service plus udev rules): tlp-stat's own state is the best witness
            if self.tlp is not None and self.tlp.enabled is not None:
                return self.tlp.enabled and self.tlp_conf.get("TLP_ENABLE") != "0"
            if state is not None:
                return False
            return False if not self.tlp_stat_available else None
        if state is not None or self.processes_known:
            return False
        return None

    def running_managers(self) -> tuple[str, ...]:
        return tuple(m for m in MANAGERS if self.running(m))

    def manager_evidence(self, manager: str) -> dict[str, str]:
        ev: dict[str, str] = {}
        if manager in self.services:
            ev[f"systemctl is-active {manager}"] = self.services[manager]
        if self.processes.get(manager):
            ev[f"processes sample: {manager}"] = "pid " + ", ".join(str(p) for p in self.processes[manager])
        return ev

    @classmethod
    def gather(cls, host: "Host") -> "PowerFacts":
        evidence: dict[str, str] = {}
        services: dict[str, str] = {}
        services_reason = None
        result = host.run(list(IS_ACTIVE_ARGV))
        if result is None:
            services_reason = "systemctl is not available"
        else:
            services = parse_is_active(result.stdout, MANAGERS)  # rc 3 when some unit is inactive: still valid
            if services:
                evidence[_line(IS_ACTIVE_ARGV)] = ", ".join(f"{u}={s}" for u, s in services.items())
            else:
                first = (result.stderr or result.stdout or "").strip().splitlines()
                services_reason = f"systemctl could not answer ({first[0] if first else f'exit status {result.rc}'})"

        processes: dict[str, list[int]] = {}
        rows = host.sample("processes")
        processes_known = isinstance(rows, list)
        processes_reason = None if processes_known else host.sample_errors.get("processes", "no process list sampled")
        for row in rows if processes_known else ():
            if not isinstance(row, dict):
                continue
            manager = PROCESS_NAMES.get(str(row.get("name") or ""))
            pid = row.get("pid")
            if manager and isinstance(pid, int):
                processes.setdefault(manager, []).append(pid)

        ppd_profile = None
        get = host.run(list(PPD_GET_ARGV))
        if get is not None and get.ok:
            ppd_profile = parse_ppd_get(get.stdout)
            if ppd_profile:
                evidence[_line(PPD_GET_ARGV)] = ppd_profile
        listing = host.run(list(PPD_LIST_ARGV))
        ppd_list = parse_ppd_list(listing.stdout) if listing is not None and listing.ok else PpdList()
        if ppd_list.active:
            evidence[_line(PPD_LIST_ARGV)] = "* " + ppd_list.active + "".join(
                f", {k}: {v}" for k, v in (ppd_list.profiles.get(ppd_list.active) or {}).items())
            ppd_profile = ppd_profile or ppd_list.active

        tuned = None
        tuned_result = host.run(list(TUNED_ARGV))
        if tuned_result is not None:
            tuned = parse_tuned_active(tuned_result.stdout + "\n" + tuned_result.stderr)
            shown = [line.strip() for line in tuned_result.stdout.splitlines()
                     if "profile" in line.lower() or "not running" in line]
            if shown:
                evidence[_line(TUNED_ARGV)] = "; ".join(shown)

        tlp = None
        tlp_result = host.run(list(TLP_STAT_ARGV))
        tlp_stat_available = tlp_result is not None
        if tlp_result is not None and (tlp_result.stdout or "").strip():
            tlp = parse_tlp_status(tlp_result.stdout)
            shown = [f"{k}={v}" for k, v in (("enabled", tlp.enabled), ("mode", tlp.mode),
                                              ("power source", tlp.power_source), ("tlp-pd", tlp.tlp_pd)) if v is not None]
            if shown:
                evidence[_line(TLP_STAT_ARGV)] = ", ".join(shown)
        tlp_conf = parse_tlp_conf(host.files.read(TLP_CONF))
        if "TLP_ENABLE" in tlp_conf:
            evidence[TLP_CONF] = f"TLP_ENABLE={tlp_conf['TLP_ENABLE']}"

        return cls(services, services_reason, {m: tuple(p) for m, p in processes.items()}, processes_known,
                   processes_reason, ppd_profile, ppd_list, tuned, tlp, tlp_conf, tlp_stat_available, evidence)
