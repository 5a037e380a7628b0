"""What a GGUF model file says about itself: shape, attention layout, experts and exact tensor bytes.

`read_model(path)` reads the metadata and tensor table of a GGUF (or of every part of a split GGUF) through the
`gguf` package's `GGUFReader`, the reader maintained inside llama.cpp. Tensor data is never read: the file is
memory-mapped and only its header pages are touched, so a 20 GB model reads in well under a second.

`ModelFacts.from_shape(...)` builds the same facts from numbers alone (JSON fixtures of real models), for
arithmetic that needs the shape but not the bytes.
"""

from __future__ import annotations

import functools
import json
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from tunehost.errors import TunehostError
from tunehost.printable import one_line

GGUF_MAGIC = b"GGUF"
SUPPORTED_GGUF_VERSIONS = (2, 3)
MAX_NAME_CHARS = 200  # general.name is shown in one line and in a unit's Description=

# llama.cpp's LLM_FFN_EXPS_REGEX (common/common.h): exactly the tensors --cpu-moe / --n-cpu-moe move to the CPU.
ROUTED_EXPERT_RE = re.compile(r"\.ffn_(up|down|gate|gate_up)_(ch|)exps")
SHARED_EXPERT_MARK = "_shexp"
_LAYER_RE = re.compile(r"^blk\.([0-9]{1,9})\.")
ARCH_NAME_RE = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
SPLIT_NAME_RE = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")

# Layer pattern llama.cpp applies when the GGUF has no `<arch>.attention.sliding_window_pattern` key
# (src/models/*.cpp load_arch_hparams: gemma2 -> set_swa_pattern(2), gemma3 -> 6, gpt-oss -> 2).
DEFAULT_SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "gpt-oss": 2}

# llama.cpp's recurrent and hybrid architectures (src/llama-arch.cpp llm_arch_is_recurrent / llm_arch_is_hybrid) and
# how each one marks its recurrent layers (src/models/<arch>.cpp load_arch_hparams), which decides which layers get
# a KV cache and which a recurrent state (src/llama-model.cpp llama_model::create_memory, the hybrid layer filters):
#   all          every layer is recurrent, no KV cache at all (mamba, mamba2: llama_memory_recurrent)
#   interval     `attention.recurrent_layers` (bool per layer) or else layer il is recurrent when
#                (il + 1) % `full_attention_interval` != 0 (default 4); KV only on the others (qwen3next, qwen35*)
#   no_kv_heads  layer il is recurrent when head_count_kv[il] == 0 (granitehybrid, jamba, lfm2)
#   nemotron     recurrent when head_count_kv[il] == 0 and feed_forward_length[il] == 0; KV on layers with heads and
#                no FFN; MLP-only layers have neither (nemotron_h, nemotron_h_moe)
#   both         every layer has both a KV cache and a recurrent state (falcon-h1)
RECURRENT_RULES: dict[str, str] = {
    "mamba": "all",
    "mamba2": "all",
    "qwen3next": "interval",
    "qwen35": "interval",
    "qwen35moe": "interval",
    "granitehybrid": "no_kv_heads",
    "jamba": "no_kv_heads",
    "lfm2": "no_kv_heads",
    "lfm2moe": "no_kv_heads",
    "nemotron_h": "nemotron",
    "nemotron_h_moe": "nemotron",
    "falcon-h1": "both",
}
# Recurrent or hybrid in llama.cpp, but with a state tunehost does not size (RWKV's wkv state, linear attention kinds)
UNSIZED_RECURRENT = frozenset({
    "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7", "plamo2", "kimi-linear", "minimax-01", "bailingmoe3", "glm5-next",
    "qwen4exp", "kimi-k3",
})
DEFAULT_FULL_ATTENTION_INTERVAL = 4  # qwen3next/qwen35 load_arch_hparams
# Architectures whose recurrent state keeps rollback snapshots for MTP/EAGLE3 drafting (src/llama-arch.cpp
# llm_arch_supports_rs_rollback; llama_context clamps n_rs_seq to 0 for every other one)
RS_ROLLBACK_ARCHS = frozenset({
    "kimi-k3", "qwen35", "qwen35moe", "qwen4exp", "deepseek4", "glm5-next", "nemotron_h", "nemotron_h_moe", "lfm2",
    "lfm2moe", "bailingmoe3",
})

# Arrays longer than this (tokenizer vocab, merges, token types) are skipped, not decoded, while reading.
_SKIP_ARRAY_ABOVE = 4096

# The ranges a usable model's shape stays in, far beyond any real model (today's largest: 126 layers, 16384-wide
# embeddings, 128 heads, 512 experts, a 10M-token context). Past them a value is garbage, and the memory arithmetic
# built on it (one entry per layer, KV bytes per token) would hang, overflow or allocate without end.
SHAPE_LIMITS: dict[str, tuple[int, int]] = {
    "block_count": (1, 4096),
    "embedding_length": (1, 1 << 20),
    "attention.head_count": (0, 1 << 14),
    "attention.head_count_kv": (0, 1 << 14),
    "attention.key_length": (0, 1 << 16),
    "attention.value_length": (0, 1 << 16),
    "attention.key_length_swa": (0, 1 << 16),
    "attention.value_length_swa": (0, 1 << 16),
    "attention.sliding_window": (0, 1 << 30),
    "attention.sliding_window_pattern": (0, 4096),
    "context_length": (1, 1 << 30),
    "vocab_size": (1, 1 << 24),
    "feed_forward_length": (0, 1 << 24),
    "expert_count": (0, 1 << 14),
    "expert_used_count": (0, 1 << 14),
    "expert_shared_count": (0, 1 << 14),
    "expert_feed_forward_length": (0, 1 << 24),
    "expert_shared_feed_forward_length": (0, 1 << 24),
    "full_attention_interval": (1, 4096),
    "nextn_predict_layers": (0, 64),
    "attention.key_length_mla": (0, 1 << 16),
    "attention.value_length_mla": (0, 1 << 16),
    "ssm.conv_kernel": (0, 1 << 10),
    "ssm.inner_size": (0, 1 << 20),
    "ssm.state_size": (0, 1 << 16),
    "ssm.group_count": (0, 1 << 14),
    "shortconv.l_cache": (0, 1 << 10),
}
MAX_TENSOR_DIMS = 4  # GGML_MAX_DIMS
MAX_TENSOR_ELEMENTS = 1 << 48


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the model as stored in the file."""

    name: str
    ggml_type: str  # "Q4_K", "F16", ...
    shape: tuple[int, ...]  # GGUF order: ne[0] first
    n_elements: int
    n_bytes: int

    @property
    def layer(self) -> int | None:
        """The block index of `blk.N.*` tensors; None for embeddings, output and other globals."""
        match = _LAYER_RE.match(self.name)
        return int(match.group(1)) if match else None

    @property
    def kind(self) -> str:
        """"routed_expert" (what --n-cpu-moe moves), "shared_expert" or "other"."""
        if ROUTED_EXPERT_RE.search(self.name):
            return "routed_expert"
        if SHARED_EXPERT_MARK in self.name:
            return "shared_expert"
        return "other"


@dataclass(frozen=True)
class WeightBytes:
    """Exact weight bytes of a model, grouped the way llama.cpp places them.

    `per_layer[i]` is every `blk.i.*` tensor (routed experts included); `routed_experts_per_layer[i]` is the part of
    it that `--n-cpu-moe` moves; `token_embd` always stays on the CPU; `output` is the output layer
    (output.weight, output_norm and any other non-block tensor). When the model ties its output to the token
    embeddings (`output_tied`), llama.cpp loads a second copy of token_embd on the output layer's device.
    """

    routed_experts: int = 0
    shared_experts: int = 0
    other: int = 0
    token_embd: int = 0
    output: int = 0
    output_tied: bool = False
    per_layer: tuple[int, ...] = ()
    routed_experts_per_layer: tuple[int, ...] = ()
    largest_routed_expert_layer: int = 0

    @property
    def total(self) -> int:
        """All weight bytes in the file(s)."""
        return self.routed_experts + self.shared_experts + self.other

    @property
    def non_routed(self) -> int:
        """Everything but routed experts: attention, norms, router, shared experts, dense FFN, embeddings, output."""
        return self.total - self.routed_experts

    @property
    def output_device_bytes(self) -> int:
        """Bytes that land on the output layer's device (a duplicated token_embd when the output is tied)."""
        return self.output + (self.token_embd if self.output_tied else 0)

    @classmethod
    def of(cls, tensors: Iterable[TensorInfo], block_count: int) -> "WeightBytes":
        """Group tensor bytes; pure."""
        routed = shared = other = token_embd = output = 0
        per_layer = [0] * block_count
        routed_per_layer = [0] * block_count
        has_output_weight = False
        for t in tensors:
            kind = t.kind
            if kind == "routed_expert":
                routed += t.n_bytes
            elif kind == "shared_expert":
                shared += t.n_bytes
            else:
                other += t.n_bytes
            layer = t.layer
            if layer is not None and layer < block_count:
                per_layer[layer] += t.n_bytes
                if kind == "routed_expert":
                    routed_per_layer[layer] += t.n_bytes
            elif t.name.startswith("token_embd."):
                token_embd += t.n_bytes
            else:
                output += t.n_bytes
                has_output_weight = has_output_weight or t.name == "output.weight"
        return cls(
            routed_experts=routed,
            shared_experts=shared,
            other=other,
            token_embd=token_embd,
            output=output,
            output_tied=not has_output_weight and token_embd > 0,
            per_layer=tuple(per_layer),
            routed_experts_per_layer=tuple(routed_per_layer),
            largest_routed_expert_layer=max(routed_per_layer, default=0),
        )


@dataclass(frozen=True)
class RecurrentShape:
    """The recurrent-state shape of a recurrent layer (`<arch>.ssm.*`, `<arch>.shortconv.l_cache`).

    llama.cpp keeps, per recurrent layer and per sequence, one F32 conv-state row of `n_embd_r` values and one F32
    SSM-state row of `n_embd_s` values (src/llama-hparams.cpp llama_hparams::n_embd_r / n_embd_s;
    src/llama-memory-recurrent.cpp allocates them as [n_embd_r, n_seq] and [n_embd_s, n_seq]), whatever the context.
    """

    conv_kernel: int = 0  # ssm_d_conv
    inner_size: int = 0  # ssm_d_inner
    state_size: int = 0  # ssm_d_state
    group_count: int = 0  # ssm_n_group (0 for mamba1)
    shortconv_l_cache: int = 0  # LFM2's short convolution
    embedding_length: int = 0

    @property
    def n_embd_r(self) -> int:
        """Conv-state values per sequence (llama_hparams::n_embd_r)."""
        if self.shortconv_l_cache:
            return self.embedding_length * (self.shortconv_l_cache - 1)
        return max(self.conv_kernel - 1, 0) * (self.inner_size + 2 * self.group_count * self.state_size)

    @property
    def n_embd_s(self) -> int:
        """SSM-state values per sequence (llama_hparams::n_embd_s)."""
        return self.state_size * self.inner_size

    @property
    def bytes_per_seq(self) -> int:
        """Both rows as F32 (create_memory passes GGML_TYPE_F32 for type_r and type_s)."""
        return 4 * (self.n_embd_r + self.n_embd_s)


@dataclass(frozen=True)
class QuantShare:
    """How much of the model one ggml type holds."""

    ggml_type: str
    n_tensors: int
    n_bytes: int


@dataclass(frozen=True)
class ModelFacts:
    """The facts about one model that memory and speed arithmetic need.

    Per-layer values (`head_count_kv`, `swa_layers`) always have `block_count` entries. Unknown optional values are
    None; a model without experts has `expert_count == 0`.
    """

    architecture: str
    block_count: int
    embedding_length: int
    head_count: int
    head_count_kv: tuple[int, ...]
    key_length: int
    value_length: int
    name: str | None = None
    context_length: int | None = None
    vocab_size: int | None = None
    feed_forward_length: int | None = None
    expert_count: int = 0
    expert_used_count: int = 0
    expert_shared_count: int = 0
    expert_feed_forward_length: int | None = None
    expert_shared_feed_forward_length: int | None = None
    sliding_window: int | None = None
    swa_layers: tuple[bool, ...] = ()
    key_length_swa: int | None = None
    value_length_swa: int | None = None
    swa_note: str | None = None
    kv_layers: tuple[bool, ...] = ()  # layers with a KV cache; () = every layer
    recurrent_layers: tuple[bool, ...] = ()  # layers with a recurrent state; () = none
    recurrent: RecurrentShape | None = None
    mla: bool = False  # multi-head latent attention: a K cache of key_length (kv_lora_rank + rope), no V cache
    nextn_layers: int = 0  # trailing MTP blocks: no KV in the main context
    memory_note: str | None = None
    file_type: str | None = None
    path: str | None = None
    parts: tuple[str, ...] = ()
    file_size: int = 0
    tensors: tuple[TensorInfo, ...] = field(default=(), repr=False)
    weights: WeightBytes = field(default_factory=WeightBytes)

    @property
    def is_moe(self) -> bool:
        return self.expert_count > 0

    @property
    def has_swa(self) -> bool:
        return any(self.swa_layers)

    @property
    def has_recurrent(self) -> bool:
        return any(self.recurrent_layers)

    def has_kv(self, il: int) -> bool:
        """Whether llama.cpp gives layer `il` a KV cache in the main context."""
        return self.kv_layers[il] if self.kv_layers else True

    @property
    def n_params(self) -> int:
        """Parameter count from the tensor table (0 for shape-only facts)."""
        return sum(t.n_elements for t in self.tensors)

    @cached_property
    def quant_histogram(self) -> tuple[QuantShare, ...]:
        """Bytes per ggml type, largest share first."""
        shares: dict[str, list[int]] = {}
        for t in self.tensors:
            entry = shares.setdefault(t.ggml_type, [0, 0])
            entry[0] += 1
            entry[1] += t.n_bytes
        return tuple(
            QuantShare(k, n, b) for k, (n, b) in sorted(shares.items(), key=lambda kv: (-kv[1][1], kv[0]))
        )

    @classmethod
    def from_shape(
        cls,
        *,
        architecture: str,
        block_count: int,
        embedding_length: int,
        head_count: int,
        head_count_kv: int | Sequence[int],
        key_length: int | None = None,
        value_length: int | None = None,
        sliding_window: int | None = None,
        sliding_window_pattern: int | Sequence[bool] | None = None,
        weights: WeightBytes | Mapping[str, Any] | None = None,
        recurrent: RecurrentShape | Mapping[str, Any] | None = None,
        recurrent_layers: Sequence[bool] | None = None,
        full_attention_interval: int | None = None,
        feed_forward_per_layer: Sequence[int] | None = None,
        **optional: Any,
    ) -> "ModelFacts":
        """Facts from a shape alone (no file): fills per-layer tuples and the SWA layout the way `read_model` does.

        `optional` takes any other field by name (name, context_length, vocab_size, expert_count, ...).
        """
        if isinstance(weights, Mapping):
            weights = WeightBytes(**{k: tuple(v) if isinstance(v, list) else v for k, v in weights.items()})
        kv = _per_layer(head_count_kv, block_count)
        swa, note = swa_layout(architecture, block_count, sliding_window, sliding_window_pattern)
        if isinstance(recurrent, Mapping):
            recurrent = RecurrentShape(**{"embedding_length": embedding_length, **recurrent})
        layout = memory_layout(
            LayoutInputs(architecture, block_count, kv, tuple(feed_forward_per_layer or ()),
                         tuple(recurrent_layers) if recurrent_layers is not None else None,
                         full_attention_interval, int(optional.get("nextn_layers", 0)), recurrent)
        )
        return cls(
            architecture=architecture,
            block_count=block_count,
            embedding_length=embedding_length,
            head_count=head_count,
            head_count_kv=kv,
            key_length=key_length or embedding_length // head_count,
            value_length=value_length or key_length or embedding_length // head_count,
            sliding_window=sliding_window or None,
            swa_layers=swa,
            swa_note=note,
            weights=weights or WeightBytes(),
            kv_layers=layout.kv_layers,
            recurrent_layers=layout.recurrent_layers,
            recurrent=recurrent if layout.recurrent_layers else None,
            memory_note=layout.note,
            **optional,
        )

    @classmethod
    def from_json(cls, path: str | Path) -> "ModelFacts":
        """Shape-only facts from a JSON object of `from_shape` keyword arguments ("_"-prefixed keys are comments)."""
        data = json.loads(Path(path).read_text())
        return cls.from_shape(**{k: v for k, v in data.items() if not k.startswith("_")})


def swa_layout(
    architecture: str,
    block_count: int,
    sliding_window: int | None,
    pattern: int | Sequence[bool] | None,
) -> tuple[tuple[bool, ...], str | None]:
    """Which layers use sliding-window attention, as llama.cpp decides it, plus a note when it had to guess.

    A bool array pattern is per layer (true = SWA); an integer period p marks layer il as SWA when
    `il % p < p - 1` (llama_hparams::set_swa_pattern, dense layer last). Without a pattern key only the
    architectures in DEFAULT_SWA_PERIOD are known; others are counted as full attention (never under-estimates KV).
    """
    if not sliding_window:
        return (False,) * block_count, None
    if pattern is not None and not isinstance(pattern, int):
        flags = tuple(bool(x) for x in pattern)
        if len(flags) != block_count:
            return (False,) * block_count, (
                f"sliding_window_pattern has {len(flags)} entries for {block_count} layers; "
                "KV counted as full attention"
            )
        return flags, None
    period = pattern if isinstance(pattern, int) else DEFAULT_SWA_PERIOD.get(architecture)
    if period is None:
        return (False,) * block_count, (
            f"{architecture} declares sliding_window={sliding_window} but no layer pattern tunehost knows; "
            "KV counted as full attention (an over-estimate if llama.cpp uses SWA for it)"
        )
    return tuple(period == 0 or (il % period < period - 1) for il in range(block_count)), None


@dataclass(frozen=True)
class LayoutInputs:
    """What decides which layers keep KV and which keep a recurrent state."""

    architecture: str
    block_count: int
    head_count_kv: tuple[int, ...]
    feed_forward: tuple[int, ...] = ()  # per layer; () = unknown
    recurrent_flags: tuple[bool, ...] | None = None  # `<arch>.attention.recurrent_layers`
    full_attention_interval: int | None = None
    nextn_layers: int = 0
    recurrent: RecurrentShape | None = None


@dataclass(frozen=True)
class MemoryLayout:
    kv_layers: tuple[bool, ...]
    recurrent_layers: tuple[bool, ...]
    note: str | None = None


def memory_layout(given: LayoutInputs) -> MemoryLayout:
    """Per layer: a KV cache, a recurrent state, both or neither, as llama.cpp's create_memory decides it.

    Trailing NextN/MTP blocks (`nextn_predict_layers`) never get KV in the main context (create_memory filters
    il < n_layer()). The rule per architecture is RECURRENT_RULES; unknown hybrids are counted as full attention on
    every layer with a note.
    """
    n = given.block_count
    n_main = n - given.nextn_layers if 0 < given.nextn_layers < n else n
    trunk = tuple(il < n_main for il in range(n))
    rule = RECURRENT_RULES.get(given.architecture)
    none = (False,) * n
    if rule is None:
        note = None
        if given.architecture in UNSIZED_RECURRENT:
            note = (f"{given.architecture} keeps a recurrent state tunehost does not size; KV counted on every layer "
                    "(llama-fit-params gives the exact figure)")
        return MemoryLayout(trunk, none, note)
    if given.recurrent is None or given.recurrent.bytes_per_seq == 0:
        if rule != "no_kv_heads":  # lfm2 and friends without ssm keys still split layers by head count
            return MemoryLayout(trunk, none, f"{given.architecture} declares no ssm.* shape; recurrent state not counted")
    kv = given.head_count_kv
    if rule == "all":
        recr = (True,) * n
        attn = none
    elif rule == "interval":
        if given.recurrent_flags is not None and len(given.recurrent_flags) == n:
            recr = tuple(bool(x) for x in given.recurrent_flags)
        else:
            period = given.full_attention_interval or DEFAULT_FULL_ATTENTION_INTERVAL
            recr = tuple(il < n_main and (il + 1) % period != 0 for il in range(n))
        attn = tuple(t and not r for t, r in zip(trunk, recr))
        recr = tuple(t and r for t, r in zip(trunk, recr))
    elif rule == "no_kv_heads":
        recr = tuple(h == 0 for h in kv)
        attn = tuple(t and not r for t, r in zip(trunk, recr))
    elif rule == "nemotron":
        ff = given.feed_forward if len(given.feed_forward) == n else (0,) * n
        recr = tuple(t and h == 0 and f == 0 for t, h, f in zip(trunk, kv, ff))
        attn = tuple(h > 0 and f == 0 for h, f in zip(kv, ff))
    else:  # both
        recr = (True,) * n
        attn = trunk
    if given.recurrent is None:
        recr = none
    return MemoryLayout(attn, recr, None)


def split_parts(path: Path) -> tuple[Path, ...]:
    """All parts of a split GGUF named like `name-00001-of-00003.gguf`, or `(path,)` for a single file."""
    match = SPLIT_NAME_RE.match(path.name)
    if not match:
        return (path,)
    count = int(match.group("count"))
    if count < 1 or int(match.group("no")) > count:
        return (path,)
    stem = match.group("stem")
    return tuple(path.with_name(f"{stem}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1))


def read_model(path: str | Path) -> ModelFacts:
    """Read a GGUF model (any part of a split model reads the whole model).

    Raises TunehostError with one line for: a missing file or part, a directory, a file that is not GGUF,
    an unsupported GGUF version, and a truncated or corrupt file.
    """
    given = Path(path).expanduser()
    parts = split_parts(given)
    for part in parts:
        _check_header(part, given)
    readers = [_open(part) for part in parts]
    first = readers[0]
    meta = _Metadata(first)
    _check_split_numbering(parts, readers)

    tensors: list[TensorInfo] = []
    file_size = 0
    for part, reader in zip(parts, readers):
        part_size = part.stat().st_size
        file_size += part_size
        for t in reader.tensors:
            tensors.append(
                TensorInfo(
                    name=t.name,
                    ggml_type=t.tensor_type.name,
                    shape=tuple(int(x) for x in t.shape),
                    n_elements=int(t.n_elements),
                    n_bytes=int(t.n_bytes),
                )
            )
            if int(t.data_offset) + int(t.n_bytes) > part_size:
                raise TunehostError(f"{part}: truncated GGUF file (tensor {t.name} ends past the end of the file)")
    try:
        return _facts_from(meta, tensors, given, parts, file_size)
    except _Unusable as exc:
        raise TunehostError(f"{given}: {exc}") from None


class _Refused(ValueError):
    """A complete GGUF whose metadata has a shape llama.cpp's own reader (ggml/src/gguf.cpp) refuses: a duplicated key,
    an array of arrays. Refused before its contents are read, so a file of a million nested arrays costs no time."""


class _Unusable(ValueError):
    """A value read from a GGUF that no real model has: one line, "not a usable GGUF: <field> = <value>"."""

    def __init__(self, fld: str, value: Any) -> None:
        shown = repr(value) if isinstance(value, str) else str(value)
        super().__init__(f"not a usable GGUF: {_printable(fld)} = {_printable(shown)}")


def _printable(text: str, limit: int = 80) -> str:
    # a GGUF's strings reach the terminal: one printable line, never an escape sequence
    return one_line(text, limit)


def _whole(key: str, value: Any, limits: tuple[int, int]) -> int:
    """`value` as a whole number inside `limits`, else _Unusable (a float, a bool, a string, NaN, out of range)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Unusable(key, value)
    low, high = limits
    if not low <= value <= high:
        raise _Unusable(key, value)
    return value


def _facts_from(
    meta: "_Metadata", tensors: list[TensorInfo], given: Path, parts: tuple[Path, ...], file_size: int
) -> ModelFacts:
    arch = meta.get_str("general.architecture")
    if not arch:
        raise TunehostError(f"{given}: GGUF has no general.architecture; not a model file")
    if not ARCH_NAME_RE.fullmatch(arch):  # llama.cpp's names: "llama", "qwen3moe", "gpt-oss", "t5encoder", ...
        raise _Unusable("general.architecture", arch)
    meta.arch = arch
    block_count = meta.get_int(f"{arch}.block_count")
    n_embd = meta.get_int(f"{arch}.embedding_length")
    head_count_raw = meta.raw(f"{arch}.attention.head_count")
    if block_count is None or n_embd is None or head_count_raw is None:
        raise TunehostError(
            f"{given}: GGUF for '{arch}' lacks block_count/embedding_length/head_count; "
            "not a language model (an mmproj or adapter?)"
        )
    heads = meta.per_layer(f"{arch}.attention.head_count", block_count)
    head_count = next((h for h in heads if h), 0) or 1
    kv_raw = meta.raw(f"{arch}.attention.head_count_kv")
    head_count_kv = meta.per_layer(f"{arch}.attention.head_count_kv", block_count) if kv_raw is not None else heads
    key_length = meta.get_int(f"{arch}.attention.key_length") or n_embd // head_count
    value_length = meta.get_int(f"{arch}.attention.value_length") or key_length
    sliding_window = meta.get_int(f"{arch}.attention.sliding_window")
    pattern = meta.pattern(f"{arch}.attention.sliding_window_pattern")
    swa, note = swa_layout(arch, block_count, sliding_window, pattern)
    ff = meta.raw(f"{arch}.feed_forward_length")
    ff_layers = meta.per_layer(f"{arch}.feed_forward_length", block_count) if ff is not None else ()
    ff_max = max(ff_layers, default=0) if ff is not None else None
    vocab = meta.get_int(f"{arch}.vocab_size") or _vocab_from(tensors) or meta.array_len("tokenizer.ggml.tokens")
    file_type = meta.get_int("general.file_type", (0, 1 << 16))
    expert_count = meta.get_int(f"{arch}.expert_count") or 0
    expert_used = meta.get_int(f"{arch}.expert_used_count") or 0
    if expert_count and expert_used > expert_count:
        raise _Unusable(f"{arch}.expert_used_count", f"{expert_used} (of {expert_count} experts)")
    _check_tensors(tensors, file_size)
    recurrent = RecurrentShape(
        conv_kernel=meta.get_int(f"{arch}.ssm.conv_kernel") or 0,
        inner_size=meta.get_int(f"{arch}.ssm.inner_size") or 0,
        state_size=meta.get_int(f"{arch}.ssm.state_size") or 0,
        group_count=meta.get_int(f"{arch}.ssm.group_count") or 0,
        shortconv_l_cache=meta.get_int(f"{arch}.shortconv.l_cache") or 0,
        embedding_length=n_embd,
    )
    nextn = meta.get_int(f"{arch}.nextn_predict_layers") or 0
    flags = meta.pattern(f"{arch}.attention.recurrent_layers")
    layout = memory_layout(LayoutInputs(
        arch, block_count, head_count_kv, ff_layers, tuple(bool(x) for x in flags) if isinstance(flags, list) else None,
        meta.get_int(f"{arch}.full_attention_interval"), nextn, recurrent if recurrent.bytes_per_seq else None,
    ))
    return ModelFacts(
        architecture=arch,
        name=_display_name(meta.get_str("general.name")),
        block_count=block_count,
        embedding_length=n_embd,
        head_count=head_count,
        head_count_kv=head_count_kv,
        key_length=key_length,
        value_length=value_length,
        context_length=meta.get_int(f"{arch}.context_length"),
        vocab_size=vocab,
        feed_forward_length=ff_max,
        expert_count=expert_count,
        expert_used_count=expert_used,
        expert_shared_count=meta.get_int(f"{arch}.expert_shared_count") or 0,
        expert_feed_forward_length=meta.get_int(f"{arch}.expert_feed_forward_length"),
        expert_shared_feed_forward_length=meta.get_int(f"{arch}.expert_shared_feed_forward_length"),
        sliding_window=sliding_window or None,
        swa_layers=swa,
        key_length_swa=meta.get_int(f"{arch}.attention.key_length_swa"),
        value_length_swa=meta.get_int(f"{arch}.attention.value_length_swa"),
        swa_note=note,
        kv_layers=layout.kv_layers,
        recurrent_layers=layout.recurrent_layers,
        recurrent=recurrent if any(layout.recurrent_layers) else None,
        mla=bool(meta.get_int(f"{arch}.attention.key_length_mla")),
        nextn_layers=nextn,
        memory_note=layout.note,
        file_type=_file_type_name(file_type),
        path=str(parts[0]),
        parts=tuple(str(p) for p in parts),
        file_size=file_size,
        tensors=tuple(tensors),
        weights=WeightBytes.of(tensors, block_count),
    )


def _display_name(name: str | None) -> str | None:
    """general.name is free text from whoever made the file: shown and written into units, so one printable line."""
    if name is None:
        return None
    return one_line(name.strip(), MAX_NAME_CHARS) or None


def _per_layer(value: Any, block_count: int) -> tuple[int, ...]:
    """A scalar broadcast to every layer, or a per-layer array as GGUF stores it for variable-head models."""
    if isinstance(value, (list, tuple)):
        values = tuple(int(v) for v in value)
        if len(values) != block_count:
            raise TunehostError(f"per-layer array has {len(values)} entries for {block_count} layers")
        return values
    return (int(value),) * block_count


def _vocab_from(tensors: list[TensorInfo]) -> int | None:
    # token_embd is [n_embd, n_vocab]: the vocabulary without decoding the 150k-entry tokenizer array
    for t in tensors:
        if t.name == "token_embd.weight" and len(t.shape) == 2:
            return _whole("token_embd.weight vocabulary", t.shape[1], SHAPE_LIMITS["vocab_size"])
    return None


def _check_tensors(tensors: list[TensorInfo], file_size: int) -> None:
    """Every tensor's shape is one ggml can hold and its bytes lie inside the file(s)."""
    total = 0
    for t in tensors:
        if not 1 <= len(t.shape) <= MAX_TENSOR_DIMS or any(d < 1 for d in t.shape):
            raise _Unusable(f"tensor {t.name} shape", list(t.shape))
        elements = 1
        for d in t.shape:
            elements *= d
        if elements > MAX_TENSOR_ELEMENTS or elements != t.n_elements:
            raise _Unusable(f"tensor {t.name} elements", elements)
        total += t.n_bytes
        if t.n_bytes < 0 or total > file_size:
            raise _Unusable(f"tensor {t.name} size", f"{t.n_bytes} bytes (the tensors add up to more than "
                                                     f"the {file_size}-byte file)")


def _file_type_name(value: int | None) -> str | None:
    if value is None:
        return None
    from gguf.constants import LlamaFileType

    try:
        return LlamaFileType(value).name
    except ValueError:
        return str(value)


def _check_header(part: Path, given: Path) -> None:
    """Clear one-line errors before the reader sees the file."""
    label = str(part)
    if part != given and not part.exists():
        raise TunehostError(f"{given}: split part {part.name} is missing")
    from tunehost.inputs import read_input_file

    head = read_input_file(part, "a GGUF file", limit=8)[:8]  # a FIFO, a device: one line, never a hang
    if len(head) < 4:
        raise TunehostError(f"{label}: not a GGUF file (only {len(head)} bytes)")
    if head[:4] != GGUF_MAGIC:
        raise TunehostError(f"{label}: not a GGUF file (magic {head[:4].hex()}, expected {GGUF_MAGIC.hex()} 'GGUF')")
    if len(head) < 8:
        raise TunehostError(f"{label}: truncated GGUF file (header cut short)")
    version = struct.unpack("<I", head[4:8])[0]
    if version & 0xFFFF == 0:
        version = struct.unpack(">I", head[4:8])[0]  # a big-endian GGUF; the reader swaps it
    if version not in SUPPORTED_GGUF_VERSIONS:
        raise TunehostError(f"{label}: unsupported GGUF version {version} (supported: 2, 3)")


def _open(part: Path) -> Any:
    try:
        return _header_reader_class()(part)
    except TunehostError:
        raise
    except (_Unusable, _Refused) as exc:
        raise TunehostError(f"{part}: {exc}") from None
    except Exception as exc:  # the reader raises IndexError/ValueError/KeyError/struct.error on short or bad data
        size = part.stat().st_size
        raise TunehostError(
            f"{part}: truncated or corrupt GGUF file ({size} bytes; an interrupted download? fetch it again)"
        ) from exc


def _check_split_numbering(parts: tuple[Path, ...], readers: list[Any]) -> None:
    for i, (part, reader) in enumerate(zip(parts, readers)):
        try:
            count = _optional_whole(reader, "split.count", (0, 99999))
            number = _optional_whole(reader, "split.no", (0, 99999))
        except _Unusable as exc:
            raise TunehostError(f"{part}: {exc}") from None
        if len(parts) == 1 and count is not None and int(count) > 1:
            raise TunehostError(
                f"{part}: part {int(number or 0) + 1} of a {count}-part split model, but its name does not follow "
                "NAME-0000K-of-0000N.gguf, so the other parts cannot be found"
            )
        if count is not None and int(count) != len(parts):
            raise TunehostError(f"{part}: says split.count={count} but its name says {len(parts)} parts")
        if number is not None and int(number) != i:
            raise TunehostError(f"{part}: says split.no={number} but its name says part {i + 1}")


def _field_value(reader: Any, key: str) -> Any:
    fld = reader.fields.get(key)
    if fld is None or not fld.types:
        return None
    try:
        return fld.contents()
    except (UnicodeDecodeError, ValueError, IndexError) as exc:  # a string that is not UTF-8, a cut-short array
        raise _Unusable(key, f"<unreadable: {exc.__class__.__name__}>") from None


def _optional_whole(reader: Any, key: str, limits: tuple[int, int]) -> int | None:
    value = _field_value(reader, key)
    return None if value is None else _whole(key, value, limits)


class _Metadata:
    """Typed access to the key/value metadata of the first part."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self.arch = ""

    def raw(self, key: str) -> Any:
        return _field_value(self._reader, key)

    def _limits(self, key: str) -> tuple[int, int]:
        return SHAPE_LIMITS.get(key.removeprefix(f"{self.arch}."), (0, 1 << 62))

    def get_int(self, key: str, limits: tuple[int, int] | None = None) -> int | None:
        """A whole number inside SHAPE_LIMITS (or `limits`); None when absent. Anything else is _Unusable."""
        value = self.raw(key)
        if value is None:
            return None
        return _whole(key, value, limits or self._limits(key))

    def per_layer(self, key: str, block_count: int) -> tuple[int, ...]:
        """A scalar broadcast to every layer, or a per-layer array of `block_count` whole numbers."""
        value = self.raw(key)
        limits = self._limits(key)
        if isinstance(value, list):
            if len(value) != block_count:
                raise _Unusable(key, f"{len(value)} entries for {block_count} layers")
            return tuple(_whole(key, v, limits) for v in value)
        return (_whole(key, value, limits),) * block_count

    def pattern(self, key: str) -> int | list[bool] | None:
        """sliding_window_pattern: a period, or one bool per layer."""
        value = self.raw(key)
        if isinstance(value, list):
            if not all(isinstance(v, (bool, int)) for v in value):
                raise _Unusable(key, _printable(str(value[:4])))
            return value
        return None if value is None else _whole(key, value, self._limits(key))

    def get_str(self, key: str) -> str | None:
        value = self.raw(key)
        return value if isinstance(value, str) else None

    def array_len(self, key: str) -> int | None:
        fld = self._reader.fields.get(key)
        if fld is None or len(fld.parts) < 5:
            return None
        # parts: key len, key, value type, item type, array length, ...
        return _whole(f"{key} length", int(fld.parts[4][0]), SHAPE_LIMITS["vocab_size"])


@functools.cache
def _header_reader_class() -> type:
    """GGUFReader subclass, built on first use so gguf and numpy load only when a model is read."""
    import numpy as np
    from gguf import GGUFReader, GGUFValueType
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFEndian

    class HeaderReader(GGUFReader):  # type: ignore[misc]
        """GGUFReader that steps over long metadata arrays instead of decoding each element.

        The stock reader builds one numpy view per element, which takes ~10 s for a 150k-token vocabulary;
        tunehost needs none of those arrays, so long ones keep only their item type and length.
        """

        def __init__(self, path: Path) -> None:
            super().__init__(path, "r")

        def _get_field_parts(self, orig_offs: int, raw_type: int) -> tuple[int, list[Any], list[int], list[Any]]:
            if raw_type != GGUFValueType.ARRAY:
                return super()._get_field_parts(orig_offs, raw_type)
            raw_itype = self._get(orig_offs, np.uint32)
            alen = self._get(orig_offs + 4, np.uint64)
            count = int(alen[0])
            if int(raw_itype[0]) == GGUFValueType.ARRAY:  # gguf.cpp: "has invalid GGUF type" for nested arrays
                raise _Refused(f"metadata holds an array of {count} arrays, a shape llama.cpp refuses to load "
                               "(the file was not written by a llama.cpp tool)")
            if count <= _SKIP_ARRAY_ABOVE:
                return super()._get_field_parts(orig_offs, raw_type)
            itype = GGUFValueType(int(raw_itype[0]))
            offs = orig_offs + 12
            if itype == GGUFValueType.STRING:
                if count * 8 > len(self.data) - offs:  # each string takes at least 8 bytes: never loop past the file
                    raise ValueError(f"metadata array of {count} strings runs past the end of the file")
                order = "<" if self.endianess == GGUFEndian.LITTLE else ">"
                unpack = struct.Struct(order + "Q").unpack_from
                buf = memoryview(self.data)
                for _ in range(count):
                    offs += 8 + unpack(buf, offs)[0]
            elif itype in self.gguf_scalar_to_np:
                offs += count * np.dtype(self.gguf_scalar_to_np[itype]).itemsize
            else:
                return super()._get_field_parts(orig_offs, raw_type)
            if offs > len(self.data):
                raise ValueError(f"metadata array of {count} items runs past the end of the file")
            return offs - orig_offs, [raw_itype, alen], [], [GGUFValueType.ARRAY, itype]

        def _push_field(self, fld: Any, skip_sum: bool = False) -> int:
            if fld.name in self.fields:  # the stock reader raises a KeyError that reads as a corrupt file
                raise _Refused(f"metadata key {_printable(fld.name)!r} appears twice, which llama.cpp refuses to load "
                               "(the file is complete, but was written wrong)")
            return super()._push_field(fld, skip_sum)

        def _build_tensors(self, start_offs: int, fields: list[Any]) -> None:
            # the stock reader turns an unknown type into a bare ValueError; name the tensor and the value instead
            for fld in fields:
                name = bytes(fld.parts[1]).decode("utf-8", "replace")
                raw_type = int(fld.parts[4][0])
                try:
                    ggml_type = GGMLQuantizationType(raw_type)
                except ValueError:
                    raise _Unusable(f"tensor {name} type", raw_type) from None
                if ggml_type not in GGML_QUANT_SIZES:
                    raise _Unusable(f"tensor {name} type", ggml_type.name)
                offset = int(fld.parts[5][0])
                if start_offs + offset > len(self.data):
                    raise _Unusable(f"tensor {name} offset", f"{offset} (past the end of the {len(self.data)}-byte file)")
            super()._build_tensors(start_offs, fields)

    return HeaderReader
