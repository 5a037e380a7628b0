"""The server bench: what a llama-server's users feel, measured over HTTP (docs/bench.md, "Server bench").

One *round* against one server runs, for every prompt depth that fits the server's context:

1. a **cold** request: a fresh seeded prompt of exactly ``depth`` of the server's own tokens (built with
   ``/tokenize``, sent as token ids), ``cache_prompt: false`` so nothing cached can pass for fast prompt processing
   (the server must report ``cache_n == 0``; a cached token on a cold request is an error);
2. a **cached** request: the same prompt again with ``cache_prompt: true`` (the slot still holds it): what a chat
   turn that resends its history costs; ``cache_n`` says how much the server reused;

then, for every client count above 1, that many clients send fresh cold prompts of the smallest depth at once.

Every request streams (native ``/completion``, ``ignore_eos`` so every request generates ``n_gen`` tokens). TTFT is
the client's clock (request sent -> first token read); PP and TG rates come from the server's ``timings``
(prompt_n / prompt_ms, predicted_n / predicted_ms), with the client's clock beside them (depth / TTFT, tokens after
the first / time after the first). Draft acceptance comes from ``timings.draft_n`` / ``draft_n_accepted``.

Rounds, interleaving of two servers (A B, B A, ...), stopping and verdicts are the llama-bench engine's
(:func:`tunehost.bench.runner.run_rounds`, :mod:`tunehost.bench.stats`): each round gives every test one value per
configuration, the "tests" being rates (higher is better): ``pp{d}`` (server), ``pp{d} client`` (depth / TTFT),
``tg{n}@d{d}`` (server), ``cached{d} client`` (depth / TTFT of the cached request), ``tg{n} x{c}`` (per-client
server rate with c clients) and ``total x{c}`` (all clients' generated tokens / wall time).
"""

from __future__ import annotations

import contextlib
import math
import random
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunehost.bench.llama_bench import BenchResult
from tunehost.bench.server.client import PROBE_TIMEOUT_S, ServerClient, ServerGone, Target
from tunehost.bounds import number, whole
from tunehost.errors import TunehostError
from tunehost.printable import one_line

SCHEMA = "tunehost-server-bench/1"
DEFAULT_DEPTHS = (512, 4096, 16384)
DEFAULT_N_GEN = 64
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_BUDGET_S = 180.0
MAX_CLIENTS = 64
ENDPOINTS = {"native": "/completion", "openai": "/v1/completions"}
CACHE_RAM_UNKNOWN = ("not reported by /props (llama-server keeps a host-RAM prompt cache by default: --cache-ram); "
                     "cold requests send cache_prompt false and must report cache_n 0")
CONTEXT_MARGIN = 8  # tokens kept free of the context besides n_gen (BOS, the first generated token's position)
MAX_TOKENIZE_PER_PROMPT = 3  # /tokenize requests for one prompt (one is the rule; two when it falls short)
MIN_TOKENS_PER_WORD = 0.5  # every word of WORDS is at least one token in a real vocabulary
MAX_TOKENS_PER_WORD = 16  # no word of WORDS (10 letters at most, and its blank) is more tokens, even byte by byte
TOKENIZE_SLACK = 64  # tokens beside the words: the "{seed}: " prefix, a BOS
TOKEN_JSON_BYTES = 12  # "2147483647, ": the most one token id takes in /tokenize's JSON
COLD_PROMPT_SLACK = 4  # prompt_n may exceed the tokens sent by a BOS the server adds
MAX_RATE_TS = 1e7  # no CPU or GPU processes ten million tokens a second: a server claiming it is lying
SERVER_CLOCK_SLACK = 1.1  # the server's own times must fit in the client's wall time (+10 %, +50 ms)
WORDS = ("the of and a to in is was that for on as with by he at from his an were are which this be or has had "
         "not but one their its new after who they have her she two been other when there all during into school "
         "time may years more most only over city some world would where later up such used many can state about "
         "national out known university united then made first also under river game year team three").split()


@dataclass(frozen=True)
class ServerSettings:
    """What one server bench runs (the same for both sides of a comparison)."""

    depths: tuple[int, ...] = DEFAULT_DEPTHS
    n_gen: int = DEFAULT_N_GEN
    clients: tuple[int, ...] = ()  # () = 1, and the server's slot count when above 1
    to_context: bool = False  # add the largest depth that fits the context
    seed: int = 42
    budget_s: float = DEFAULT_BUDGET_S
    min_rounds: int = 5
    max_rounds: int = 200
    timeout_s: float = DEFAULT_TIMEOUT_S
    model: str | None = None  # router mode: the model name sent with every request
    api: str = "native"  # "native": /completion; "openai": /v1/completions (both stream and carry timings)

    def to_json(self) -> dict[str, Any]:
        return {"depths": list(self.depths), "n_gen": self.n_gen, "clients": list(self.clients),
                "to_context": self.to_context, "seed": self.seed, "budget_s": self.budget_s,
                "min_rounds": self.min_rounds, "max_rounds": self.max_rounds, "timeout_s": self.timeout_s,
                "model": self.model, "endpoint": f"{ENDPOINTS[self.api]} (streamed)",
                "order": "alternating: A B, B A, A B, ..."}


@dataclass(frozen=True)
class ServerInfo:
    """What the server says about itself (/props): the provenance of every number measured against it."""

    url: str
    build: str | None
    model_path: str | None
    model_alias: str | None
    slots: int | None
    n_ctx: int | None  # per slot
    router: bool = False
    cache_ram: str = CACHE_RAM_UNKNOWN
    load_s: float | None = None  # router mode: the first request's wait while the model loaded
    command: tuple[str, ...] | None = None  # --serve: the llama-server command line (its --api-key-file path only)

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "build": self.build, "model_path": self.model_path, "model_alias": self.model_alias,
                "total_slots": self.slots, "n_ctx": self.n_ctx, "router": self.router, "cache_ram": self.cache_ram,
                "load_s": None if self.load_s is None else round(self.load_s, 3),
                "command": list(self.command) if self.command else None}


@dataclass(frozen=True)
class RequestRecord:
    """One streamed request: the client's clock and the server's timings, raw."""

    config: str
    round: int  # 0 = warm-up (not counted)
    test: str  # "cold", "cached" or "x{c}"
    depth: int
    client: int
    ttft_ms: float
    total_ms: float
    client_cpu_ms: float  # CPU the client thread spent on this request (encode, read, parse)
    tokens_after_first_ms: float | None
    prompt_n: int
    prompt_ms: float
    cache_n: int
    predicted_n: int
    predicted_ms: float
    draft_n: int | None = None
    draft_n_accepted: int | None = None

    @property
    def pp_ts(self) -> float:
        return self.prompt_n / self.prompt_ms * 1000.0 if self.prompt_ms > 0 else 0.0

    @property
    def tg_ts(self) -> float:
        return self.predicted_n / self.predicted_ms * 1000.0 if self.predicted_ms > 0 else 0.0

    @property
    def pp_client_ts(self) -> float:
        return self.depth / self.ttft_ms * 1000.0 if self.ttft_ms > 0 else 0.0

    @property
    def tg_client_ts(self) -> float | None:
        if not self.tokens_after_first_ms or self.predicted_n < 2:
            return None
        return (self.predicted_n - 1) / self.tokens_after_first_ms * 1000.0

    def to_json(self) -> dict[str, Any]:
        data = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}
        data.update(pp_ts=round(self.pp_ts, 3), tg_ts=round(self.tg_ts, 3))
        return data


# ---------------------------------------------------------------- asking the server


def probe(client: ServerClient, *, model: str | None = None, wait_s: float | None = None) -> ServerInfo:
    """/health then /props (or /props?model=NAME behind a router): is this a llama-server, what does it run.

    A server still loading (503 on /health) is waited for, up to ``wait_s`` (default: the client's timeout).
    Router mode without ``model`` is an error naming the models the router offers."""
    wait_s = client.timeout_s if wait_s is None else wait_s
    deadline = time.monotonic() + wait_s  # wall clock: each /health request gets at most what is left of it
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TunehostError(f"{client.target.url}: still loading after {wait_s:g} s (/health answers 503)")
        status, health = client.request_json("GET", "/health", timeout_s=min(client.timeout_s, PROBE_TIMEOUT_S, left),
                                             ok=(200, 503, 404))
        if status == 404 or not isinstance(health, dict) or ("status" not in health and "error" not in health):
            raise TunehostError(f"{client.target.url}/health: not llama-server's answer; not a llama-server")
        if status == 200:
            break
        time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
    _, props = client.request_json("GET", "/props", timeout_s=min(client.timeout_s, PROBE_TIMEOUT_S))
    router = _check_props(props, client.target.url) == "router"
    load_s = None
    if router:
        if not model:
            raise TunehostError(f"{client.target.url} is a llama-server router: name the model with --model NAME "
                                f"(it offers: {', '.join(list_models(client)) or 'none listed'})")
        began = time.monotonic()  # the first request loads the model: its wait is reported apart
        _first_token(client, model)
        load_s = time.monotonic() - began
        _, props = client.request_json("GET", f"/props?model={_quote(model)}")
        _check_props(props, client.target.url)
    elif model:
        raise TunehostError(f"{client.target.url} serves one model ({one_line(props.get('model_alias'), 80)}); "
                            "--model NAME is for a router (llama-server --models-dir)")
    settings = props.get("default_generation_settings") or {}
    return ServerInfo(url=client.target.url, build=_text(props.get("build_info")),
                      model_path=_text(props.get("model_path")), model_alias=_text(props.get("model_alias")),
                      slots=whole(props.get("total_slots"), 1, 1 << 20),
                      n_ctx=whole(settings.get("n_ctx"), 1, 1 << 31), router=router, load_s=load_s)


def list_models(client: ServerClient) -> list[str]:
    try:
        _, data = client.request_json("GET", "/models", timeout_s=min(client.timeout_s, PROBE_TIMEOUT_S))
    except TunehostError:
        return []
    items = data.get("data") if isinstance(data, dict) else None
    return [one_line(m.get("id"), 80) for m in items or () if isinstance(m, dict) and m.get("id")][:20]


def _check_props(props: Any, url: str) -> str:
    if not isinstance(props, dict) or not isinstance(props.get("default_generation_settings"), dict) \
            or "build_info" not in props:
        raise TunehostError(f"{url}/props: no llama-server properties (build_info, default_generation_settings); "
                            "not a llama-server")
    return "router" if props.get("role") == "router" else "server"


def _text(value: Any) -> str | None:
    return one_line(value, 300) if isinstance(value, str) and value else None


def _quote(name: str) -> str:
    import urllib.parse

    return urllib.parse.quote(name, safe="")


def _first_token(client: ServerClient, model: str) -> None:
    for _ in client.stream("/completion", {"prompt": "Hello", "n_predict": 1, "stream": True, "model": model,
                                           "cache_prompt": False}):
        pass


class RequestBudget:
    """The hard cap on the /tokenize requests one bench may send to build its prompts (shared by the servers and
    client threads of one measurement): a server whose tokenizer forces more is refused, never obeyed."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, url: str) -> None:
        with self._lock:
            if self.used >= self.limit:
                raise TunehostError(f"{url}/tokenize: {self.limit} requests spent building this bench's prompts, "
                                    "its cap (a real tokenizer needs one per prompt); not a usable llama-server")
            self.used += 1


def tokenize_cap(settings: "ServerSettings", n_depths: int) -> int:
    """The /tokenize requests one server's bench may take: MAX_TOKENIZE_PER_PROMPT for each prompt the rounds can
    build (one per depth, one per extra client; the warm-up round and max_rounds), for each server."""
    prompts = n_depths + sum(c for c in settings.clients if c > 1)
    return MAX_TOKENIZE_PER_PROMPT * prompts * (max(settings.min_rounds, settings.max_rounds) + 1)


def seeded_prompt(client: ServerClient, n_tokens: int, seed: int, model: str | None = None, *,
                  budget: RequestBudget | None = None) -> list[int]:
    """Exactly ``n_tokens`` of the server's own tokens from seeded random words (deterministic per seed).

    Every word of WORDS is at least one token in any real vocabulary, so the first /tokenize of ``n_tokens`` words
    (and a few more) is almost always enough; when it is not, the tokens per word it showed size one correction.
    At most MAX_TOKENIZE_PER_PROMPT requests, all within one --timeout, each counted against ``budget``; a server
    answering fewer than MIN_TOKENS_PER_WORD tokens per word has no real tokenizer and is refused at once (one
    token per call made tunehost call it once per token: 3,072 requests for --depths 512 --budget 0)."""
    rng = random.Random(seed)
    tokens: list[int] = []
    words = n_tokens + 8
    deadline = time.monotonic() + client.timeout_s
    url = client.target.url
    for _ in range(MAX_TOKENIZE_PER_PROMPT):
        text = " ".join(rng.choice(WORDS) for _ in range(words))
        body: dict[str, Any] = {"content": f"{seed}: {text}", "add_special": False}
        if model:
            body["model"] = model
        left = deadline - time.monotonic()
        if left <= 0:
            raise TunehostError(f"{url}/tokenize: no prompt of {n_tokens} tokens within {client.timeout_s:g} s "
                                "(--timeout)")
        if budget is not None:
            budget.take(url)
        most = words * MAX_TOKENS_PER_WORD + TOKENIZE_SLACK  # a flood of tokens is refused before it is parsed
        _, data = client.request_json("POST", "/tokenize", body, timeout_s=min(client.timeout_s, left),
                                      max_bytes=most * TOKEN_JSON_BYTES + 4096)
        got = data.get("tokens") if isinstance(data, dict) else None
        if isinstance(got, list) and len(got) > most:
            raise TunehostError(f"{url}/tokenize: {len(got)} tokens for {words} words: not a real tokenizer (no "
                                f"word is more than {MAX_TOKENS_PER_WORD}); not a usable llama-server")
        if not isinstance(got, list) or not got or not all(whole(t, 0, 1 << 31) is not None for t in got):
            raise TunehostError(f"{url}/tokenize: no token list in the answer; not a llama-server")
        if len(got) < words * MIN_TOKENS_PER_WORD:
            raise TunehostError(f"{url}/tokenize: {len(got)} token(s) for {words} words: not a real tokenizer "
                                "(every word is at least one token); not a usable llama-server")
        tokens += got[:n_tokens - len(tokens)]
        if len(tokens) >= n_tokens:
            return tokens
        words = int((n_tokens - len(tokens)) / MIN_TOKENS_PER_WORD) + 8  # the worst ratio allowed covers the rest
    raise TunehostError(f"{url}/tokenize: {len(tokens)} of {n_tokens} tokens after {MAX_TOKENIZE_PER_PROMPT} "
                        "requests; not a usable llama-server")


@dataclass(frozen=True)
class RequestSpec:
    """What one request asks and where it belongs (configuration, round, test, depth, client)."""

    config: str
    round: int
    test: str  # "cold", "cached" or "x{c}"
    depth: int
    client: int = 0
    n_gen: int = DEFAULT_N_GEN
    model: str | None = None
    api: str = "native"

    @property
    def cold(self) -> bool:
        return self.test != "cached"


@dataclass(frozen=True)
class ClientClock:
    """The client's side of one request, in milliseconds (CPU: the client thread's own time)."""

    ttft_ms: float
    total_ms: float
    cpu_ms: float
    after_first_ms: float | None


def stream_request(client: ServerClient, prompt: Sequence[int], spec: RequestSpec) -> RequestRecord:
    """One streamed completion (native /completion or OpenAI /v1/completions): TTFT on the client's clock, the
    server's timings, the client's own CPU time. Cold requests send ``cache_prompt: false``."""
    openai = spec.api == "openai"
    body: dict[str, Any] = {"prompt": list(prompt), "stream": True, "cache_prompt": not spec.cold,
                            "ignore_eos": True, "temperature": 0.0, "seed": 1}
    body["max_tokens" if openai else "n_predict"] = spec.n_gen
    if spec.model:
        body["model"] = spec.model
    cpu0 = time.thread_time()
    began = time.monotonic()
    first = last = None
    timings: Any = None
    # closed here when the loop ends, not by the garbage collector after the break: a Ctrl-C whose handler runs in
    # a generator's finalizer is printed as "Exception ignored" and lost (ServerClient.stream's finally, _close)
    with contextlib.closing(client.stream(ENDPOINTS[spec.api], body)) as events:
        for event in events:
            piece, done = _piece(event.data, openai)
            if piece:
                first = event.at if first is None else first
                last = event.at
            if "timings" in event.data:
                timings = event.data["timings"]
            if done:
                break
    ended = time.monotonic()
    cpu_ms = (time.thread_time() - cpu0) * 1000.0
    if timings is None:
        raise ServerGone(f"{client.target.url}{ENDPOINTS[spec.api]}: the answer ended before the server's timings "
                         "(it stopped mid-answer, or is not a llama-server)")
    first = first if first is not None else ended
    clock = ClientClock(ttft_ms=(first - began) * 1000.0, total_ms=(ended - began) * 1000.0, cpu_ms=cpu_ms,
                        after_first_ms=(last - first) * 1000.0 if last is not None else None)
    return _record(timings, client.target.url, spec, clock, len(prompt))


def _piece(data: Mapping[str, Any], openai: bool) -> tuple[bool, bool]:
    """(this event carries generated text, it is the last one) in either API's stream."""
    if not openai:
        return bool(data.get("content") or data.get("tokens")), data.get("stop") is True
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    return bool(choice.get("text")), choice.get("finish_reason") is not None


def _record(timings: Any, url: str, spec: RequestSpec, clock: ClientClock, n_sent: int) -> RequestRecord:
    """The server's timings checked against physics and the client's clock; one error for absurd ones."""
    def bad(what: str) -> TunehostError:
        return TunehostError(f"{url}: absurd timings from the server ({what}); not trusting this server's numbers")

    if not isinstance(timings, dict):
        raise bad("timings is not an object")
    ints = {k: whole(timings.get(k), 0, 1 << 31) for k in ("prompt_n", "predicted_n", "cache_n")}
    floats = {k: number(timings.get(k)) for k in ("prompt_ms", "predicted_ms")}
    for key, value in {**ints, **floats}.items():
        if value is None and not (key == "cache_n" and "cache_n" not in timings):
            raise bad(f"{key} = {one_line(timings.get(key), 40)}")
    prompt_n, predicted_n, cache_n = ints["prompt_n"] or 0, ints["predicted_n"] or 0, ints["cache_n"] or 0
    prompt_ms, predicted_ms = floats["prompt_ms"] or 0.0, floats["predicted_ms"] or 0.0
    if predicted_n > spec.n_gen or predicted_n == 0:
        raise bad(f"{predicted_n} tokens generated of the {spec.n_gen} asked")
    if prompt_n > n_sent + COLD_PROMPT_SLACK or prompt_n + cache_n > n_sent + COLD_PROMPT_SLACK:
        raise bad(f"{prompt_n} prompt tokens processed and {cache_n} cached of the {n_sent} sent")
    for n, ms, what in ((prompt_n, prompt_ms, "prompt"), (predicted_n, predicted_ms, "generation")):
        if n > 0 and (ms <= 0 or n / ms * 1000.0 > MAX_RATE_TS):
            raise bad(f"{n} {what} tokens in {ms:g} ms")
    if prompt_ms + predicted_ms > clock.total_ms * SERVER_CLOCK_SLACK + 50.0:
        raise bad(f"{prompt_ms + predicted_ms:.0f} ms of work inside a {clock.total_ms:.0f} ms request")
    if spec.cold and cache_n > 0:
        raise TunehostError(f"{url}: the server reused {cache_n} cached prompt tokens on a request sent with "
                            "cache_prompt false; its prompt rate would be flattered, so it is not used")
    draft_n = whole(timings.get("draft_n"), 0, 1 << 31)
    accepted = whole(timings.get("draft_n_accepted"), 0, 1 << 31)
    if draft_n is not None and accepted is not None and accepted > draft_n:
        raise bad(f"{accepted} draft tokens accepted of {draft_n}")
    return RequestRecord(config=spec.config, round=spec.round, test=spec.test, depth=spec.depth, client=spec.client,
                         ttft_ms=clock.ttft_ms, total_ms=clock.total_ms, client_cpu_ms=clock.cpu_ms,
                         tokens_after_first_ms=clock.after_first_ms, prompt_n=prompt_n, prompt_ms=prompt_ms,
                         cache_n=cache_n, predicted_n=predicted_n, predicted_ms=predicted_ms, draft_n=draft_n,
                         draft_n_accepted=accepted)


# ---------------------------------------------------------------- one round


def plan_depths(settings: ServerSettings, n_ctx: int | None) -> tuple[int, ...]:
    """The depths that fit one slot's context (with n_gen and a margin), plus the largest that fits when asked."""
    room = (n_ctx - settings.n_gen - CONTEXT_MARGIN) if n_ctx else None
    depths = sorted({d for d in settings.depths if room is None or d <= room})
    if settings.to_context and room is not None and room > 0 and room not in depths:
        depths.append(room)
    if not depths:
        raise TunehostError(f"no prompt depth fits the server's context ({n_ctx} tokens per slot, {settings.n_gen} "
                            f"generated): give smaller --depths or start llama-server with a larger -c")
    return tuple(depths)


@dataclass
class RoundRunner:
    """Runs rounds against one server: a callable the engine drives (``invoke``), records kept for the table."""

    name: str
    target: Target
    settings: ServerSettings
    depths: tuple[int, ...]
    api_key: str | None = field(default=None, repr=False)
    alive: Callable[[], None] | None = None  # --serve: raises, saying how the server died, when it has
    records: list[RequestRecord] = field(default_factory=list)
    calls: int = 0
    budget: RequestBudget | None = None  # the bench's cap on /tokenize requests (None: this runner's own)

    def __post_init__(self) -> None:
        if self.budget is None:
            self.budget = RequestBudget(tokenize_cap(self.settings, len(self.depths)))

    def client(self) -> ServerClient:
        return ServerClient(self.target, timeout_s=self.settings.timeout_s, api_key=self.api_key)

    def spec(self, round_no: int, test: str, depth: int, client: int = 0) -> RequestSpec:
        s = self.settings
        return RequestSpec(config=self.name, round=round_no, test=test, depth=depth, client=client, n_gen=s.n_gen,
                           model=s.model, api=s.api)

    def invoke(self, args: Sequence[str], on_line: Callable[[str], None] | None) -> list[BenchResult]:
        round_no = self.calls  # the engine calls each configuration once for its warm-up, then once per round
        self.calls += 1
        try:
            return self._round(round_no, on_line)
        except TunehostError as exc:
            raise _why(exc, self.alive) from None

    def _round(self, round_no: int, on_line: Callable[[str], None] | None) -> list[BenchResult]:
        s = self.settings
        client = self.client()
        results: list[BenchResult] = []
        for depth in self.depths:
            if on_line:
                on_line(f"depth {depth}")
            prompt = seeded_prompt(client, depth, _seed(s.seed, round_no, depth, 0), s.model, budget=self.budget)
            cold = stream_request(client, prompt, self.spec(round_no, "cold", depth))
            cached = stream_request(client, prompt, self.spec(round_no, "cached", depth))
            self.records += [cold, cached]
            results += [_rate(f"pp{depth}", (cold.pp_ts,), n_prompt=depth),
                        _rate(f"pp{depth} client", (cold.pp_client_ts,), n_prompt=depth),
                        _rate(f"tg{s.n_gen}@d{depth}", (cold.tg_ts,), n_gen=s.n_gen, depth=depth),
                        _rate(f"cached{depth} client", (cached.pp_client_ts,), n_prompt=depth)]
        depth = self.depths[0]
        for clients in s.clients:
            if clients < 2:
                continue
            if on_line:
                on_line(f"{clients} clients")
            began = time.monotonic()
            got = self._concurrent(clients, round_no, depth)
            wall_s = time.monotonic() - began
            self.records += got
            total = sum(r.predicted_n for r in got) / wall_s if wall_s > 0 else 0.0
            results += [_rate(f"tg{s.n_gen} x{clients}", tuple(r.tg_ts for r in got), n_gen=s.n_gen, depth=depth),
                        _rate(f"total x{clients}", (total,), n_gen=s.n_gen, depth=depth)]
        return results

    def _concurrent(self, clients: int, round_no: int, depth: int) -> list[RequestRecord]:
        s = self.settings
        prompts = [seeded_prompt(self.client(), depth, _seed(s.seed, round_no, depth, c + 1), s.model,
                                 budget=self.budget) for c in range(clients)]
        start = threading.Barrier(clients)
        got: list[RequestRecord | None] = [None] * clients
        errors: list[BaseException] = []

        def run(c: int) -> None:
            try:
                start.wait(timeout=s.timeout_s)
                got[c] = stream_request(self.client(), prompts[c], self.spec(round_no, f"x{clients}", depth, c))
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                start.abort()

        threads = [threading.Thread(target=run, args=(c,), daemon=True, name=f"tunehost-client-{c}")
                   for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for exc in errors:
            if isinstance(exc, TunehostError):
                raise exc
        if errors:
            raise TunehostError(f"a client thread failed: {one_line(errors[0], 200)}")
        return [r for r in got if r is not None]


def _why(exc: TunehostError, alive: Callable[[], None] | None) -> TunehostError:
    """The error to show for a failed request: how the server died when tunehost started it and it has
    exited (--serve), else the request's own error ("did it crash?" for a connection closed mid-request)."""
    if alive is not None:
        try:
            alive()
        except TunehostError as died:
            return died
    return TunehostError(f"{exc} (did it crash?)") if isinstance(exc, ServerGone) else exc


def _seed(seed: int, round_no: int, depth: int, client: int) -> int:
    return ((seed * 1_000_003 + round_no) * 1_000_003 + depth) * 131 + client


def _rate(test: str, samples: Sequence[float], *, n_prompt: int = 0, n_gen: int = 0, depth: int = 0) -> BenchResult:
    values = tuple(float(v) for v in samples if v > 0 and math.isfinite(v))
    if not values:
        raise TunehostError(f"{test}: no positive rate measured")
    mean = statistics.fmean(values)
    return BenchResult(test=test, n_prompt=n_prompt, n_gen=n_gen, n_depth=depth, avg_ts=mean,
                       stddev_ts=statistics.stdev(values) if len(values) > 1 else 0.0, samples_ts=values)


# ---------------------------------------------------------------- the summary table


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty sequence."""
    data = sorted(values)
    if not data:
        raise ValueError("no values")
    pos = (len(data) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)


def summarize_records(records: Sequence[RequestRecord], config: str) -> list[dict[str, Any]]:
    """One row per (test, depth) of one configuration's counted requests: TTFT p50/p90, rates, cache, drafts."""
    counted = [r for r in records if r.config == config and r.round > 0]
    rows: list[dict[str, Any]] = []
    keys = sorted({(r.test, r.depth) for r in counted}, key=lambda k: (k[0] != "cold", k[0] != "cached", k[0], k[1]))
    for test, depth in keys:
        group = [r for r in counted if r.test == test and r.depth == depth]
        ttft = [r.ttft_ms for r in group]
        client_tg = [v for v in (r.tg_client_ts for r in group) if v]
        drafts = [r for r in group if r.draft_n]
        by_round: dict[int, list[RequestRecord]] = {}
        for r in group:
            by_round.setdefault(r.round, []).append(r)
        row: dict[str, Any] = {
            "test": test, "depth": depth, "clients": int(test[1:]) if test.startswith("x") else 1,
            "requests": len(group), "ttft_ms_p50": round(percentile(ttft, 50), 2),
            "ttft_ms_p90": round(percentile(ttft, 90), 2),
            "pp_ts": round(statistics.median(r.pp_ts for r in group), 2),
            "pp_client_ts": round(statistics.median(r.pp_client_ts for r in group), 2),
            "tg_ts": round(statistics.median(r.tg_ts for r in group), 2),
            "tg_client_ts": round(statistics.median(client_tg), 2) if client_tg else None,
            "cache_n": round(statistics.median(r.cache_n for r in group), 1),
            "prompt_n": round(statistics.median(r.prompt_n for r in group), 1),
        }
        if test.startswith("x"):
            row["aggregate_ts"] = round(statistics.median(
                sum(r.predicted_n for r in rs) / (max(r.total_ms for r in rs) / 1000.0)
                for rs in by_round.values()), 2)
        if drafts:
            row["draft_acceptance"] = round(sum(r.draft_n_accepted or 0 for r in drafts)
                                            / sum(r.draft_n or 0 for r in drafts), 4)
        rows.append(row)
    return rows


def speculation_summary(records: Sequence[RequestRecord], names: Sequence[str], comparison: Any
                        ) -> tuple[dict[str, Any], ...]:
    """Per server that drafted (llama-server's ``timings.draft_n`` / ``draft_n_accepted`` on its counted
    requests): the tokens drafted and accepted, the acceptance, and, when two servers were raced, the net change of
    every TG test against the other server (the comparison's ratio, interval and verdict, from this server's side)."""
    out = []
    for i, name in enumerate(names):
        mine = [r for r in records if r.config == name and r.round > 0]
        drafted = sum(r.draft_n or 0 for r in mine)
        if not drafted:
            continue
        accepted = sum(r.draft_n_accepted or 0 for r in mine)
        generated = sum(r.predicted_n for r in mine)
        row: dict[str, Any] = {"server": name, "requests": len(mine), "drafted": drafted, "accepted": accepted,
                               "acceptance": round(accepted / drafted, 4),
                               "accepted_per_generated": round(accepted / generated, 4) if generated else None,
                               "tg": []}
        if comparison is not None and len(names) == 2:
            for t in comparison.rows:
                if not t.test.startswith("tg") or t.ratio is None:
                    continue
                flip = i == 0  # the comparison is the second server over the first
                ratio = 1.0 / t.ratio if flip else t.ratio
                row["tg"].append({
                    "test": t.test, "vs": names[1 - i], "ts": round(t.baseline_ts if flip else t.candidate_ts, 2),
                    "vs_ts": round(t.candidate_ts if flip else t.baseline_ts, 2),
                    "net_percent": round((ratio - 1.0) * 100.0, 2), "verdict": _side_verdict(t.verdict, flip)})
        out.append(row)
    return tuple(out)


def _side_verdict(verdict: str, flip: bool) -> str:
    return {"faster": "slower", "slower": "faster"}.get(verdict, verdict) if flip else verdict


def client_overhead(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """The client's own CPU time per request as a share of the request's wall time (the < 1 % promise)."""
    shares = [r.client_cpu_ms / r.total_ms for r in records if r.total_ms > 0]
    if not shares:
        return {}
    return {"requests": len(shares), "median_percent": round(statistics.median(shares) * 100, 4),
            "max_percent": round(max(shares) * 100, 4),
            "total_percent": round(sum(r.client_cpu_ms for r in records)
                                   / sum(r.total_ms for r in records) * 100, 4)}


# ---------------------------------------------------------------- a whole measurement


@dataclass(frozen=True)
class ServerTarget:
    """One configuration to measure: a name, where it listens, and (--serve) how it was started."""

    name: str
    target: Target
    command: tuple[str, ...] | None = None
    alive: Callable[[], None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ServerBenchResult:
    """What ``tunehost bench --server/--serve`` measured; JSON-able (``--save``), with /props as provenance."""

    settings: Mapping[str, Any]
    servers: tuple[ServerInfo, ...]
    configs: tuple[Any, ...]  # results.ConfigResult: one per server
    comparison: Any  # results.Comparison (two servers) or None
    summary: Mapping[str, list[dict[str, Any]]]  # config -> table rows (summarize_records)
    records: tuple[RequestRecord, ...]
    invocations: tuple[Any, ...]
    overhead: Mapping[str, Any]
    created: str
    label: str | None = None
    notes: tuple[str, ...] = ()
    watch: Any = None  # tunehost.bench.watch.WatchReport of the counted rounds (None: not watched)
    round_watch: tuple[Any, ...] = ()  # one WatchReport per counted round
    speculation: tuple[Mapping[str, Any], ...] = ()  # speculation_summary: acceptance and net TG per drafting server
    # per served server (config name): its TG ceiling and band at each prompt depth run (bench.runner.tg_ceiling's
    # at_depth, from the llama-server arguments --serve started it with); {} for a server the bench did not start
    ceilings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def disturbed(self) -> bool:
        return self.watch is not None and self.watch.disturbed

    def to_json(self) -> dict[str, Any]:
        from tunehost import __version__

        return {"schema": SCHEMA, "tunehost_version": __version__, "created": self.created, "label": self.label,
                "settings": dict(self.settings), "servers": [s.to_json() for s in self.servers],
                "configs": [c.to_json() for c in self.configs],
                "comparison": self.comparison.to_json() if self.comparison is not None else None,
                "summary": {k: list(v) for k, v in self.summary.items()}, "client_overhead": dict(self.overhead),
                "notes": list(self.notes), "requests": [r.to_json() for r in self.records],
                "invocations": [i.to_json() for i in self.invocations],
                "watch": self.watch.to_json() if self.watch is not None else None,
                "round_watch": [w.to_json() for w in self.round_watch],
                "speculation": [dict(s) for s in self.speculation],
                "ceilings": {name: dict(c) for name, c in self.ceilings.items()}}


def cache_ram_statement(command: Sequence[str] | None) -> str:
    """What is known of llama-server's host-RAM prompt cache: /props does not say; --serve knows the flags."""
    if not command:
        return CACHE_RAM_UNKNOWN
    for i, token in enumerate(command):
        name, _, inline = token.partition("=")
        if name in ("-cram", "--cache-ram"):
            value = inline or (command[i + 1] if i + 1 < len(command) else "")
            return ("off (--cache-ram 0)" if value.strip() == "0"
                    else f"on, --cache-ram {one_line(value, 20)} MiB (-1 = no limit)")
    return "on (llama-server's default: --cache-ram 8192 MiB); cold requests still send cache_prompt false"


def measure_server(targets: Sequence[ServerTarget], settings: ServerSettings, *, api_key: str | None = None,
                   on_progress: Callable[[Any], None] | None = None, label: str | None = None,
                   watcher: Any = None) -> ServerBenchResult:
    """Probe every server, then the engine's interleaved rounds; the result with /props as provenance.
    ``watcher``: a tunehost.bench.watch.HostWatcher that counts the servers' CPU time as the measurement's own
    (every round is then judged as bench judges its rounds)."""
    from dataclasses import replace

    from tunehost.bench.results import Side, compare_configs, config_from_invocations, now_utc, rounds_of
    from tunehost.bench.runner import BenchConfig, BenchSettings, RoundsHooks, run_rounds

    if not targets:
        raise ValueError("nothing to measure")
    if any(c < 1 or c > MAX_CLIENTS for c in settings.clients):
        raise TunehostError(f"--clients: each count must be between 1 and {MAX_CLIENTS}")
    infos = []
    for t in targets:
        client = ServerClient(t.target, timeout_s=settings.timeout_s, api_key=api_key)
        try:
            info = probe(client, model=settings.model)
        except TunehostError as exc:
            raise _why(exc, t.alive) from None
        infos.append(replace(info, command=t.command, cache_ram=cache_ram_statement(t.command)))
    if not settings.clients:
        slots = min(infos[0].slots or 1, MAX_CLIENTS)
        settings = replace(settings, clients=(1, slots) if slots > 1 else (1,))
    contexts = [i.n_ctx for i in infos if i.n_ctx]
    depths = plan_depths(settings, min(contexts) if contexts else None)
    budget = RequestBudget(tokenize_cap(settings, len(depths)) * len(targets))  # one cap for the whole bench
    runners = {t.name: RoundRunner(t.name, t.target, settings, depths, api_key=api_key, alive=t.alive,
                                   budget=budget) for t in targets}
    configs = [BenchConfig(t.name, t.command[1:] if t.command else (t.target.url,)) for t in targets]
    engine = BenchSettings(model=infos[0].model_path or infos[0].url, n_prompt=depths[0], n_gen=settings.n_gen,
                           reps=1, budget_s=settings.budget_s, min_rounds=max(1, settings.min_rounds),
                           max_rounds=max(settings.min_rounds, settings.max_rounds), warmup=True,
                           progress_lines=False)
    outcome = run_rounds(configs, engine, RoundsHooks(runners[targets[0].name].invoke, watcher=watcher,
                                                      on_progress=on_progress,
                                                      invoke_for=lambda config: runners[config.name].invoke))
    config_results = tuple(
        config_from_invocations(c.name, c.flags, outcome.invocations, outcome.results[c.name],
                                " ".join(targets[i].command) if targets[i].command else targets[i].target.url)
        for i, c in enumerate(configs))
    comparison = None
    disturbed = outcome.watch is not None and outcome.watch.disturbed
    if len(config_results) == 2:
        comparison = compare_configs(Side(config_results[0], rounds=rounds_of(outcome.invocations, configs[0].name)),
                                     Side(config_results[1], rounds=rounds_of(outcome.invocations, configs[1].name)),
                                     interleaved=True, disturbed=disturbed,
                                     notes=[f"host disturbed: {'; '.join(outcome.watch.reasons)}"]
                                     if disturbed and outcome.watch is not None else [])
    records = tuple(r for runner in runners.values() for r in runner.records)
    notes = []
    if outcome.stop_reason.startswith(("budget", "max rounds")) and comparison is not None \
            and any(r.statistical_verdict == "no clear difference" for r in comparison.rows):
        notes.append(f"stopped at the {outcome.stop_reason} before every interval was narrow enough: a larger "
                     "--budget could still separate a small difference from noise")
    skipped = [d for d in settings.depths if d not in depths]
    if skipped:
        notes.append(f"depths {', '.join(map(str, skipped))} do not fit the context "
                     f"({min(contexts) if contexts else '?'} tokens per slot with {settings.n_gen} generated)")
    if any(r.test == "cached" and r.round > 0 and r.cache_n == 0 for r in records):
        notes.append("the server reused no cached prompt on the repeated request (cache_n = 0): prompt caching is "
                     "off or the request went to another slot")
    settings_json = dict(settings.to_json(), depths_run=list(depths), rounds=outcome.rounds,
                         stop_reason=outcome.stop_reason, wall_s=round(outcome.wall_s, 3))
    return ServerBenchResult(
        settings=settings_json, servers=tuple(infos), configs=config_results, comparison=comparison,
        summary={c.name: summarize_records(records, c.name) for c in configs}, records=records,
        invocations=outcome.invocations, overhead=client_overhead([r for r in records if r.round > 0]),
        created=now_utc(), label=label, notes=tuple(notes), watch=outcome.watch, round_watch=outcome.round_watch,
        speculation=speculation_summary(records, [c.name for c in configs], comparison))
