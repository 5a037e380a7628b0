"""speed-drift — did this box get slower since its best measured run, and what changed on it since?

`tunehost bench` and `tunehost tune` record every measurement in the results store; `tunehost history --drift`
re-measures a model's last known best configuration and records whether the box got slower beyond the noise. This
check never measures (doctor is a quick judge): it reads what the store recorded (samples/results.json) and says,
per model,
- warn: the newest drift re-measure said "slower beyond the noise" (then → now, the change, what changed between);
- info: a host fact that decides speed (kernel, BIOS, memory modules, GPUs, CPU, llama.cpp build) changed since
  the model's last measurement, and nothing re-measured it since: a BIOS update that reset XMP shows up here first;
- ok: the newest re-measure found no clear change (or faster), or nothing changed since the best run.
"""

from __future__ import annotations

import shlex

from tunehost.check import Check, Fix
from tunehost.facts.results import SAMPLE_FILE, DriftRow, ModelHistory, speed_history

MAX_FINDINGS = 10  # per severity: a store with many models still gives a readable report
NO_RUNS = "no tunehost bench or tune result recorded on this host"
WHY = ("A slower box with the same settings is the sign of a change below them: a BIOS update that reset XMP, a new "
       "kernel or driver, a llama.cpp build that regressed, a GPU that trained a narrower PCIe link.")


def drift_command(model: str) -> str:
    """The re-measure command for a model (its name comes from the store: quoted, never run by a shell as is)."""
    return f"tunehost history --drift --model {shlex.quote(model)}"


def _ts(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def _row_text(row: DriftRow, *, named: bool = True) -> str:
    text = f"{row.test + ' ' if named else ''}{_ts(row.then)} -> {_ts(row.now)} t/s"
    if row.change_percent is not None:
        text += f" ({row.change_percent:+.1f} %"
        if row.low is not None and row.high is not None:
            text += f", 95 % interval {(row.low - 1) * 100:+.1f}..{(row.high - 1) * 100:+.1f} %"
        text += ")"
    return text


class SpeedDriftCheck(Check):
    id = "speed-drift"
    title = "Speed since the best measured run"
    judges = "the results store: the newest drift re-measure per model, and host facts changed since its best run"

    def run(self, facts):
        results, _, models = speed_history(facts)
        if results.unavailable:
            yield self.skip(results.unavailable)
            return
        evidence_base: dict[str, object] = {f"{SAMPLE_FILE} runs": len(results.runs)}
        if results.dropped:
            evidence_base["runs not valid (ignored)"] = f"{results.dropped}: {'; '.join(results.problems)}"
        if not models:
            yield self.skip(NO_RUNS, evidence_base)
            return
        slower = [m for m in models if m.drift is not None and m.drift.verdict == "slower beyond the noise"]
        changed = [m for m in models if m not in slower and m.changed_since_last]
        for m in slower[:MAX_FINDINGS]:
            yield self._slower(m, evidence_base)
        for m in changed[:MAX_FINDINGS]:
            yield self._changed(m, evidence_base)
        if slower or changed:
            return
        yield self._ok(models, evidence_base)

    def _slower(self, m: ModelHistory, base: dict[str, object]):
        drift = m.drift
        assert drift is not None
        evidence: dict[str, object] = {**base, "model": m.model, "re-measured": f"{drift.date} (run {drift.id})"}
        if m.reference is not None:
            evidence["best run"] = f"{m.reference.date} (run {m.reference.id}, {m.reference.command})"
        elif drift.since_run is not None:
            evidence["best run"] = f"run {drift.since_run}"
        for row in drift.rows:
            evidence[row.test] = _row_text(row, named=False) + (f": {row.verdict}" if row.verdict else "")
        if not drift.rows and m.reference is not None:  # a drift recorded before its rows were
            evidence["TG"] = f"{_ts(m.reference.best_tg)} -> {_ts(drift.best_tg)} t/s"
        evidence["what changed before the re-measure"] = drift.changed or "no host fact tunehost records"
        if m.changed_since_drift:
            evidence["what changed since the re-measure"] = m.changed_since_drift
        tg = next((r for r in drift.rows if r.test.startswith("tg")), drift.rows[0] if drift.rows else None)
        how = f": {_row_text(tg)}" if tg is not None else ""
        cause = f"; changed in between: {'; '.join(drift.changed)}" if drift.changed else ""
        text = ("Address what changed (re-enable XMP/EXPO after a BIOS update, the previous kernel or llama.cpp "
                "build, the other findings), then re-measure: if it is still slower, look at load, power and "
                "thermal state." if drift.changed else
                "No host fact tunehost records changed: look at what else runs (load), the CPUs llama.cpp may use "
                "(taskset, cgroup cpusets, container limits), power and thermal state, then re-measure.")
        fix = Fix(text, ("tunehost doctor", drift_command(m.model)))
        return self.warn(f"{m.model} got slower beyond the noise since its best run{how}, re-measured "
                         f"{drift.date}{cause}", evidence, fix=fix, detail=WHY)

    def _changed(self, m: ModelHistory, base: dict[str, object]):
        last = m.last
        what = "the last re-measure" if m.drift is not None else "the best run"
        evidence: dict[str, object] = {**base, "model": m.model,
                                       what: f"{last.date} (run {last.id}, {last.command})",
                                       f"what changed since {what}": m.changed_since_last}
        if last.best_tg is not None:
            evidence["TG then"] = f"{_ts(last.best_tg)} t/s"
        fix = Fix("Re-measure the best configuration on the host as it is now (it is recorded, and doctor then "
                  "says whether the change made it slower).", (drift_command(m.model),))
        return self.info(f"{'; '.join(m.changed_since_last)} since {what} of {m.model} ({last.date}): re-measure "
                         f"with `{drift_command(m.model)}`", evidence, fix=fix, detail=WHY)

    def _ok(self, models: tuple[ModelHistory, ...], base: dict[str, object]):
        evidence: dict[str, object] = dict(base)
        for m in models[:MAX_FINDINGS]:
            if m.drift is not None:
                evidence[m.model] = f"re-measured {m.drift.date}: {m.drift.verdict}"
            elif m.reference is not None:
                evidence[m.model] = f"best run {m.reference.date}, TG {_ts(m.reference.best_tg)} t/s"
        re_measured = [m for m in models if m.drift is not None]
        if re_measured:
            newest = max(re_measured, key=lambda m: (m.last.created, m.last.id))
            summary = (f"the newest re-measure ({newest.model}, {newest.last.date}) found {newest.drift.verdict}"
                       " and no host fact changed since")
        else:
            summary = (f"no host fact tunehost records changed since the best run of {len(models)} model"
                       f"{'s' if len(models) != 1 else ''}")
        return self.ok(summary, evidence)
