"""cpu-hogs — background processes eating CPU during the sample window, and other inference servers.

The activity sample holds back-to-back windows: a process (or all others together) counts only when it was busy in
every one, so a load that comes and goes does not flip the verdict from one doctor run to the next. Snapshots
taken before the windows were recorded are judged from their one window, as before. Scripts that must not measure
a busy host wait for a quiet one with `tunehost gate --wait-quiet`."""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.facts.chassis import machine_of
from tunehost.facts.processes import HOG_PERCENT as WARN_PERCENT
from tunehost.facts.processes import HOG_SHARE as FAIL_SHARE
from tunehost.facts.processes import BusyProcess, ProcessFacts, ProcessInfo

SERVER_RSS_BYTES = 512 * 2**20  # a server holding this much has a model loaded

WHY = ("llama.cpp token generation runs one thread per core and waits for the slowest: a process that takes a "
       "core's time slices stalls every step, and it competes for memory bandwidth.")


class CpuHogsCheck(Check):
    id = "cpu-hogs"
    title = "Background CPU use"
    judges = "background processes eating CPU, and other inference servers holding memory"

    def run(self, facts):
        procs = facts.get(ProcessFacts)
        if procs.busy is None and procs.processes is None:
            yield self.skip(f"cannot see other processes: {procs.activity_reason}")
            return
        servers = {p.pid: p for p in procs.servers}
        if procs.busy is None:
            yield self.skip(f"no CPU sample: {procs.activity_reason}")
        else:
            yield from self._hogs(procs, servers)
        for server in servers.values():
            yield self._server(procs, server, machine_of(facts).systemd_init is not False)

    def _hogs(self, procs: ProcessFacts, servers: dict[int, ProcessInfo]):
        cpus = procs.cpu_count or 1
        window = f"{procs.interval_s:g} s" if procs.interval_s else "the sample window"
        steady = procs.windows is not None  # two windows or more: only load seen in every one counts
        if steady:
            window = f"{len(procs.windows or ())} back-to-back samples over {window}"
        total = procs.cpu_percent_total
        hogs = []
        for b in sorted(procs.busy or (), key=lambda b: -b.cpu_percent):
            if b.is_self or b.pid in servers:
                continue
            least = procs.steady_percent(b.pid) if steady else b.cpu_percent
            if least is not None and least > WARN_PERCENT:
                hogs.append((b, least))
        together = procs.steady_total(frozenset(servers)) if steady else None
        busy_together = together is not None and together / 100.0 / cpus >= FAIL_SHARE
        if busy_together and not any(least / 100.0 / cpus >= FAIL_SHARE for _, least in hogs):
            assert together is not None
            yield self._together(procs, servers, together, window, no_hog=not hogs)  # busy, whoever makes it so
        if not hogs:
            if busy_together:
                return
            ev = {f"activity sample ({window})": f"{total:g} % of one core used by all other processes together"
                  if total is not None else "no other process above the threshold",
                  "cpu_count": cpus}
            if steady:
                ev["hysteresis"] = (f"a process counts only when it used more than {WARN_PERCENT:g} % of a core in "
                                    "every sample")
            yield self.ok(f"no background process used more than {WARN_PERCENT:g} % of a core during {window}", ev)
            return
        for hog, least in hogs:
            info = procs.process(hog.pid)
            share = least / 100.0 / cpus
            every = " in every sample" if steady else ""
            used = f"{least:g} % of one core{every}" + (f" ({hog.cpu_percent:g} % over the whole span)" if steady else "")
            ev = {f"activity sample ({window}): pid {hog.pid} {hog.name}": f"{used} ({share:.0%} of {cpus} CPUs)"}
            if info and info.username:
                ev[f"pid {hog.pid} user"] = info.username
            summary = (f"{hog.name or 'pid ' + str(hog.pid)} (pid {hog.pid}) used {'at least ' if steady else ''}"
                       f"{least:g} % of a core{every}")
            fix = _pause_fix(hog, info, procs.uid)
            if share >= FAIL_SHARE:
                yield self.fail(f"{summary}: {share:.0%} of this {cpus}-CPU machine", ev, fix=fix, detail=WHY)
            else:
                yield self.warn(summary, ev, fix=fix, detail=WHY)

    def _together(self, procs: ProcessFacts, servers: dict[int, ProcessInfo], together: float, window: str, *,
                  no_hog: bool):
        """No single process steady, but the others together busy in every sample: short-lived jobs (a build)."""
        cpus = procs.cpu_count or 1
        top = [b for b in sorted(procs.busy or (), key=lambda b: -b.cpu_percent)
               if not b.is_self and b.pid not in servers][:5]
        names = ", ".join(f"{b.name or '?'} pid {b.pid} {b.cpu_percent:g} %" for b in top)
        ev = {f"activity sample ({window})": f"all other processes together: at least {together:g} % of one core "
                                             f"in every sample ({together / 100.0 / cpus:.0%} of {cpus} CPUs)",
              "busiest over the whole span": names or "?"}
        why = " (no single one in every sample: short-lived jobs such as a build)" if no_hog else ""
        return self.fail(f"other processes together used at least {together / 100.0 / cpus:.0%} of this {cpus}-CPU "
                         f"machine in every sample{why}", ev, fix=Fix(
                             "Wait until the jobs finish (scripts: `tunehost gate --wait-quiet 10m -- COMMAND` "
                             "waits for a quiet host, then runs COMMAND), or stop them.",
                             ("ps -eo pid,user,pcpu,args --sort=-pcpu",)),
                         detail=WHY)

    def _server(self, procs: ProcessFacts, server: ProcessInfo, systemd: bool = True):
        busy = next((b for b in procs.busy or () if b.pid == server.pid), None)
        ev = {f"processes sample: pid {server.pid}": f"{server.name} ({server.server})"}
        if server.rss_bytes is not None:
            ev[f"pid {server.pid} RSS"] = f"{server.rss_bytes / 2**30:.1f} GiB"
        if busy is not None:
            ev[f"pid {server.pid} CPU"] = f"{busy.cpu_percent:g} % of one core"
        stop = ("sudo systemctl stop ollama",) if server.server == "ollama" and systemd else (f"kill {server.pid}",)
        fix = Fix(f"Stop {server.name} before benchmarking or tuning (start it again afterwards).", stop)
        loaded = (server.rss_bytes or 0) >= SERVER_RSS_BYTES or (busy is not None and busy.cpu_percent > WARN_PERCENT)
        if loaded:
            return self.warn(f"{server.server} (pid {server.pid}) is running: it competes for memory bandwidth/VRAM",
                             ev, fix=fix, detail="A second inference server with a model loaded holds RAM/VRAM and, "
                             "when it serves, takes memory bandwidth from the llama.cpp you measure.")
        return self.info(f"{server.server} (pid {server.pid}) is running idle with no model loaded", ev, fix=fix)


def _pause_fix(hog: BusyProcess, info: ProcessInfo | None, uid: int | None) -> Fix:
    sudo = "" if uid == 0 else "sudo "  # a root run needs none; otherwise the process may be another user's
    return Fix(f"Find out what {hog.name or hog.pid} is; stop it, or pause it while llama.cpp runs "
               "(resume with kill -CONT). Scripts: `tunehost gate --wait-quiet 10m -- COMMAND` waits for a quiet "
               "host, then runs COMMAND.",
               (f"ps -o pid,user,pcpu,rss,args -p {hog.pid}", f"{sudo}kill -STOP {hog.pid}", f"{sudo}kill -CONT {hog.pid}"))
