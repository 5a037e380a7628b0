"""How the programs tunehost writes for read what it wrote: a port of the parts of their parsers the bounds tests
need, so that a test asserts what the reader would see (not what tunehost meant to write).

- `ollama_commands`: ollama parser/parser.go ParseFile (state machine, strconv.IsPrint filter, unquote).
- `preset_sections`: llama.cpp common/preset.cpp parse_ini_from_file (the PEG grammar, line by line).
"""

from __future__ import annotations

import re


def _go_is_print(ch: str) -> bool:
    """strconv.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space (as str.isprintable)."""
    return ch.isprintable()


def _unquote(s: str) -> tuple[str, bool]:
    if s[:3] == '"""':
        return (s[3:-3], True) if len(s) >= 6 and s[-3:] == '"""' else ("", False)
    if s[:1] == '"':
        return (s[1:-1], True) if len(s) >= 2 and s[-1] == '"' else ("", False)
    return s, True


def _go_trim_space(s: str) -> str:
    return s.strip(" \t\n\v\f\r\x85\xa0")


def ollama_commands(text: str) -> list[tuple[str, str]]:
    """The (name, args) commands Ollama reads from a Modelfile ("model" for FROM); ValueError where it refuses."""
    NIL, NAME, VALUE, PARAM, COMMENT = range(5)
    commands: list[tuple[str, str]] = []
    state, buf, name = NIL, "", ""
    for r in text:
        nl, sp = r in "\r\n", r in " \t"
        if state == NIL:
            nxt = COMMENT if r == "#" else NIL if (sp or nl) else NAME
            keep = nxt == NAME
        elif state == NAME:
            if r.isascii() and r.isalpha():
                nxt, keep = NAME, True
            elif sp:
                nxt, keep = VALUE, False
            else:
                raise ValueError("invalid command")
        elif state == VALUE:
            nxt, keep = (NIL, True) if (nl or sp) else (VALUE, True)
        elif state == PARAM:
            if (r.isascii() and r.isalnum()) or r == "_":
                nxt, keep = PARAM, True
            elif sp:
                nxt, keep = VALUE, False
            else:
                raise ValueError("unexpected EOF")
        else:
            nxt, keep = (NIL, False) if nl else (COMMENT, False)
        if nxt != state:
            if state == NAME:
                low = buf.lower()
                if low not in ("from", "license", "template", "system", "adapter", "draft", "renderer", "parser",
                               "parameter", "message", "requires"):
                    raise ValueError(f"invalid command {buf!r}")
                name = "model" if low == "from" else low
                if low == "parameter":
                    nxt = PARAM
            elif state == PARAM:
                name = buf
            elif state == VALUE:
                value, ok = _unquote(_go_trim_space(buf))
                if not ok or sp:
                    if _go_is_print(r):
                        buf += r
                    continue
                commands.append((name, value))
            buf, state = "", nxt
        if keep and _go_is_print(r):
            buf += r
    if state == VALUE:
        value, ok = _unquote(_go_trim_space(buf))
        if not ok:
            raise ValueError("unexpected EOF")
        commands.append((name, value))
    elif state not in (NIL, COMMENT):
        raise ValueError("unexpected EOF")
    return commands


_HEADER = re.compile(r"\[[ \t]*([^\]]+)[ \t]*\][ \t]*(?:[;#].*)?")
_KV = re.compile(r"([a-zA-Z_][a-zA-Z0-9_.-]*)[ \t]*=[ \t]*((?:(?![ \t]*(?:[;#]|$)).)*)[ \t]*(?:[;#].*)?")
_BLANK_OR_COMMENT = re.compile(r"[ \t]*(?:[;#].*)?")


def preset_sections(text: str) -> list[tuple[str, dict[str, str]]]:
    """The sections llama-server reads from a preset, in order ("default" before the first header); ValueError
    where its parser fails ("failed to parse server config file")."""
    sections: list[tuple[str, dict[str, str]]] = [("default", {})]
    for line in re.split(r"\r\n|\n|\r", text):
        if (m := _HEADER.fullmatch(line)) is not None:
            sections.append((m.group(1), {}))
        elif (m := _KV.fullmatch(line)) is not None:
            sections[-1][1][m.group(1)] = m.group(2)
        elif not _BLANK_OR_COMMENT.fullmatch(line):
            raise ValueError(f"failed to parse: {line!r}")
    return sections
