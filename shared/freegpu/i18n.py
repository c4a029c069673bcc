"""The language freegpu prints in: English, or Chinese for the zh notebooks (notebooks/zh/).

A zh notebook's check cell calls `check_parameters(NOTEBOOK, globals(), language="zh")`, which calls
`set_language`; FREEGPU_LANGUAGE=zh does the same for an English notebook (set before the kernel starts). What the
package prints or raises for a learner goes through `tr`:

    raise ValueError(tr("{name}={value!r} is not one of {allowed}").format(name=name, value=value, allowed=allowed))

`tr` returns the Chinese of a message from the gettext catalog `freegpu/locale/zh.po` (read with polib) when the
language is "zh" and the catalog has a current translation, else the English. The English message is the msgid,
so a message whose English changes has no translation until the catalog is updated: it prints in English, never
a stale Chinese, and tests/tooling/test_i18n.py fails. `python build/i18n.py update` refreshes the catalog.
Introduced in notebook 00.
"""

from __future__ import annotations

import os
from functools import cache
from importlib import resources

__all__ = ["LANGUAGES", "language", "set_language", "tr"]

LANGUAGES = ("en", "zh")
_state = {"language": os.environ.get("FREEGPU_LANGUAGE", "en")}


def set_language(value: str) -> str:
    """Print in `value` from now on ("en" or "zh"); returns it."""
    if value not in LANGUAGES:
        raise ValueError(f"language={value!r} is not one of {LANGUAGES}")
    _state["language"] = value
    if value == "en":  # processes this kernel starts (launched scripts) print the same
        os.environ.pop("FREEGPU_LANGUAGE", None)
    else:
        os.environ["FREEGPU_LANGUAGE"] = value
    return value


def language() -> str:
    value = _state["language"]
    return value if value in LANGUAGES else "en"


@cache
def catalog(value: str) -> dict[str, str]:
    """msgid -> msgstr of the package's catalog for `value`: translated entries that are not fuzzy."""
    import polib

    text = (resources.files(__package__) / "locale" / f"{value}.po").read_text(encoding="utf-8")
    return {e.msgid: e.msgstr for e in polib.pofile(text) if e.msgstr and "fuzzy" not in e.flags and not e.obsolete}


def tr(message: str) -> str:
    """`message` in the current language (the English itself when there is no current translation)."""
    if language() == "en":
        return message
    return catalog(language()).get(message, message)
