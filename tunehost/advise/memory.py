"""How much memory llama.cpp will need for a model, and where it goes (GPU or host RAM). Pure arithmetic.

What this mirrors in llama.cpp (verified in ggml-org/llama.cpp, see docs in the functions):

* Context (src/llama-context.cpp): `n_ctx` (-c; 0 = trained context) is padded to a multiple of 256. With a unified
  KV cache (-kvu, or llama-server's default `-np auto` = 4 slots + unified, tools/server/server.cpp) there is one
  stream of `n_ctx` cells shared by all slots. Without it, each of the `n_seq = -np` slots gets its own stream of
  `n_ctx_seq = pad(n_ctx / n_seq, 256)` cells and n_ctx becomes `n_ctx_seq * n_seq`. Either way the cells for
  full-attention layers total ~n_ctx: `-c` is the total, slots split it.
* KV tensors (src/llama-kv-cache.cpp): per layer one K and one V tensor of `row_size(type, n_head_kv(il) * head_dim)`
  bytes per cell, times cells per stream, times streams.
* SWA layers (src/llama-kv-cache-iswa.cpp): `size_swa = pad(min(n_ctx_seq, n_swa * (unified ? n_seq : 1) + n_ubatch),
  256)` cells per stream, or the full size with --swa-full.
* Which layers keep KV (src/llama-model.cpp llama_model::create_memory): hybrid models keep KV only on their
  attention layers and a recurrent state on the others (tunehost.model.memory_layout); trailing NextN/MTP blocks
  keep none. MLA models (DeepSeek V2/V3, GLM-4.7-Flash..., GGUFs with `attention.key_length_mla`) keep one K row of
  key_length = kv_lora_rank + rope dims per cell and no V cache (llama_kv_cache::llama_kv_cache: has_v = !is_mla).
  Without flash attention V is stored transposed and padded to the widest layer's V row (TAG_V_CACHE_VARIABLE).
* Recurrent state (src/llama-memory-recurrent.cpp): per recurrent layer one F32 row of n_embd_r (conv) and one of
  n_embd_s (SSM) values per sequence, for max(1, n_seq_max) sequences, independent of the context size.
* Layer placement (src/llama-model.cpp, load_tensors): `-ngl k` puts the output layer on the GPU once k >= 1, then
  the last k-1 repeating layers; k = n_layer + 1 is full offload; the token embeddings always stay on the CPU. KV of
  a layer lives with the layer.
* `--n-cpu-moe N` (common/arg.cpp, common/common.h): overrides `blk\\.i\\.ffn_(up|down|gate|gate_up)_(ch|)exps` to the
  CPU buffer for i in [0, N): the routed experts of the first N layers; shared experts and routers stay on the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from tunehost.model import RS_ROLLBACK_ARCHS, ModelFacts

if TYPE_CHECKING:
    from tunehost.launch import LaunchConfig

MiB = 1024 * 1024
HEADROOM_TEXT = 512 * MiB  # CUDA context, cuBLAS workspace and allocator slack for a text-only server
HEADROOM_MMPROJ = 2048 * MiB  # plus the vision projector, its weights and image compute buffers

# llama.cpp's accepted --cache-type-k/-v values (common/arg.cpp kv_cache_types): (block elements, block bytes)
KV_CACHE_TYPES: dict[str, tuple[int, int]] = {
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "q8_0": (32, 34),
    "q4_0": (32, 18),
    "q4_1": (32, 20),
    "q5_0": (32, 22),
    "q5_1": (32, 24),
    "iq4_nl": (32, 18),
}

CTX_PAD = 256  # GGML_PAD(n_ctx, 256) in llama_context and in the SWA cache size
AUTO_SLOTS = 4  # llama-server with -np unset: n_parallel = 4 and kv_unified = true
_UNKNOWN_VOCAB = 256_000  # conservative when a shape fixture gives no vocabulary


def pad(value: int, multiple: int = CTX_PAD) -> int:
    """GGML_PAD: round up to a multiple."""
    return (value + multiple - 1) // multiple * multiple


def kv_row_bytes(cache_type: str, n_elements: int) -> int:
    """ggml_row_size for a KV cache type; quantized types need whole blocks."""
    try:
        block, size = KV_CACHE_TYPES[cache_type.lower()]
    except KeyError:
        raise ValueError(f"unknown KV cache type {cache_type!r}; one of {', '.join(KV_CACHE_TYPES)}") from None
    if n_elements % block:
        raise ValueError(f"{cache_type} needs rows that are a multiple of {block} elements, got {n_elements}")
    return n_elements // block * size


def kv_type_fits(model: "ModelFacts", cache_type: str) -> bool:
    """Whether every KV layer's K and V rows are whole blocks of `cache_type` (llama.cpp refuses a quantized KV cache
    otherwise)."""
    for il in range(model.block_count):
        if not model.has_kv(il):
            continue
        k_dim, v_dim = _kv_dims(model, il)
        try:
            kv_row_bytes(cache_type, k_dim)
            if not model.mla:
                kv_row_bytes(cache_type, v_dim)
        except ValueError:
            return False
    return True


@dataclass(frozen=True)
class ServerSettings:
    """The llama-server flags that decide memory. Defaults are llama.cpp's own except n_parallel (1 here)."""

    n_ctx: int = 0  # -c; 0 = the model's trained context
    n_parallel: int = 1  # -np; -1 = llama-server's auto (4 slots, unified KV)
    kv_unified: bool = False  # -kvu
    type_k: str = "f16"  # -ctk
    type_v: str = "f16"  # -ctv
    n_batch: int = 2048  # -b
    n_ubatch: int = 512  # -ub
    swa_full: bool = False  # --swa-full
    flash_attn: bool = True  # -fa (auto resolves to on for CUDA builds that support the model)
    mmproj: bool = False  # -mm given: larger headroom
    fit: bool = True  # -fit (on by default): with -c 0 and one KV stream per slot, every slot gets the trained context
    n_rs_seq: int = 0  # recurrent-state snapshots per slot: --spec-draft-n-max with MTP/EAGLE3 drafting (default 3)

    @classmethod
    def from_launch(cls, launch: "LaunchConfig") -> "ServerSettings":
        """The settings a launch configuration states; what it leaves unset (or states as 0 or a non-number) is
        llama.cpp's default, this class's."""
        default = {f.name: f.default for f in fields(cls)}

        def number(flag: str, name: str) -> int:
            try:
                return int(launch.value(flag) or 0) or default[name]
            except ValueError:
                return default[name]

        return cls(n_ctx=number("-c", "n_ctx"), n_parallel=number("-np", "n_parallel"),
                   type_k=launch.value("-ctk") or default["type_k"], type_v=launch.value("-ctv") or default["type_v"],
                   n_batch=number("-b", "n_batch"), n_ubatch=number("-ub", "n_ubatch"),
                   flash_attn=launch.value("-fa") != "off" if launch.value("-fa") else default["flash_attn"])

    def slots(self) -> tuple[int, bool]:
        """(sequences, unified) after llama-server resolves -np auto."""
        if self.n_parallel < 0:
            return AUTO_SLOTS, True
        if self.n_parallel == 0:
            raise ValueError("n_parallel must be >= 1 or -1 (auto)")
        return self.n_parallel, self.kv_unified


@dataclass(frozen=True)
class KvLayout:
    """The KV cache llama.cpp allocates: cells per stream and bytes per layer."""

    n_ctx: int  # total context after padding/rounding (what llama.cpp logs as n_ctx)
    n_ctx_seq: int  # context one slot can use (llama_n_ctx_seq)
    n_seq: int
    n_stream: int  # 1 when unified, else one stream per slot
    cells_full: int  # per stream, full-attention layers
    cells_swa: int  # per stream, sliding-window layers
    kv_per_layer: tuple[int, ...]
    state_per_layer: tuple[int, ...] = ()  # recurrent state (conv + SSM) of recurrent layers

    @property
    def bytes_per_layer(self) -> tuple[int, ...]:
        """KV plus recurrent state per layer: what lives with the layer on its device (llama.cpp's "context")."""
        if not self.state_per_layer:
            return self.kv_per_layer
        return tuple(k + s for k, s in zip(self.kv_per_layer, self.state_per_layer))

    @property
    def kv_total(self) -> int:
        return sum(self.kv_per_layer)

    @property
    def state_total(self) -> int:
        return sum(self.state_per_layer)

    @property
    def total(self) -> int:
        return self.kv_total + self.state_total


def kv_layout(model: ModelFacts, settings: ServerSettings) -> KvLayout:
    """Exact KV cache bytes per layer for these settings (see the module docstring for the llama.cpp rules)."""
    n_ctx = settings.n_ctx or model.context_length
    if not n_ctx:
        raise ValueError("n_ctx is 0 and the model declares no context_length")
    n_seq, unified = settings.slots()
    if not settings.n_ctx and settings.fit and not unified:
        # common/fit.cpp common_params_fit_impl: "context size unset and KV cache not unified -> using n_ctx_train *
        # n_streams" (it shrinks it again only when that does not fit the devices, which this arithmetic cannot see)
        n_ctx *= n_seq
    n_ctx = pad(n_ctx)
    if unified:
        n_ctx_seq, n_stream = n_ctx, 1
    else:
        n_ctx_seq = pad(n_ctx // n_seq)
        n_ctx, n_stream = n_ctx_seq * n_seq, n_seq
    n_ubatch = min(settings.n_ubatch, settings.n_batch, n_ctx)  # cparams clamp n_batch to n_ctx, n_ubatch to n_batch
    window = model.sliding_window or 0
    if settings.swa_full or not model.has_swa:
        cells_swa = n_ctx_seq
    else:
        cells_swa = pad(min(n_ctx_seq, window * (n_seq if unified else 1) + n_ubatch))
    dims = [_kv_dims(model, il) for il in range(model.block_count)]
    v_max = max((v for il, (_, v) in enumerate(dims) if model.has_kv(il)), default=0)
    per_layer = []
    for il, (k_dim, v_dim) in enumerate(dims):
        if not model.has_kv(il):
            per_layer.append(0)
            continue
        if not settings.flash_attn:
            v_dim = v_max  # V transposed: every layer padded to the widest V row
        cells = cells_swa if model.has_swa and model.swa_layers[il] else n_ctx_seq
        per_layer.append(n_stream * cells * _cell_bytes(model, settings, k_dim, v_dim))
    state = recurrent_state_per_layer(model, n_seq, settings.n_rs_seq)
    return KvLayout(n_ctx, n_ctx_seq, n_seq, n_stream, n_ctx_seq, cells_swa, tuple(per_layer), state)


def mtp_kv_bytes(model: ModelFacts, settings: ServerSettings) -> int:
    """KV of the MTP draft context (--spec-type draft-mtp): a plain KV cache holding only the NextN blocks
    (src/llama-model.cpp create_memory, LLAMA_CONTEXT_TYPE_MTP: filter il >= n_layer()), as large as the main
    context (common/common.cpp: the draft context follows it). 0 for a model without NextN blocks."""
    if not model.nextn_layers:
        return 0
    layout = kv_layout(model, settings)
    total = 0
    for il in range(model.block_count - model.nextn_layers, model.block_count):
        total += layout.n_stream * layout.n_ctx_seq * _cell_bytes(model, settings, *_kv_dims(model, il))
    return total


def _cell_bytes(model: ModelFacts, settings: ServerSettings, k_dim: int, v_dim: int) -> int:
    """One cell of one layer: a K row and, unless the model uses MLA, a V row."""
    return kv_row_bytes(settings.type_k, k_dim) + (0 if model.mla else kv_row_bytes(settings.type_v, v_dim))


def _kv_dims(model: ModelFacts, il: int) -> tuple[int, int]:
    """(K, V) values per cell of layer `il`: heads times head size (llama_hparams::n_embd_k_gqa / n_embd_v_gqa)."""
    swa = bool(model.swa_layers) and model.swa_layers[il]
    k_dim = (model.key_length_swa if swa else None) or model.key_length
    v_dim = (model.value_length_swa if swa else None) or model.value_length
    n_kv = model.head_count_kv[il]
    return n_kv * k_dim, n_kv * v_dim


def recurrent_state_per_layer(model: ModelFacts, n_seq: int, n_rs_seq: int = 0) -> tuple[int, ...]:
    """Recurrent-state bytes per layer for `n_seq` sequences (0 on attention layers); () for models without one.

    llama_memory_recurrent allocates mem_size * (1 + n_rs_seq) rows, mem_size = max(1, n_seq_max); n_rs_seq is
    --spec-draft-n-max when MTP/EAGLE3 drafting needs rollback snapshots (common/common.h need_n_rs_seq), and 0 for
    architectures without rollback (src/llama-context.cpp clamps it; tunehost.model.RS_ROLLBACK_ARCHS).
    """
    if not model.has_recurrent or model.recurrent is None:
        return ()
    snapshots = n_rs_seq if model.architecture in RS_ROLLBACK_ARCHS else 0
    rows = max(1, n_seq) * (1 + max(0, snapshots))
    return tuple(model.recurrent.bytes_per_seq * rows if r else 0 for r in model.recurrent_layers)


def kv_read_per_layer(model: ModelFacts, settings: ServerSettings, depth: int) -> tuple[int, ...]:
    """KV-cache bytes one generated token reads in each layer, `depth` tokens into its context: every cell of a
    full-attention layer up to `depth`, a sliding-window layer's last `window` cells, a K row only under MLA (the
    cells' sizes as kv_layout allocates them, at settings.type_k / type_v; V rows as with flash attention). Layers
    without a KV cache (recurrent ones, trailing MTP blocks) read none: their state is a fixed cost per token, inside
    the band's per-layer costs."""
    if depth <= 0:
        return (0,) * model.block_count
    window = model.sliding_window or 0
    out = []
    for il in range(model.block_count):
        if not model.has_kv(il):
            out.append(0)
            continue
        cells = min(depth, window) if model.has_swa and model.swa_layers[il] and window > 0 else depth
        out.append(cells * _cell_bytes(model, settings, *_kv_dims(model, il)))
    return tuple(out)


def kv_cache_bytes(model: ModelFacts, settings: ServerSettings) -> int:
    """Total KV cache bytes (all layers, all slots)."""
    return kv_layout(model, settings).total


def context_detail(model: ModelFacts, settings: ServerSettings) -> str:
    """One line on what the KV figure holds: tokens, slots, type, the layers with KV and any recurrent state."""
    layout = kv_layout(model, settings)
    n_kv = sum(1 for il in range(model.block_count) if model.has_kv(il))
    slots = f"{layout.n_seq} slot{'s' if layout.n_seq > 1 else ''}"
    parts = [f"{layout.n_ctx} tokens ({slots}), {settings.type_k}"]
    if n_kv != model.block_count:
        parts.append(f"KV on {n_kv} of {model.block_count} layers")
    if model.mla:
        parts.append("MLA: compressed K only")
    if model.has_swa and layout.cells_swa < layout.n_ctx_seq:
        parts.append(f"SWA layers hold {layout.cells_swa} cells")
    if layout.state_total:
        n_recr = sum(1 for r in model.recurrent_layers if r)
        parts.append(f"+ recurrent state {layout.state_total / MiB:.1f} MiB ({n_recr} layers, F32, any context)")
    return "; ".join(parts)


def active_ffn_width(model: ModelFacts) -> int:
    """FFN intermediate values per token: n_ff for dense; for MoE the used (and shared) experts times their width."""
    dense = model.feed_forward_length or 4 * model.embedding_length
    if not model.is_moe:
        return dense
    expert = model.expert_feed_forward_length or dense
    shared = model.expert_shared_feed_forward_length or expert
    return max(model.expert_used_count, 1) * expert + model.expert_shared_count * shared


def compute_buffer_bytes(model: ModelFacts, settings: ServerSettings, *, weight_upload: int = 0) -> int:
    """A conservative estimate of one backend's compute buffer (ggml graph scratch), in bytes.

    llama.cpp reserves the graph for a full ubatch with every token producing logits, so the peak is roughly
        4 * n_ubatch * (n_vocab + 4 * n_embd + 3 * ffn_width)      f32 logits + residual/attention + FFN activations
      + 4 * n_ubatch * n_ctx_seq * n_head                          KQ scores, only without flash attention
      + weight_upload                                              CPU-resident weights copied in for offloaded ops
    This lands 10-40 % above the "compute buffer size" llama.cpp logs for Llama/Qwen shapes at -ub 512 with FA.
    """
    layout = kv_layout(model, settings)
    n_ubatch = min(settings.n_ubatch, settings.n_batch, layout.n_ctx)
    vocab = model.vocab_size or _UNKNOWN_VOCAB
    activations = 4 * n_ubatch * (vocab + 4 * model.embedding_length + 3 * active_ffn_width(model))
    scores = 0 if settings.flash_attn else 4 * n_ubatch * layout.n_ctx_seq * model.head_count
    return activations + scores + weight_upload


def headroom_bytes(settings: ServerSettings) -> int:
    """Free VRAM to leave unplanned: 512 MiB for text, 2048 MiB with an mmproj."""
    return HEADROOM_MMPROJ if settings.mmproj else HEADROOM_TEXT


@dataclass(frozen=True)
class MemoryBudget:
    """Where the bytes go for one placement. `gpu_total` is what must fit in free VRAM; `cpu_total` in free RAM."""

    weights_gpu: int
    weights_cpu: int
    kv_gpu: int
    kv_cpu: int
    compute_gpu: int
    compute_cpu: int
    headroom: int

    @property
    def kv(self) -> int:
        return self.kv_gpu + self.kv_cpu

    @property
    def compute(self) -> int:
        return self.compute_gpu + self.compute_cpu

    @property
    def gpu_total(self) -> int:
        return self.weights_gpu + self.kv_gpu + self.compute_gpu + self.headroom

    @property
    def cpu_total(self) -> int:
        """Host RAM: CPU weights (mmap'd pages that must stay resident), CPU KV and the CPU compute buffer."""
        return self.weights_cpu + self.kv_cpu + self.compute_cpu

    @property
    def total(self) -> int:
        return self.gpu_total + self.cpu_total

    def fits_gpu(self, free_vram: int) -> bool:
        return self.gpu_total <= free_vram


@dataclass(frozen=True)
class Placement:
    """A -ngl / --n-cpu-moe choice and its budget; `fits` says whether the GPU part fits the VRAM it was fitted to."""

    gpu_layers: int  # -ngl value; block_count + 1 = everything
    n_cpu_moe: int  # --n-cpu-moe value; 0 = none
    budget: MemoryBudget
    fits: bool


def layer_budget(model: ModelFacts, settings: ServerSettings, gpu_layers: int) -> MemoryBudget:
    """Budget for `-ngl gpu_layers` (0 = CPU only, block_count + 1 = full offload), llama.cpp's layer order.

    With gpu_layers == 0 nothing is planned on the GPU (no compute buffer, no headroom).
    """
    n_layer = model.block_count
    k = max(0, min(gpu_layers, n_layer + 1))
    w = model.weights
    layout = kv_layout(model, settings)
    if k == 0:
        return MemoryBudget(0, w.total, 0, layout.total, 0, compute_buffer_bytes(model, settings), 0)
    first_gpu_layer = n_layer + 1 - k  # i_gpu_start = max(n_layer + 1 - ngl, 0); the output layer is index n_layer
    per_layer = w.per_layer or (0,) * n_layer
    gpu_blocks = range(first_gpu_layer, n_layer)
    cpu_blocks = range(0, first_gpu_layer)
    weights_gpu = sum(per_layer[i] for i in gpu_blocks) + w.output_device_bytes
    weights_cpu = sum(per_layer[i] for i in cpu_blocks) + w.token_embd
    kv_gpu = sum(layout.bytes_per_layer[i] for i in gpu_blocks)
    upload = max((per_layer[i] for i in cpu_blocks), default=0)
    return MemoryBudget(
        weights_gpu=weights_gpu,
        weights_cpu=weights_cpu,
        kv_gpu=kv_gpu,
        kv_cpu=layout.total - kv_gpu,
        compute_gpu=compute_buffer_bytes(model, settings, weight_upload=upload),
        compute_cpu=compute_buffer_bytes(model, settings) if first_gpu_layer > 0 else 0,
        headroom=headroom_bytes(settings),
    )


def moe_budget(model: ModelFacts, settings: ServerSettings, n_cpu_moe: int) -> MemoryBudget:
    """Budget for full offload (-ngl all) with `--n-cpu-moe n_cpu_moe`: routed experts of layers [0, N) on the CPU."""
    n = max(0, min(n_cpu_moe, model.block_count))
    w = model.weights
    routed = w.routed_experts_per_layer or (0,) * model.block_count
    experts_cpu = sum(routed[:n])
    blocks = sum(w.per_layer) if w.per_layer else w.total - w.token_embd - w.output
    weights_gpu = blocks - experts_cpu + w.output_device_bytes
    layout = kv_layout(model, settings)
    upload = max(routed[:n], default=0)
    return MemoryBudget(
        weights_gpu=weights_gpu,
        weights_cpu=w.token_embd + experts_cpu,
        kv_gpu=layout.total,
        kv_cpu=0,
        compute_gpu=compute_buffer_bytes(model, settings, weight_upload=upload),
        compute_cpu=compute_buffer_bytes(model, settings) if n else 0,
        headroom=headroom_bytes(settings),
    )


def fit_layers(model: ModelFacts, settings: ServerSettings, free_vram: int) -> Placement:
    """The largest -ngl whose GPU budget fits `free_vram`; full offload when everything fits.

    When not even -ngl 1 fits, returns gpu_layers=0 (CPU only) with fits=True: a CPU run needs no VRAM.
    """
    for k in range(model.block_count + 1, 0, -1):
        budget = layer_budget(model, settings, k)
        if budget.fits_gpu(free_vram):
            return Placement(k, 0, budget, True)
    return Placement(0, 0, layer_budget(model, settings, 0), True)


def fit_moe(model: ModelFacts, settings: ServerSettings, free_vram: int) -> Placement:
    """The smallest --n-cpu-moe N (with -ngl all) that fits `free_vram`.

    N = 0 means the whole model fits. If even N = block_count does not fit, returns that placement with
    fits=False: the caller must shrink the context, quantize the KV cache or fall back to `fit_layers`.
    """
    if not model.is_moe:
        raise ValueError(f"{model.architecture} has no experts; use fit_layers")
    for n in range(0, model.block_count + 1):
        budget = moe_budget(model, settings, n)
        if budget.fits_gpu(free_vram):
            return Placement(model.block_count + 1, n, budget, True)
    return Placement(model.block_count + 1, model.block_count, moe_budget(model, settings, model.block_count), False)
