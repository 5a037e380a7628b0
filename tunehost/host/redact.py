"""The one redaction of command lines and environment values before anything of them is kept.

Samplers record a few words of other processes' command lines (argv[0], a subcommand, the flags tunehost reads) and
a few environment values (OLLAMA_HOST, LLAMA_ARG_HOST); every such word goes through `redact` first, so a key, a
token, a password or the credentials of a URL never reach a snapshot, a report or a terminal.

What is replaced by REDACTED:
- the value of any option whose name says it is secret (key, token, secret, password, auth, credential, cookie...):
  `--api-key X`, `--api-key=X`, `--api-key-file F` (the path is not needed: only that it is set), `--hf-token X`,
  `--password X`, `-u user:pass` (curl);
- `user:pass@` / `user@` in a URL or an address (`http://admin:password@0.0.0.0:11434`, `admin:pw@host:port`);
- secret query parameters (`?api_key=X`, `&token=X`);
- header values of secret headers (`-H 'Authorization: Bearer X'`, `X-Api-Key: X`, `Cookie: X`);
- `NAME=value` words whose NAME is secret (`HF_TOKEN=X`, as `env HF_TOKEN=X llama-server` shows them);
- words shaped like well-known tokens (`hf_…`, `sk-…`, `ghp_…`, `github_pat_…`, `glpat-…`, `xox?-…`, `Bearer …`).
"""

from __future__ import annotations

import re
from typing import Iterable

REDACTED = "<redacted>"

# parts of an option or variable name that say its value is a secret ("--api-key" -> api, key)
SECRET_NAME_PARTS = frozenset({
    "key", "apikey", "token", "secret", "password", "passwd", "pwd", "pass", "passphrase", "auth", "authorization",
    "credential", "credentials", "cookie", "bearer", "sig", "signature",
})
# options that are not secret although a part matches (a name part alone is not enough for these)
NOT_SECRET_NAMES = frozenset({"hf-repo", "hf-file", "hfr", "hff", "hf-repo-draft", "hf-file-v", "hf-repo-v",
                              "no-auth", "passthrough"})
# short spellings of secret options whose name says nothing (llama.cpp common/arg.cpp: -hft, --hf-token)
SECRET_SHORT_OPTIONS = frozenset({"-hft"})
# curl-style options whose value is user:password
USER_PASSWORD_OPTIONS = frozenset({"-u", "--user", "--proxy-user"})

_URL_USERINFO = re.compile(r"(://)([^\s/?#]+)@")  # scheme://user:pass@host: everything up to the last @
_BARE_USERINFO = re.compile(r"(^|[=,])([^\s/,]+)@(?=[^\s@/,]+)")  # user:pass@host:port, --x=user@host
_SECRET_QUERY = re.compile(r"([?&;][^=&;\s#]*?(?:key|token|secret|password|passwd|auth|sig|signature)[^=&;\s#]*=)"
                           r"[^&;\s#]*", re.IGNORECASE)
_HEADER = re.compile(r"^(\s*[A-Za-z0-9_-]+\s*:\s*)(.+)$", re.DOTALL)
_TOKEN_SHAPES = re.compile(r"\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{16,}|ghp_[A-Za-z0-9]{20,}|"
                           r"github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,})")
_BEARER = re.compile(r"\b(Bearer|Basic|Token)\s+\S+", re.IGNORECASE)


def _name_parts(name: str) -> list[str]:
    return [p for p in re.split(r"[-_.\s]+", name.lower()) if p]


def is_secret_name(name: str) -> bool:
    """Whether an option (`--api-key`, `-H`... without dashes or with) or variable (`HF_TOKEN`) holds a secret."""
    if name in SECRET_SHORT_OPTIONS:
        return True
    bare = name.lstrip("-").lower()
    if not bare or bare in NOT_SECRET_NAMES:
        return False
    parts = _name_parts(bare)
    return any(p in SECRET_NAME_PARTS for p in parts) or any(
        p.endswith(("key", "token", "password", "secret")) and len(p) > 3 for p in parts)


def _scrub(word: str) -> str:
    """Credentials inside one word, wherever it stands: URL userinfo, secret query values, token shapes."""
    word = _URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", word)
    word = _BARE_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", word)
    word = _SECRET_QUERY.sub(lambda m: m.group(1) + REDACTED, word)
    word = _BEARER.sub(lambda m: m.group(1) + " " + REDACTED, word)
    word = _TOKEN_SHAPES.sub(REDACTED, word)
    header = _HEADER.match(word)
    if header and is_secret_name(header.group(1).strip().rstrip(":").strip()):
        word = header.group(1) + REDACTED
    return word


def redact(words: Iterable[str]) -> list[str]:
    """`words` (an argv, or a single environment value as a one-word list) with every secret replaced by REDACTED.

    The result has as many words as the input, so flags still pair with their (redacted) values.
    """
    out: list[str] = []
    secret_next = user_next = False
    for raw in words:
        word = str(raw)
        if secret_next:
            secret_next = False
            if not word.startswith("--"):  # a value; a following long option means the flag took none
                out.append(REDACTED)
                continue
        if user_next:
            user_next = False
            if ":" in word and not word.startswith("-"):
                out.append(word.split(":", 1)[0] + ":" + REDACTED)
                continue
        if word.startswith("-") and len(word) > 1:
            name, eq, value = word.partition("=")
            if is_secret_name(name):
                if eq:
                    out.append(f"{name}={REDACTED}")
                else:
                    out.append(name)
                    secret_next = True
                continue
            if name in USER_PASSWORD_OPTIONS:
                if eq and ":" in value:
                    out.append(f"{name}={value.split(':', 1)[0]}:{REDACTED}")
                    continue
                user_next = not eq
            out.append(f"{name}={_scrub(value)}" if eq else _scrub(word))
            continue
        assignment = re.match(r"^([A-Za-z_][A-Za-z0-9_.]*)=(.*)$", word, re.DOTALL)
        if assignment and is_secret_name(assignment.group(1)):
            out.append(f"{assignment.group(1)}={REDACTED}")
            continue
        out.append(_scrub(word))
    return out
