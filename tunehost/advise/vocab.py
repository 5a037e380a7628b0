"""The tokenizer and RoPE-scaling metadata of a GGUF, read from its key/value section only (no tensor data).

tunehost.model skips long metadata arrays (the token list) for speed; a draft/target vocabulary comparison needs them,
so this walks the header itself with hard bounds: it never reads past the file, never holds more than MAX_TOKENS
tokens of MAX_TOKEN_BYTES each, and returns None for anything it cannot read (read_model already judged the file).

`compare(target, draft)` applies llama.cpp's own test (common/speculative.cpp common_speculative_are_compatible:
the same vocabulary type, the same BOS/EOS use and ids, sizes at most 128 apart, the same text for every token id from 5 up to
the smaller vocabulary); a draft that fails it makes llama-server refuse to start ("the target and draft vocabs are not
compatible").
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_KV = 1 << 16
MAX_KEY_BYTES = 1 << 16
MAX_TOKENS = 1 << 21
MAX_TOKEN_BYTES = 1 << 16
MAX_ARRAY = 1 << 26
CHECK_START_TOKEN_ID = 5  # SPEC_VOCAB_CHECK_START_TOKEN_ID
MAX_SIZE_DIFFERENCE = 128  # SPEC_VOCAB_MAX_SIZE_DIFFERENCE
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
WANTED = ("general.architecture", "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
          "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token",
          "tokenizer.ggml.add_eos_token")


@dataclass(frozen=True)
class GgufMeta:
    """What the draft check and the context clamp need from one GGUF."""

    architecture: str | None = None
    tokenizer: str | None = None  # tokenizer.ggml.model: llama (SPM), gpt2 (BPE), ...
    pre: str | None = None
    tokens: tuple[str, ...] = field(default=(), repr=False)
    bos: int | None = None
    eos: int | None = None
    add_bos: bool | None = None
    add_eos: bool | None = None
    rope_scaling: str | None = None  # {arch}.rope.scaling.type, when not "none"
    rope_factor: float | None = None
    rope_original_ctx: int | None = None


class _Bad(Exception):
    pass


class _Cursor:
    def __init__(self, buf: Any) -> None:
        self.buf, self.pos = buf, 0

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise _Bad("past the end")
        value = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += size
        return value

    def string(self, limit: int) -> str | None:
        n = self.take("<Q")
        if self.pos + n > len(self.buf):
            raise _Bad("string past the end")
        start, self.pos = self.pos, self.pos + n
        if n > limit:
            return None
        return bytes(self.buf[start:self.pos]).decode("utf-8", "replace")

    def skip_value(self, vtype: int) -> None:
        if vtype in _SCALAR:
            self.take(_SCALAR[vtype])
        elif vtype == STRING:
            self.string(0)
        elif vtype == ARRAY:
            itype, count = self.take("<I"), self.take("<Q")
            if count > MAX_ARRAY:
                raise _Bad("array too long")
            if itype in _SCALAR:
                size = struct.calcsize(_SCALAR[itype]) * count
                if self.pos + size > len(self.buf):
                    raise _Bad("array past the end")
                self.pos += size
            else:
                for _ in range(count):
                    self.skip_value(itype)
        else:
            raise _Bad(f"value type {vtype}")

    def value(self, vtype: int, arch: str | None, key: str) -> Any:
        if vtype in _SCALAR:
            return self.take(_SCALAR[vtype])
        if vtype == STRING:
            return self.string(MAX_TOKEN_BYTES)
        if vtype == ARRAY and key == "tokenizer.ggml.tokens":
            itype, count = self.take("<I"), self.take("<Q")
            if itype != STRING or count > MAX_TOKENS:
                raise _Bad("token list")
            return tuple(self.string(MAX_TOKEN_BYTES) or "" for _ in range(count))
        self.skip_value(vtype)
        return None


def read_meta(path: str | Path) -> GgufMeta | None:
    """The tokenizer and RoPE-scaling keys of a GGUF (the first part of a split one); None when unreadable."""
    from tunehost.errors import TunehostError
    from tunehost.inputs import open_input

    try:  # a FIFO, a device or a kernel file named as a model is no GGUF: never a blocked open or a drained read
        fd, _ = open_input(path, "a GGUF file")
    except TunehostError:
        return None
    try:
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
            return _walk(_Cursor(buf))
    except (OSError, ValueError, _Bad, struct.error):
        return None
    finally:
        os.close(fd)


def _walk(c: _Cursor) -> GgufMeta | None:
    if bytes(c.buf[:4]) != b"GGUF":
        return None
    c.pos = 4
    if c.take("<I") not in (2, 3):
        return None
    c.take("<Q")  # tensor count
    n_kv = c.take("<Q")
    if n_kv > MAX_KV:
        return None
    found: dict[str, Any] = {}
    for _ in range(n_kv):
        key = c.string(MAX_KEY_BYTES) or ""
        vtype = c.take("<I")
        arch = found.get("general.architecture")
        if key in WANTED or (arch and key.startswith(f"{arch}.rope.scaling.")):
            found[key] = c.value(vtype, arch, key)
        else:
            c.skip_value(vtype)
    arch = found.get("general.architecture")
    scaling = found.get(f"{arch}.rope.scaling.type")
    factor = found.get(f"{arch}.rope.scaling.factor")
    return GgufMeta(
        architecture=arch, tokenizer=found.get("tokenizer.ggml.model"), pre=found.get("tokenizer.ggml.pre"),
        tokens=found.get("tokenizer.ggml.tokens") or (), bos=_int(found.get("tokenizer.ggml.bos_token_id")),
        eos=_int(found.get("tokenizer.ggml.eos_token_id")), add_bos=_bool(found.get("tokenizer.ggml.add_bos_token")),
        add_eos=_bool(found.get("tokenizer.ggml.add_eos_token")),
        rope_scaling=scaling if isinstance(scaling, str) and scaling not in ("", "none") else None,
        rope_factor=float(factor) if isinstance(factor, float) and factor > 0 else None,
        rope_original_ctx=_int(found.get(f"{arch}.rope.scaling.original_context_length")))


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _bool(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def compare(target: GgufMeta, draft: GgufMeta) -> list[str]:
    """Why llama.cpp would refuse this draft for this target (empty: compatible, as far as the files tell)."""
    problems = []
    if target.tokenizer != draft.tokenizer:
        problems.append(f"vocabulary type {target.tokenizer or '?'} (target) vs {draft.tokenizer or '?'} (draft)")
    for what, t_add, d_add, t_id, d_id in (("BOS", target.add_bos, draft.add_bos, target.bos, draft.bos),
                                           ("EOS", target.add_eos, draft.add_eos, target.eos, draft.eos)):
        if bool(t_add) != bool(d_add) or (t_add and t_id != d_id):
            problems.append(f"{what} token {t_id} (target) vs {d_id} (draft)")
    n_t, n_d = len(target.tokens), len(draft.tokens)
    if n_t and n_d:
        if abs(n_t - n_d) > MAX_SIZE_DIFFERENCE:
            problems.append(f"vocabulary size {n_t} (target) vs {n_d} (draft), more than {MAX_SIZE_DIFFERENCE} apart")
        for i in range(CHECK_START_TOKEN_ID, min(n_t, n_d)):
            if target.tokens[i] != draft.tokens[i]:
                problems.append(f"token {i} is {target.tokens[i]!r} in the target, {draft.tokens[i]!r} in the draft")
                break
    return problems


__all__ = ["GgufMeta", "compare", "read_meta"]
