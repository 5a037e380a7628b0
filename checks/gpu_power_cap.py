"""gpu-power-cap — an enforced GPU power limit below the card's default, and what it costs token generation.

NVIDIA: NVML's enforced/default limit (or `nvidia-smi -q` "Enforced/Current Power Limit" vs "Default Power Limit");
AMD: the card's hwmon power1_cap vs power1_cap_default. The cost is the share of the default-limit decode speed that
published power-limit sweeps keep at the same ratio (tunehost.facts.power_cap, its sources in docs/checks.md).
"""

from __future__ import annotations

from typing import Iterable

from tunehost.check import Check, Finding, Fix
from tunehost.facts.gpu import GpuFacts, GpuInfo
from tunehost.facts.power_cap import POWER_CAP_NOTICE, SOURCE, tg_share_at_cap

WARN_SHARE = 0.9  # ... and warned about when the sweeps keep less than this share of the speed at its low end
WHY = ("Single-stream token generation reads weights at memory bandwidth and needs little core power, so a moderate "
       "cap costs little; below about half the default the clocks fall far enough that decode slows, and near the "
       "card's floor it collapses. A cap may be deliberate (heat, noise, the power supply): then keep it and expect "
       "the lower speed.")


class GpuPowerCapCheck(Check):
    id = "gpu-power-cap"
    title = "GPU power cap"
    judges = "each GPU's enforced power limit against its default limit, and the token-generation speed it costs"

    def run(self, facts) -> Iterable[Finding]:
        gpus = facts.get(GpuFacts)
        cards = gpus.discrete
        if not cards:
            yield self.skip("no discrete GPU found" + (f" ({gpus.nvidia_error})" if gpus.nvidia_error else ""))
            return
        for g in cards:
            yield self._judge(g)

    def _judge(self, g: GpuInfo) -> Finding:
        names = (("power1_cap", "power1_cap_default") if g.vendor == "amd" else
                 ("enforced power limit", "default power limit"))
        ev = {f"{g.source or '?'} [{g.label}] {names[0]}": _w(g.power_limit_w),
              f"{g.source or '?'} [{g.label}] {names[1]}": _w(g.power_default_limit_w)}
        limit, default = g.power_limit_w, g.power_default_limit_w
        if not _plausible(limit) or not _plausible(default):
            what = " and ".join(n for n, v in zip(names, (limit, default)) if not _plausible(v))
            return self.skip(f"{g.label}: the {what} could not be read (driver, source or value)", ev)
        ratio = limit / default  # type: ignore[operator]
        if ratio >= POWER_CAP_NOTICE:
            return self.ok(f"{g.label}: power limit {limit:.0f} W, the default is {default:.0f} W", ev)
        share = tg_share_at_cap(ratio)
        summary = (f"{g.label}: power limit {limit:.0f} W is {ratio:.0%} of the default {default:.0f} W; "
                   f"token generation keeps about {share.low:.0%}-{share.high:.0%} of its speed at the default "
                   f"limit")
        fix = Fix(f"Restore the default limit if the cap is not deliberate (it returns at reboot unless a service "
                  f"sets it; {SOURCE} give the cost):", _restore(g, default))  # type: ignore[arg-type]
        if share.low < WARN_SHARE:
            return self.warn(summary, ev, fix=fix, detail=WHY)
        return self.info(summary, ev, fix=fix, detail=WHY)


def _plausible(w: float | None) -> bool:
    return isinstance(w, (int, float)) and not isinstance(w, bool) and 1 <= w <= 2000


def _w(w: float | None) -> str:
    return f"{w:.2f} W" if _plausible(w) else "(absent)"


def _restore(g: GpuInfo, default: float) -> tuple[str, ...]:
    if g.vendor == "nvidia":
        where = f"-i {g.index} " if g.index is not None else ""
        return (f"sudo nvidia-smi {where}-pl {default:.0f}",)
    if g.vendor == "amd" and g.source:
        return (f"cat {g.source}/hwmon/hwmon*/power1_cap_default | sudo tee {g.source}/hwmon/hwmon*/power1_cap",)
    return ()
