"""Measurement facts: what `doctor` measured on the live host (samples/measure.json, format 1 in docs/snapshot.md).

    m = facts.get(MeasureFacts)
    m.memory_read_gbps          # 31.4 or None
    m.cpu_mhz_single            # {0: 4890.0}; {} when not measured
    m.why_missing("cpu_mhz_all")  # the reason a judgement must skip

Every key of the sample is optional and hostile until validated: a wrong type, a negative, NaN or infinite number
drops that key (the reason lands in `problems`), never the whole sample and never a crash. The sampler records raw
figures only; checks decide what they mean, so an old snapshot is re-judged by newer code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from tunehost.printable import one_line
from tunehost.bounds import number, whole_text
from tunehost.cpulist import MAX_CPUS

if TYPE_CHECKING:
    from tunehost.host import Host

MEASURE_SAMPLE = "measure"
MEASURE_FORMAT = 1
SAMPLE_FILE = f"samples/{MEASURE_SAMPLE}.json"
NOT_ASKED = "not measured (this run did not ask for it; `tunehost doctor` measures unless --quick)"
MAX_GBPS = 100_000.0     # no memory system reads 100 TB/s: a larger figure is garbage
MAX_MHZ = 20_000.0       # no CPU core runs at 20 GHz
MAX_CPU_ID = MAX_CPUS


def _number(value: Any, upper: float) -> float | None:
    return number(value, 0.0, upper, above_low=True)


def _mhz_map(value: Any) -> dict[int, float] | None:
    if not isinstance(value, Mapping):
        return None
    out: dict[int, float] = {}
    for key, mhz in value.items():
        text = str(key)
        cpu = whole_text(text, 0, MAX_CPU_ID - 1) if text.isdigit() else None
        if cpu is None:
            return None
        number = _number(mhz, MAX_MHZ)
        if number is None:
            return None
        out[cpu] = number
    return out


def _text(value: Any, limit: int = 200) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return one_line(value.strip(), limit)  # a snapshot's strings reach the terminal


@dataclass(frozen=True)
class MeasureFacts:
    """The validated measurement sample. Absent keys are None / empty; `skipped` says why nothing was measured."""

    memory_read_gbps: float | None = None
    memory_read_threads: int | None = None
    memory_probe_bytes: int | None = None
    memory_read_samples: tuple[float, ...] = ()
    cpu_mhz_single: Mapping[int, float] = field(default_factory=dict)
    cpu_mhz_all: Mapping[int, float] = field(default_factory=dict)
    cpu_mhz_source: str | None = None
    skipped: str | None = None              # nothing measured: busy host, --quick, no sample in the snapshot, ...
    memory_skipped: str | None = None       # why the bandwidth probe did not run (the clocks may have)
    clocks_skipped: str | None = None       # why the clock probe did not run (the bandwidth may have)
    problems: tuple[str, ...] = ()          # keys dropped because their values were not valid

    def why_missing(self, key: str) -> str:
        """Why `key` has no value: the reason a check gives when it must skip."""
        bad = [p for p in self.problems if p.startswith(key)]
        if bad:
            return f"the measurement is not valid: {bad[0]}"
        if self.skipped:
            return self.skipped
        if key.startswith("memory") and self.memory_skipped:
            return self.memory_skipped
        if key.startswith("cpu_mhz") and self.clocks_skipped:
            return self.clocks_skipped
        return f"not measured ({SAMPLE_FILE} has no {key})"

    @classmethod
    def from_sample(cls, data: Any, *, missing: str | None = None) -> "MeasureFacts":
        """Validate a decoded measure.json (or a live sampler's dict); `missing` is the reason when `data` is None."""
        if data is None:
            return cls(skipped=missing or "not measured")
        if not isinstance(data, Mapping):
            return cls(skipped=f"{SAMPLE_FILE} is not a JSON object", problems=("sample: not an object",))
        problems: list[str] = []
        fmt = data.get("format", MEASURE_FORMAT)
        if fmt != MEASURE_FORMAT:
            return cls(skipped=f"{SAMPLE_FILE} has format {_text(str(fmt), 20)}; this tunehost reads format {MEASURE_FORMAT}",
                       problems=("format: unsupported",))

        def take(key: str, convert, *args):
            if key not in data or data[key] is None:
                return None
            value = convert(data[key], *args)
            if value is None:
                problems.append(f"{key}: {str(data[key])[:40]!r} is not a valid value")
            return value

        gbps = take("memory_read_gbps", _number, MAX_GBPS)
        threads = take("memory_read_threads", _number, float(MAX_CPU_ID))
        probe = take("memory_probe_bytes", _number, float(1 << 50))
        samples_raw = data.get("memory_read_samples")
        samples: tuple[float, ...] = ()
        if isinstance(samples_raw, list):
            parsed = [_number(s, MAX_GBPS) for s in samples_raw]
            if all(p is not None for p in parsed):
                samples = tuple(p for p in parsed if p is not None)
            else:
                problems.append("memory_read_samples: not all positive numbers")
        single = take("cpu_mhz_single", _mhz_map) or {}
        every = take("cpu_mhz_all", _mhz_map) or {}
        return cls(
            memory_read_gbps=gbps,
            memory_read_threads=int(threads) if threads is not None and threads == int(threads) else None,
            memory_probe_bytes=int(probe) if probe is not None else None,
            memory_read_samples=samples,
            cpu_mhz_single=single,
            cpu_mhz_all=every,
            cpu_mhz_source=_text(data.get("cpu_mhz_source"), 40),
            skipped=_text(data.get("skipped")),
            memory_skipped=_text(data.get("memory_skipped")),
            clocks_skipped=_text(data.get("clocks_skipped")),
            problems=tuple(problems),
        )

    @classmethod
    def gather(cls, host: "Host") -> "MeasureFacts":
        """The host's measurement: replayed from a snapshot, or taken live by the `measure` sampler.

        On the live host the sampler runs only when the run asked for measuring (`host.measure` is true, see
        `tunehost doctor --quick`); otherwise every measured judgement skips with the reason.
        """
        if host.live and not host.measure:
            # recorded, so that a snapshot of this run replays the same reason
            host.put_sample(MEASURE_SAMPLE, {"format": MEASURE_FORMAT, "skipped": host.measure_off_reason or NOT_ASKED})
        data = host.sample(MEASURE_SAMPLE)
        missing = host.sample_errors.get(MEASURE_SAMPLE)
        if missing and not host.live:
            missing = f"not measured: {missing} (a snapshot taken with `tunehost snapshot` records it)"
        return cls.from_sample(data, missing=missing)
