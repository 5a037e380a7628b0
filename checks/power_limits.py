"""power-limits — the ACPI platform profile and the RAPL package power limits (MSR and MMIO; the lower one rules)."""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.facts.power import PPD, PowerFacts
from tunehost.facts.power_limits import (LONG_TERM, PLATFORM_PROFILE, SHORT_TERM, PowerLimitFacts, RaplConstraint,
                                         RaplZone)

PERFORMANCE = "performance"
LOW_PROFILES = ("low-power", "quiet", "cool")      # the kernel's names below balanced
PL1_LOW_RATIO = 0.75   # PL1 below 75 % of the rated (TDP) power: more than an OEM's cTDP-down
PL1_FAIL_RATIO = 0.5   # below half the rated power: the CPU cannot hold even its base clock on all cores
MMIO_GAP_RATIO = 0.8   # MSR and MMIO PL1 more than 20 % apart: one of them was rewritten (EC, DPTF, a tool)
WHY = ("Prompt processing runs every core flat out: a package power limit or a low-power platform profile caps the "
       "clock under load while every cpufreq setting still says performance.")


def watts(uw: int | None) -> str:
    return "?" if uw is None else f"{uw / 1_000_000:g} W"


class PowerLimitsCheck(Check):
    id = "power-limits"
    title = "Platform profile and CPU power limits"
    judges = "the ACPI platform_profile (performance when offered) and the RAPL PL1/PL2 package limits, MSR and MMIO"

    def run(self, facts):
        limits = facts.get(PowerLimitFacts)
        zones = limits.package_zones()
        judged_limits = [z for z in zones if z.enabled is not False and z.constraint(LONG_TERM)
                         and z.constraint(LONG_TERM).limit_uw]  # type: ignore[union-attr]
        if limits.platform_profile is None and not judged_limits:
            reason = limits.profile_problem or (
                "no ACPI platform_profile and no RAPL package power limit readable (/sys/firmware/acpi/platform_profile, "
                "/sys/class/powercap/intel-rapl*): a desktop, a server, AMD or a VM")
            yield self.skip(reason, limits.evidence)
            return
        findings = []
        profile = self._profile(limits, facts)
        if profile is not None:
            findings.append(profile)
        findings.extend(self._rapl(limits, judged_limits))
        bad = [f for f in findings if f.severity.value not in ("ok",)]
        if bad:
            yield from bad
            return
        parts = [f.summary for f in findings]
        evidence: dict[str, str] = {}
        for f in findings:
            evidence.update(f.evidence)
        yield self.ok("; ".join(parts), evidence)

    def _profile(self, limits: PowerLimitFacts, facts):
        current, choices = limits.platform_profile, limits.profile_choices
        if current is None:
            return None
        evidence = dict(limits.evidence)
        higher = PERFORMANCE if PERFORMANCE in choices else None
        if higher is None and current in LOW_PROFILES:
            # without a choices file every platform-profile driver still offers balanced
            higher = next((c for c in reversed(choices) if c not in LOW_PROFILES), None) if choices else "balanced"
        if higher is None or current == higher:
            return self.ok(f"platform_profile {current}", evidence)
        if limits.on_battery:
            return self.info(f"platform_profile is {current} on battery ({higher} is offered; on AC power it should "
                             f"be {higher})", evidence)
        ppd = facts.get(PowerFacts).running(PPD)
        commands = ((f"powerprofilesctl set {higher}",) if ppd and higher == PERFORMANCE
                    else (f"echo {higher} | sudo tee {PLATFORM_PROFILE}",))
        trap = (" power-profiles-daemon's balanced profile lowers the firmware's power limits although every cpufreq "
                "setting can still read performance." if current == "balanced" else "")
        offered = f"offered: {' '.join(choices)}" if choices else "platform_profile_choices unreadable"
        return self.warn(f"platform_profile is {current}, below {higher} ({offered})",
                         evidence, fix=Fix(f"Select the {higher} platform profile on AC power.{trap} "
                                           "power-profiles-daemon, tuned-ppd or TLP (PLATFORM_PROFILE_ON_AC) set it "
                                           "again at boot and on power changes: set it there.", commands), detail=WHY)

    def _rapl(self, limits: PowerLimitFacts, zones: list[RaplZone]):
        if not zones:
            return
        ruling = limits.ruling_limit(LONG_TERM)
        assert ruling is not None
        zone, pl1 = ruling
        rated = max((c.max_uw for z in limits.package_zones() for c in [z.constraint(LONG_TERM)]
                     if c is not None and c.max_uw), default=None)
        evidence: dict[str, str] = {}
        for z in zones:
            evidence.update(z.evidence())
        others = [(z, z.constraint(LONG_TERM)) for z in zones if z is not zone]
        higher = [(z, c) for z, c in others if c and c.limit_uw and pl1.limit_uw
                  and pl1.limit_uw < MMIO_GAP_RATIO * c.limit_uw and z.kind != zone.kind]
        where = zone.path.rsplit("/", 1)[-1]
        problems = []
        severity = "ok"
        if rated and pl1.limit_uw and pl1.limit_uw < PL1_LOW_RATIO * rated:
            severity = "fail" if pl1.limit_uw < PL1_FAIL_RATIO * rated else "warn"
            problems.append(f"package power limit PL1 is {watts(pl1.limit_uw)} ({where}), below the CPU's rated "
                            f"{watts(rated)}")
        if higher:
            other_zone, other = higher[0]
            if severity == "ok":
                severity = "warn"
            problems.append(f"the {zone.kind} limit rules: PL1 {watts(pl1.limit_uw)} ({where}) while the "
                            f"{other_zone.kind} zone says {watts(other.limit_uw)}")  # type: ignore[union-attr]
        if not problems:
            pl2 = limits.ruling_limit(SHORT_TERM)
            text = f"package power limit PL1 {watts(pl1.limit_uw)}"
            if pl2:
                text += f", PL2 {watts(pl2[1].limit_uw)}"
            text += f" (rated {watts(rated)})" if rated else ""
            yield self.ok(text, evidence)
            return
        target = rated if rated and pl1.limit_uw and pl1.limit_uw < PL1_LOW_RATIO * rated else None
        if higher and target is None:
            target = higher[0][1].limit_uw  # type: ignore[union-attr]
        commands = tuple(f"echo {target} | sudo tee {z.path}/constraint_{c.index}_power_limit_uw"
                         for z, c in _low_zones(zones, target)) if target else ()
        fix = Fix("Something lowered the package power limit: thermald's RAPL controller or DPTF tables, the "
                  "laptop's embedded controller (it rewrites the MMIO limit on AC and power-mode changes), an OEM "
                  "tool, throttled/TLP, or a BIOS setting. Raise it back to the rated power in every zone (the lower "
                  "of MSR and MMIO rules), then find the writer: check `systemctl status thermald`, the BIOS power "
                  "options and the vendor tool; the EC may set it again after a suspend or a charger change.",
                  commands + ("tunehost doctor --check power-limits",))
        summary = "; ".join(problems)
        if severity == "fail":
            yield self.fail(summary, evidence, fix=fix, detail=WHY)
        else:
            yield self.warn(summary, evidence, fix=fix, detail=WHY)


def _low_zones(zones: list[RaplZone], target: int) -> list[tuple[RaplZone, RaplConstraint]]:
    out = []
    for z in zones:
        c = z.constraint(LONG_TERM)
        if c is not None and c.limit_uw and c.limit_uw < target:
            out.append((z, c))
    return out
