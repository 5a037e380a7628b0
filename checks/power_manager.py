"""power-manager — power-profiles-daemon, tuned and its profile, TLP / auto-cpufreq, and managers fighting each other."""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.facts.power import (AUTO_CPUFREQ, PPD, THERMALD, TLP, TLP_PD, TUNED, TUNED_PPD, PowerFacts)

GOOD_TUNED = ("throughput-performance", "accelerator-performance", "latency-performance", "network-latency",
              "network-throughput", "hpc-compute", "cpu-partitioning", "realtime", "virtual-host", "virtual-guest")
SLOW_TUNED = ("balanced", "balanced-battery", "powersave", "desktop", "laptop-battery-powersave",
              "laptop-ac-powersave", "server-powersave", "desktop-powersave", "spindown-disk")

SET_TUNED = "sudo tuned-adm profile throughput-performance"
PPD_TO_TUNED = (
    "sudo systemctl disable --now power-profiles-daemon",
    "sudo dnf install tuned tuned-ppd || sudo apt install tuned tuned-ppd",
    "sudo systemctl enable --now tuned tuned-ppd",
    SET_TUNED,
)
TLP_AC_PERFORMANCE = (
    "printf 'CPU_SCALING_GOVERNOR_ON_AC=performance\\nCPU_ENERGY_PERF_POLICY_ON_AC=performance\\n"
    "CPU_BOOST_ON_AC=1\\nPLATFORM_PROFILE_ON_AC=performance\\n' | sudo tee /etc/tlp.d/90-tunehost-inference.conf",
    "sudo tlp start",
)
WHY_PPD = ("power-profiles-daemon writes energy_performance_preference (and platform_profile where the firmware has one): "
           "in balanced/power-saver the CPU's hardware P-state logic favours power over clock speed, which lowers "
           "llama.cpp token generation even when the governor in sysfs looks fine.")


class PowerManagerCheck(Check):
    id = "power-manager"
    title = "Power manager"
    judges = "power-profiles-daemon, tuned and its active profile, TLP / auto-cpufreq, conflicts between them"

    def run(self, facts):
        power = facts.get(PowerFacts)
        running = set(power.running_managers())
        if not power.anything_known and not (power.tuned and power.tuned.profile) and not power.ppd_profile:
            yield self.skip("cannot tell which power managers run: "
                            f"{power.services_reason or 'no systemd answer'}, and {power.processes_reason or 'no process list'}")
            return
        yield from self._conflicts(power, running)
        if PPD in running:
            yield self._ppd(power)
        if TUNED in running or TUNED_PPD in running:
            yield self._tuned(power)
        if TLP in running or TLP_PD in running:
            yield self._tlp(power)
        if AUTO_CPUFREQ in running:
            yield self.warn("auto-cpufreq is running: it switches governor, EPP and turbo by load and power source",
                            power.manager_evidence(AUTO_CPUFREQ),
                            fix=Fix("Force the performance governor for inference, or remove auto-cpufreq and use tuned.",
                                    ("sudo auto-cpufreq --force=performance",)),
                            detail="auto-cpufreq lowers clocks whenever it judges the load light or the laptop on battery.")
        if THERMALD in running:
            yield self.info("thermald is running (it only steps in near thermal limits; fine for inference)",
                            power.manager_evidence(THERMALD))
        if not running - {THERMALD}:
            how = "" if power.services_known else " (judged from the process list: systemd could not be asked)"
            ev = {**power.evidence, **_process_scan(power)}
            if not power.services_known:
                ev["systemctl is-active"] = power.services_reason or "unknown"
            yield self.ok(f"no power manager is running{how}", ev)

    def _conflicts(self, power: PowerFacts, running: set[str]):
        pairs: list[tuple[str, str, str, tuple[str, ...]]] = []
        if PPD in running and TUNED in running and TUNED_PPD not in running:
            pairs.append((PPD, TUNED, "both write EPP and the governor (tuned-ppd is the drop-in that lets them agree)",
                          ("sudo systemctl disable --now power-profiles-daemon",
                           "sudo dnf install tuned-ppd || sudo apt install tuned-ppd",
                           "sudo systemctl enable --now tuned-ppd", SET_TUNED)))
        if PPD in running and (TLP in running or TLP_PD in running):
            pairs.append((PPD, TLP, "TLP documents power-profiles-daemon as conflicting: each overwrites the other's "
                          "EPP, boost and platform profile",
                          ("sudo systemctl disable --now power-profiles-daemon",
                           "sudo systemctl mask power-profiles-daemon") + TLP_AC_PERFORMANCE))
        if TUNED in running and TLP in running:
            pairs.append((TUNED, TLP, "both set governor, EPP and boost",
                          ("sudo systemctl disable --now tlp", SET_TUNED)))
        if AUTO_CPUFREQ in running:
            for other in (PPD, TUNED, TLP):
                if other in running:
                    pairs.append((AUTO_CPUFREQ, other, "auto-cpufreq and another manager rewrite the same CPU settings",
                                  ("sudo auto-cpufreq --remove",)))
        for a, b, why, commands in pairs:
            evidence = {**power.manager_evidence(a), **power.manager_evidence(b), **power.evidence}
            yield self.fail(f"{a} and {b} both manage CPU power: {why}", evidence,
                            fix=Fix("Keep one power manager (tuned, with tuned-ppd for a desktop's profile switcher, "
                                    "suits an inference box; TLP set to performance on AC suits a laptop).", commands),
                            detail="Two managers overwrite each other's settings at every power or profile event, so "
                                   "what tunehost (or you) set does not last.")

    def _ppd(self, power: PowerFacts):
        ev = {**power.manager_evidence(PPD), **power.evidence}
        profile = power.ppd_profile
        degraded = power.ppd_list.driver(profile, "Degraded")
        platform = power.ppd_list.driver(profile, "PlatformDriver")
        if platform == "placeholder":
            ev["PlatformDriver"] = "placeholder (no ACPI platform_profile: only EPP is changed)"
        if profile in ("balanced", "power-saver"):
            return self.fail(f"power-profiles-daemon is active in '{profile}': the CPU is told to save power",
                             ev, fix=Fix("Switch to performance now; for an inference box replace power-profiles-daemon "
                                         "with tuned + tuned-ppd (throughput-performance).",
                                         ("powerprofilesctl set performance",) + PPD_TO_TUNED), detail=WHY_PPD)
        if profile == "performance":
            if degraded and degraded.lower() not in ("no", ""):
                return self.warn(f"power-profiles-daemon is in performance but degraded ({degraded})", ev,
                                 fix=Fix("Performance is being held back (lap detection or temperature); use tuned.",
                                         PPD_TO_TUNED), detail=WHY_PPD)
            return self.info("power-profiles-daemon is in performance (it returns to its saved profile on every "
                             "boot and desktop toggle)", ev,
                             fix=Fix("For a dedicated inference box tuned's throughput-performance is steadier.",
                                     PPD_TO_TUNED))
        return self.warn("power-profiles-daemon is running but its profile could not be read "
                         "(powerprofilesctl gave nothing; its default is balanced)", ev,
                         fix=Fix("Check and set the profile.", ("powerprofilesctl get", "powerprofilesctl set performance")),
                         detail=WHY_PPD)

    def _tuned(self, power: PowerFacts):
        ev = {**power.manager_evidence(TUNED), **power.manager_evidence(TUNED_PPD), **power.evidence}
        tuned = power.tuned
        fix = Fix("Switch tuned to a throughput profile (accelerator-performance also disables deep C-states).",
                  (SET_TUNED,))
        if tuned is None:
            return self.warn("tuned is running but `tuned-adm active` is not available to read its profile", ev,
                             fix=Fix("Read the profile.", ("tuned-adm active",)))
        names = tuned.names
        if tuned.daemon_running is False:
            return self.warn(f"tuned's preset profile {tuned.profile!r} is not applied: the daemon is not running", ev,
                             fix=Fix("Start tuned.", ("sudo systemctl enable --now tuned", SET_TUNED)))
        if not names:
            return self.warn("tuned is running with no active profile", ev, fix=fix)
        good = [n for n in names if n in GOOD_TUNED]
        slow = [n for n in names if n in SLOW_TUNED]
        via = " (set through tuned-ppd)" if power.running(TUNED_PPD) else ""
        if slow and not good:
            return self.warn(f"tuned profile '{' '.join(names)}'{via} favours power saving", ev, fix=fix,
                             detail="balanced/powersave profiles set a power-saving EPP and governor, costing token "
                                    "generation speed.")
        if good:
            return self.ok(f"tuned profile '{' '.join(names)}'{via} is a throughput profile", ev)
        return self.info(f"tuned profile '{' '.join(names)}' is not one tunehost knows; check what it sets", ev, fix=fix)

    def _tlp(self, power: PowerFacts):
        ev = {**power.manager_evidence(TLP), **power.manager_evidence(TLP_PD), **power.evidence}
        mode = (power.tlp.mode if power.tlp else None) or ""
        on_battery = "bat" in mode.lower() or "battery" in ((power.tlp.power_source if power.tlp else "") or "").lower()
        where = f" (mode {mode})" if mode else ""
        return self.warn(f"TLP manages CPU power{where}: its defaults trade speed for battery"
                         + (", and it is applying the battery profile now" if on_battery else ""), ev,
                         fix=Fix("Tell TLP to use full performance on AC (or disable TLP on a dedicated inference box: "
                                 "sudo systemctl disable --now tlp).", TLP_AC_PERFORMANCE),
                         detail="TLP sets governor, EPP, boost and platform_profile per power source; on battery (and "
                                "with its default balance_performance EPP on AC) llama.cpp runs slower.")


def _process_scan(power: PowerFacts) -> dict[str, str]:
    if power.processes_known:
        return {"processes sample": "no power-profiles-daemon, tuned, tuned-ppd, tlp-pd, auto-cpufreq process"}
    return {}
