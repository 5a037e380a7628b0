"""The launch configuration: one typed object for "how llama-server is started".

advise produces it (``Plan.launch()``), tune searches over it, bench and the server bench run it,
and every renderer (shell, systemd unit, JSON, Ollama) consumes it. No renderer re-derives a flag:
what is printed is ``LaunchConfig.argv()``, with the pinning, environment and priority beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Flag:
    """One llama-server option: its name as printed, its value (None for a switch) and why."""

    name: str
    value: str | None
    reason: str = ""

    def argv(self) -> list[str]:
        return [self.name] if self.value is None else [self.name, self.value]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Flag:
        value = data.get("value")
        return cls(str(data["name"]), None if value is None else str(value), str(data.get("reason") or ""))


@dataclass(frozen=True)
class LaunchConfig:
    """How one llama-server is started: binary, flags (model included), environment, CPU pinning, priority.

    ``model`` is the main model's path (also present as ``-m`` in ``flags``); ``name`` is a display name.
    ``mlock_wanted``: --mlock is advised but the memlock limit blocks it in a shell (a unit can lift it).
    """

    model: str
    flags: tuple[Flag, ...]
    server: str = "llama-server"
    env: tuple[Flag, ...] = ()
    pin_cpus: tuple[int, ...] | None = None
    nice: int | None = None
    mlock_wanted: bool = False
    name: str | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)
    # router mode (llama-server --models-preset/--models-max): one config per model, named by its preset section;
    # `flags` are then the router's own (no -m), `model` is "" and `preset` holds the [*] section's shared flags
    models: tuple["LaunchConfig", ...] = ()
    preset: tuple[Flag, ...] = ()

    @property
    def is_router(self) -> bool:
        return bool(self.models)

    def model_configs(self) -> tuple["LaunchConfig", ...]:
        """Each model's full configuration: a router's models with the shared `preset` flags under their own
        (what each child server runs with); a single-model config is its own."""
        if not self.models:
            return (self,)
        out = []
        for m in self.models:
            own = {f.name for f in m.flags}
            out.append(replace(m, flags=tuple(f for f in self.preset if f.name not in own) + m.flags))
        return tuple(out)

    @property
    def model_name(self) -> str | None:  # the renderers' historical name for `name`
        return self.name

    def flag(self, name: str) -> Flag | None:
        return next((f for f in self.flags if f.name == name), None)

    def value(self, name: str) -> str | None:
        f = self.flag(name)
        return f.value if f else None

    def argv(self) -> list[str]:
        """The server's command line: binary first, then every flag in order."""
        out = [self.server]
        for f in self.flags:
            out.extend(f.argv())
        return out

    def server_args(self) -> list[str]:
        """The command line without the binary."""
        return self.argv()[1:]

    def with_flag(self, name: str, value: str | None, reason: str = "") -> LaunchConfig:
        """A copy with `name` set to `value` (replaced in place when present, else appended)."""
        new = Flag(name, value, reason)
        if self.flag(name) is None:
            return replace(self, flags=(*self.flags, new))
        return replace(self, flags=tuple(new if f.name == name else f for f in self.flags))

    def without(self, *names: str) -> LaunchConfig:
        return replace(self, flags=tuple(f for f in self.flags if f.name not in names))

    def to_json(self) -> dict[str, Any]:
        from tunehost.cpulist import format_cpu_list

        return {
            "model": self.model, "name": self.name, "server": self.server,
            "flags": [f.to_json() for f in self.flags], "env": [e.to_json() for e in self.env],
            "cpu_affinity": format_cpu_list(self.pin_cpus) if self.pin_cpus else None,
            "nice": self.nice, "mlock_blocked_by_limit": self.mlock_wanted, "argv": self.argv(),
            **({"models": [m.to_json() for m in self.models], "preset": [f.to_json() for f in self.preset]}
               if self.models else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LaunchConfig:
        from tunehost.cpulist import parse_cpu_list

        affinity = data.get("cpu_affinity")
        return cls(
            model=str(data["model"]),
            flags=tuple(Flag.from_json(f) for f in data.get("flags") or ()),
            server=str(data.get("server") or "llama-server"),
            env=tuple(Flag.from_json(e) for e in data.get("env") or ()),
            pin_cpus=tuple(parse_cpu_list(str(affinity))) if affinity else None,
            nice=int(data["nice"]) if data.get("nice") is not None else None,
            mlock_wanted=bool(data.get("mlock_blocked_by_limit")),
            name=data.get("name"),
            models=tuple(cls.from_json(m) for m in data.get("models") or ()),
            preset=tuple(Flag.from_json(f) for f in data.get("preset") or ()),
        )


# llama-server's speculative-decoding options, every spelling (common/arg.cpp: the set_spec() options, the
# draft model's placement/threads/KV, the n-gram lookup caches, --spec-default): what `bench --draft-ab` strips
# from a command line for its baseline. Switches take no value; every other one takes one.
SPEC_SWITCHES = frozenset({
    "--spec-default", "--spec-draft-cpu-moe", "-cmoed", "--cpu-moe-draft", "--spec-draft-backend-sampling",
    "--no-spec-draft-backend-sampling", "--fim-qwen-7b-spec", "--fim-qwen-14b-spec",
})
SPEC_VALUE_OPTIONS = frozenset({
    "-md", "--model-draft", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft", "-ctkd", "--cache-type-k-draft",
    "-ctvd", "--cache-type-v-draft", "-td", "--threads-draft", "-tbd", "--threads-batch-draft", "-Cd",
    "--cpu-mask-draft", "-Crd", "--cpu-range-draft", "--cpu-strict-draft", "--prio-draft", "--poll-draft", "-Cbd",
    "--cpu-mask-batch-draft", "-Crbd", "--cpu-range-batch-draft", "--cpu-strict-batch-draft", "--prio-batch-draft",
    "--poll-batch-draft", "-otd", "--override-tensor-draft", "-ncmoed", "--n-cpu-moe-draft", "--draft-p-split",
    "--draft-p-min", "-devd", "--device-draft", "-hfd", "-hfrd", "--hf-repo-draft", "-cd", "--ctx-size-draft",
    "-lcs", "--lookup-cache-static", "-lcd", "--lookup-cache-dynamic", "--draft", "--draft-n", "--draft-max",
    "--draft-min", "--draft-n-min",
})


def is_spec_option(name: str) -> bool:
    """Whether `name` (as written, before any `=`) is a speculative-decoding option of llama-server."""
    return name.startswith("--spec-") or name in SPEC_SWITCHES or name in SPEC_VALUE_OPTIONS


def without_speculation(argv: Iterable[str]) -> tuple[list[str], list[str]]:
    """A llama-server command line without its speculative-decoding options: (the rest, what was removed)."""
    words = list(argv)
    kept: list[str] = []
    removed: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, _ = word.partition("=")
        if i == 0 or not is_spec_option(name):
            kept.append(word)
        elif name in SPEC_SWITCHES or eq:
            removed.append(word)
        else:  # an option with its value in the next word
            removed.extend(words[i:i + 2])
            i += 1
        i += 1
    return kept, removed


def flags_from(pairs: Iterable[tuple[str, str | None]], reason: str = "") -> tuple[Flag, ...]:
    return tuple(Flag(name, value, reason) for name, value in pairs)
