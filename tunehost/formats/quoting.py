"""One escaping or refusal function per output format: every value read from a plan, a models directory, a GGUF, a
snapshot or the store that reaches a shell line, a systemd unit, a router preset INI, an Ollama Modelfile or a
Prometheus textfile passes through here, and what the format cannot carry is refused with one clear error
(tunehost.printable: a control character is never written verbatim anywhere).

| format | function | the format's rules |
|---|---|---|
| shell line, heredoc | shell_word | POSIX quoting (shlex) |
| systemd unit | systemd_quote, unit_text | systemd.syntax(7): C escapes, % specifiers, $ |
| router preset INI | ini_section, ini_value | llama.cpp common/preset.cpp parse_ini_from_file |
| Ollama Modelfile | modelfile_path | ollama parser/parser.go ParseFile |
| Prometheus textfile | prom_label_value, prom_help | the text exposition format 0.0.4 |
"""

from __future__ import annotations

import re
import shlex
import unicodedata

from tunehost.errors import TunehostError
from tunehost.printable import one_line, require_printable


def _refuse_invisible(arg: str, where: str) -> str:
    """`arg` unchanged, or TunehostError when it holds an invisible format character (Unicode Cf: a bidi override
    or isolate such as U+202E, a zero-width space or joiner, a soft hyphen, a tag character): written verbatim,
    the line a person reads before running it would not be the line that runs ("Trojan Source")."""
    for ch in arg:
        if unicodedata.category(ch) == "Cf":
            raise TunehostError(f"a llama-server argument contains U+{ord(ch):04X}, an invisible character that "
                                f"would make {where} read differently from what runs: rename it "
                                f"({one_line(arg, 120)!r})")
    return arg


def shell_word(arg: str) -> str:
    """One shell word, quoted; a control character or an invisible format character is refused."""
    return shlex.quote(_refuse_invisible(require_printable(arg, "a llama-server argument"), "the shell line"))


def systemd_quote(arg: str) -> str:
    """One ExecStart/Environment word: C-style escapes doubled, specifiers (%) and $ escaped, quoted if needed.
    A word with a control character is refused: a newline would end the ExecStart= line (systemd.syntax(7)); so is
    one with an invisible format character (a bidi override)."""
    _refuse_invisible(require_printable(arg, "a llama-server argument"), "the unit")
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    if escaped and not any(c in escaped for c in " \t'\"\\;") and escaped == arg:
        return escaped
    return f'"{escaped}"'


def unit_text(value: str) -> str:
    """Free text (a model's name) for a unit setting such as Description=: one printable line, specifiers (%)
    escaped, no trailing backslash (it would continue the line into the next one)."""
    return one_line(value, 200).replace("%", "%%").rstrip("\\ ")


def commented(text: str, head: str) -> str:
    """`text` as comment lines under a `# ---- head ----` line (a file printed beside a unit)."""
    return "\n".join([f"# ---- {head} ----"] + [f"# {line}" if line else "#" for line in text.splitlines()]) + "\n"


def _refuse_unprintable(value: str, what: str, where: str) -> None:
    """TunehostError when `value` holds a character that is not printable (str.isprintable: controls, format
    characters such as U+200B and U+FEFF, separators other than the ASCII space)."""
    require_printable(value, what)
    for ch in value:
        if not ch.isprintable():
            raise TunehostError(f"{what} contains U+{ord(ch):04X}, which {where} drops or changes: rename it "
                                f"({one_line(value, 120)!r})")


# llama.cpp common/preset.cpp parse_ini_from_file: `"[" ws [^]]+ ws "]"` (a name cannot hold "]", leading blanks are
# dropped), `[;#]` start a comment, `[*]` is the section every model shares, and load_from_ini rewrites the part
# after the last ":" (canonical_tag: upper case, or the last [-.]TAG) so a name with a tag in another spelling
# would silently name a different model
INI_GLOBAL_SECTION = "*"
_INI_TAG = re.compile(r"[-.]([A-Za-z0-9_]+)$")


def _canonical_tag(tag: str) -> str:
    match = _INI_TAG.search(tag)
    return (match.group(1) if match else tag).upper()


def ini_section(name: str) -> str:
    """`[name]`, a router preset section for one model, or TunehostError when llama-server's INI parser would read
    another name (or the shared `[*]` section) from it."""
    what = f"the model name {one_line(name, 80)!r}"
    _refuse_unprintable(name, "a model name (a preset section)", "an INI preset")
    if not name or name == INI_GLOBAL_SECTION or name != name.strip() or re.search(r"[\]\[;#]", name):
        raise TunehostError(f"{what} cannot be an INI section name of a router preset (empty, '*', '[', ']', ';', "
                            "'#' or blanks at either end): rename the file or directory")
    if ":" in name:
        head, _, tag = name.rpartition(":")
        if _canonical_tag(tag) != tag:
            raise TunehostError(f"{what}: llama-server would rename the preset section to "
                                f"{one_line(head + ':' + _canonical_tag(tag), 80)!r} (common/preset.cpp "
                                "canonical_tag): rename the file or directory")
    return f"[{name}]"


def ini_value(option: str, value: str) -> str:
    """A router preset value for `option` as written after `key = `, or TunehostError when INI cannot carry it
    (`;` or `#` start a comment, blanks at either end are dropped, a line break ends the value)."""
    _refuse_unprintable(value, f"the preset value of {option}", "an INI preset")
    if re.search(r"[;#]", value) or value != value.strip():
        raise TunehostError(f"{option} {one_line(value, 120)!r} cannot be written to an INI preset (';' and '#' "
                            "start a comment there): rename the file or pass the option on the command line")
    return value


def modelfile_path(path: str) -> str:
    """A model path for an Ollama Modelfile's FROM line, quoted as ollama's parser/parser.go reads it back, or
    TunehostError. ParseFile keeps only strconv.IsPrint runes (a line break, U+200B or U+00A0 vanish, naming
    another file), trims the value (a trailing blank names another file), ends it at a line break, and strips
    one pair of quotes ("...", or \"\"\"...\"\"\" when the value holds a quote); a relative path is read against
    the Modelfile's directory, so only an absolute one is written."""
    _refuse_unprintable(path, "a model path", "an Ollama Modelfile")
    if not path.startswith("/"):
        raise TunehostError(f"a model path for a Modelfile must be absolute, not {one_line(path, 120)!r}")
    if path != path.strip():
        return f'"""{path}"""' if '"' in path else f'"{path}"'
    return path


PROM_LABEL_MAX = 128  # characters of a label value: model file names and configuration names stay readable


def prom_label_value(value: object) -> str:
    """A label value of the Prometheus text exposition format (0.0.4), inside its double quotes: one printable
    line (a control character becomes "?"), at most PROM_LABEL_MAX characters, then `\\`, `"` and a line
    break escaped as the format requires."""
    text = one_line(value, PROM_LABEL_MAX)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prom_help(text: str) -> str:
    """A `# HELP` docstring: one printable line, `\\` and a line break escaped (the format's rule for HELP)."""
    return one_line(text, 400).replace("\\", "\\\\").replace("\n", "\\n")
