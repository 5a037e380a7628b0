"""llama-exposure — inference servers (llama-server, ollama, vLLM, LM Studio, llama-cpp-python, ...) listening beyond
loopback without authentication, llama.cpp's rpc-server (no authentication at all) and proxies in front of them
(llama-swap). Judged from raw process facts (tunehost.facts.processes classifies them), so an old snapshot is
re-judged by newer code. Reports addresses and ports, never a key."""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.host.redact import REDACTED
from tunehost.facts.processes import (NO_AUTH, SERVER_KINDS, UNSEEN, Listener, ProcessFacts, ProcessInfo,
                                      is_loopback)

OLLAMA_LOOPBACK = (
    "sudo mkdir -p /etc/systemd/system/ollama.service.d",
    "printf '[Service]\\nEnvironment=\"OLLAMA_HOST=127.0.0.1:11434\"\\n' | "
    "sudo tee /etc/systemd/system/ollama.service.d/tunehost-loopback.conf",
    "sudo systemctl daemon-reload && sudo systemctl restart ollama",
)
WHY = ("Anyone who can reach the port can run prompts on this machine (and use its GPU), read what the server "
       "returns, and on llama-server use every endpoint it exposes.")
RPC_WHY = ("llama.cpp's rpc-server runs whatever tensor operations a client sends and lets it allocate and write its "
           "memory, with no authentication; rpc-server itself warns \"Never expose the RPC server to an open network!\"")


class LlamaExposureCheck(Check):
    id = "llama-exposure"
    title = "Inference server exposure"
    judges = ("llama-server (and ollama, vLLM, LM Studio, koboldcpp, llamafile, llama-cpp-python), llama.cpp's "
              "rpc-server and proxies such as llama-swap listening beyond loopback without authentication")

    def run(self, facts):
        procs = facts.get(ProcessFacts)
        if procs.processes is None:
            yield self.skip(f"cannot see running servers: {procs.processes_reason}")
            return
        servers = procs.listening_servers
        if not servers:
            yield self.ok("no inference server is running",
                          {"processes sample": "no llama-server, rpc-server, llama-swap, ollama serve, vLLM, LM Studio, "
                                               "llama-cpp-python, koboldcpp or llamafile"})
            return
        for server in servers:
            yield self._judge(procs, server)

    def _judge(self, procs: ProcessFacts, server: ProcessInfo):
        kind = SERVER_KINDS[server.server or ""]
        host, port, source = server.configured_listen()
        sockets, how = _sockets(procs, server, port)
        ev = _evidence(procs, server)
        label = f"{server.server} (pid {server.pid})"
        if sockets:
            addresses: list[tuple[str, int | None]] = [(s.address, s.port) for s in sockets]
            ev["listeners sample"] = ", ".join(_fmt(a, p) for a, p in addresses) + f" ({how})"
        elif host is None:
            ev["listeners sample"] = how
            return self.skip(f"{label}: cannot tell where it listens: {source}, and none of its sockets is visible",
                             ev)
        else:
            addresses = [(host, port)]
            ev["listeners sample"] = how
            ev["judged from"] = f"{source}: {_fmt(host, port)}"
        exposed = [(a, p) for a, p in addresses if not is_loopback(a)]
        proxy = procs.process(server.ppid)
        behind = proxy if proxy is not None and proxy.kind is not None and proxy.kind.proxy else None
        if not exposed:
            where = ", ".join(_fmt(a, p) for a, p in addresses)
            tail = f", behind {behind.server} (pid {behind.pid})" if behind else ""
            return self.ok(f"{label} listens on loopback only ({where}){tail}", ev)
        where = ", ".join(_fmt(a, p) for a, p in exposed)
        fix = _fix(server, exposed[0][1])
        if kind.auth == NO_AUTH:
            why = (RPC_WHY if server.server == "rpc-server" else WHY)
            return self.fail(f"{label} listens on {where}, beyond loopback, and {server.server} has no authentication "
                             "at all", ev, fix=fix, detail=why)
        if kind.auth == UNSEEN:
            where_key = ("its API keys live in its config file, which tunehost does not read"
                         if server.server == "llama-swap" else "its key is set inside the app")
            return self.warn(f"{label} listens on {where}, beyond loopback; whether it requires a key cannot be seen "
                             f"({where_key})", ev, fix=fix, detail=WHY)
        key = server.has_api_key
        if key is True:
            return self.info(f"{label} listens on {where}, beyond loopback, with an API key", ev,
                             fix=Fix("The key travels in clear over plain HTTP: put a TLS reverse proxy in front, "
                                     "or bind to loopback if only this machine uses it.", ()))
        if key is None:
            return self.warn(f"{label} listens on {where} with no key option; its environment ({kind.key_env}) "
                             "could not be read (run as root to see it)", ev, fix=fix, detail=WHY)
        return self.fail(f"{label} listens on {where} without an API key: anyone on the network can use it",
                         ev, fix=fix, detail=WHY)


def _evidence(procs: ProcessFacts, server: ProcessInfo) -> dict[str, object]:
    """What the judgement rests on: the process's names, the options and variables read, its parent proxy."""
    kind = SERVER_KINDS[server.server or ""]
    pid = server.pid
    ev: dict[str, object] = {f"processes sample: pid {pid}": f"{server.name} ({server.server})"}
    if server.exe:
        ev[f"pid {pid} executable"] = server.exe + (" (deleted since it started)" if server.exe_deleted else "")
    if server.argv0 is not None:
        words = [x for x in (server.script, server.command) if x]
        ev[f"pid {pid} started as"] = " ".join([server.argv0, *words])
    read = [*kind.listen_options, *kind.host_options, *kind.port_options, *kind.key_options]
    shown = [f"{name} (set; the value is never recorded)" if server.options[name] == REDACTED
             else f"{name} {server.options[name]}" for name in dict.fromkeys(read) if name in server.options]
    ev[f"pid {pid} options"] = ", ".join(shown) or "none of " + ", ".join(dict.fromkeys(read)) if read else "none read"
    variables = [n for n in (kind.listen_env, kind.host_env, kind.port_env, kind.key_env) if n]
    if variables:
        if server.env is None:
            ev[f"pid {pid} environment"] = "not readable (another user's process: run as root to see " + \
                                           ", ".join(variables) + ")"
        else:
            ev[f"pid {pid} environment"] = ", ".join(
                f"{n}={'set' if n == kind.key_env else server.env[n]}" if n in server.env else f"{n} not set"
                for n in variables)
    rpc = server.options.get("--rpc")
    if rpc:
        ev[f"pid {pid} --rpc"] = f"{rpc} (rpc-servers have no authentication: keep them on a trusted network)"
    parent = procs.process(server.ppid)
    if parent is not None and parent.kind is not None and parent.kind.proxy:
        ev[f"pid {pid} parent"] = f"{parent.server} (pid {parent.pid}): clients reach this server through it"
    return ev


def _sockets(procs: ProcessFacts, server: ProcessInfo, port: int | None) -> tuple[list[Listener], str]:
    if server.sockets:
        return list(server.sockets), "its own sockets (processes sample)"
    if server.sockets == ():
        return [], "the process has no listening TCP socket (processes sample): judged from its settings"
    if server.other_netns:
        return [], ("its sockets are in another network namespace (a container): judged from its settings; a port "
                    "the container publishes (docker -p) is reachable wherever that binds")
    if procs.listeners is None:
        return [], f"no listeners sample ({procs.listeners_reason}): judged from its settings"
    own = [s for s in procs.listeners if s.pid == server.pid]
    if own:
        return own, "joined with the process by pid"
    anonymous = [s for s in procs.listeners if s.pid is None and port is not None and s.port == port]
    if anonymous:
        why = "not root" if procs.uid not in (0, None) else "another namespace or user"
        return anonymous, f"matched by port {port}: the socket's pid is not visible ({why}; run as root to join by pid)"
    return [], "no listening socket of this process seen: judged from its settings"


def _fmt(address: str, port: int | None) -> str:
    shown = f"[{address}]" if ":" in address else address
    return f"{shown}:{port}" if port is not None else f"{shown} (port unknown)"


def _fix(server: ProcessInfo, port: int | None) -> Fix:
    port_text = str(port) if port is not None else "8080"
    if server.server == "ollama":
        return Fix("Make ollama listen on loopback only (ollama has no API key; if other machines need it, put an "
                   "authenticating reverse proxy in front).", OLLAMA_LOOPBACK)
    if server.server == "vllm":
        return Fix("Restart vLLM bound to loopback, or with an API key.",
                   (f"vllm serve MODEL --host 127.0.0.1 --port {port_text}",
                    f"vllm serve MODEL --host 0.0.0.0 --port {port_text} --api-key \"$(openssl rand -hex 32)\""))
    if server.server in ("llama-server", "llamafile"):
        return Fix("Restart llama-server bound to loopback; if other machines need it, require a key (from a file, "
                   "so it does not show in `ps`) and put TLS in front.",
                   (f"kill {server.pid}",
                    f"llama-server --host 127.0.0.1 --port {port_text} -m MODEL.gguf",
                    "openssl rand -hex 32 | sudo tee /etc/llama-server.key >/dev/null && sudo chmod 600 /etc/llama-server.key",
                    f"llama-server --host 0.0.0.0 --port {port_text} --api-key-file /etc/llama-server.key -m MODEL.gguf"))
    if server.server == "rpc-server":
        port_text = str(port) if port is not None else "50052"
        return Fix("Restart rpc-server bound to loopback; if another machine's llama-server must use it, bind it to "
                   "a private interface and let only that machine reach the port (rpc-server has no authentication).",
                   (f"kill {server.pid}", f"rpc-server -H 127.0.0.1 -p {port_text}",
                    f"sudo ufw allow from LLAMA_SERVER_IP to any port {port_text} proto tcp",
                    f"sudo ufw deny {port_text}/tcp"))
    if server.server == "llama-swap":
        return Fix("Restart llama-swap listening on loopback only, or require a key in its config and put TLS in "
                   "front if other machines use it; the llama-servers it starts should stay on 127.0.0.1.",
                   (f"kill {server.pid}", f"llama-swap --config CONFIG.yaml --listen 127.0.0.1:{port_text}"))
    if server.server == "koboldcpp":
        return Fix("Restart koboldcpp bound to loopback, or with a password if other machines use it.",
                   (f"kill {server.pid}", f"koboldcpp --host 127.0.0.1 --port {port_text} --model MODEL.gguf"))
    return Fix(f"Bind {server.server} to 127.0.0.1 in its settings, or block the port with a firewall.",
               (f"sudo ufw deny {port_text}/tcp",))
