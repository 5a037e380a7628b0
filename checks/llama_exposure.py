"""llama-exposure — inference servers (llama-server, ollama, vLLM, LM Studio, llama-cpp-python, ...) listening beyond
loopback without an API key. Reports addresses and ports, never a key."""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.facts.processes import KEYED_SERVERS, Listener, ProcessFacts, ProcessInfo, is_loopback

OLLAMA_LOOPBACK = (
    "sudo mkdir -p /etc/systemd/system/ollama.service.d",
    "printf '[Service]\\nEnvironment=\"OLLAMA_HOST=127.0.0.1:11434\"\\n' | "
    "sudo tee /etc/systemd/system/ollama.service.d/tunehost-loopback.conf",
    "sudo systemctl daemon-reload && sudo systemctl restart ollama",
)
WHY = ("Anyone who can reach the port can run prompts on this machine (and use its GPU), read what the server "
       "returns, and on llama-server use every endpoint it exposes.")


class LlamaExposureCheck(Check):
    id = "llama-exposure"
    title = "Inference server exposure"
    judges = "llama-server (and ollama, vLLM, LM Studio) listening beyond loopback without an API key"

    def run(self, facts):
        procs = facts.get(ProcessFacts)
        if procs.processes is None:
            yield self.skip(f"cannot see running servers: {procs.processes_reason}")
            return
        servers = procs.servers
        if not servers:
            yield self.ok("no inference server is running",
                          {"processes sample": "no llama-server, ollama, vLLM, LM Studio, llama-cpp-python, koboldcpp"})
            return
        for server in servers:
            yield self._judge(procs, server)

    def _judge(self, procs: ProcessFacts, server: ProcessInfo):
        host, port, source = server.configured_listen()
        sockets, how = _sockets(procs, server, port)
        ev: dict[str, object] = {f"processes sample: pid {server.pid}": f"{server.name} ({server.server})"}
        flags = server.flags
        ev[f"pid {server.pid} flags"] = (f"--host {flags.get('host') or '(not given)'}, --port {flags.get('port') or '(not given)'}, "
                                         f"api key {'given' if flags.get('api_key') else 'not given'}")
        if server.host_env:
            ev[f"pid {server.pid} {'OLLAMA_HOST' if server.server == 'ollama' else 'LLAMA_ARG_HOST'}"] = server.host_env
        if server.api_key_env is not None:
            ev[f"pid {server.pid} LLAMA_API_KEY"] = "set" if server.api_key_env else "not set"
        if sockets:
            addresses = [(s.address, s.port) for s in sockets]
            ev["listeners sample"] = ", ".join(_fmt(a, p) for a, p in addresses) + f" ({how})"
        else:
            addresses = [("0.0.0.0" if host in ("", "*") else host, port)]
            ev["listeners sample"] = how
            ev["judged from"] = f"{source}: {_fmt(*addresses[0])}"
        exposed = [(a, p) for a, p in addresses if not is_loopback(a)]
        label = f"{server.server} (pid {server.pid})"
        if not exposed:
            where = ", ".join(_fmt(a, p) for a, p in addresses)
            return self.ok(f"{label} listens on loopback only ({where})", ev)
        where = ", ".join(_fmt(a, p) for a, p in exposed)
        key = server.has_api_key
        fix = _fix(server, exposed[0][1])
        if server.server == "ollama":
            return self.fail(f"{label} listens on {where}, beyond loopback, and ollama has no authentication", ev,
                             fix=fix, detail=WHY)
        if server.server not in KEYED_SERVERS:
            return self.warn(f"{label} listens on {where}, beyond loopback; whether it requires a key cannot be seen",
                             ev, fix=fix, detail=WHY)
        if key is True:
            return self.info(f"{label} listens on {where}, beyond loopback, with an API key", ev,
                             fix=Fix("The key travels in clear over plain HTTP: put a TLS reverse proxy in front, "
                                     "or bind to loopback if only this machine uses it.", ()))
        if key is None:
            return self.warn(f"{label} listens on {where} with no --api-key flag; its environment (LLAMA_API_KEY) "
                             "could not be read (run as root to see it)", ev, fix=fix, detail=WHY)
        return self.fail(f"{label} listens on {where} without an API key: anyone on the network can use it",
                         ev, fix=fix, detail=WHY)


def _sockets(procs: ProcessFacts, server: ProcessInfo, port: int | None) -> tuple[list[Listener], str]:
    if procs.listeners is None:
        return [], f"no listeners sample ({procs.listeners_reason}): judged from its flags"
    own = [s for s in procs.listeners if s.pid == server.pid]
    if own:
        return own, "joined with the process by pid"
    anonymous = [s for s in procs.listeners if s.pid is None and port is not None and s.port == port]
    if anonymous:
        why = "not root" if procs.uid not in (0, None) else "another namespace or user"
        return anonymous, f"matched by port {port}: the socket's pid is not visible ({why}; run as root to join by pid)"
    return [], "no listening socket of this process seen: judged from its flags"


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
    return Fix(f"Bind {server.server} to 127.0.0.1 in its settings, or block the port with a firewall.",
               (f"sudo ufw deny {port_text}/tcp",))
