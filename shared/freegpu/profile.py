"""The `auto` / `smoke` / `full` profile every notebook takes (its parameters are checked by `freegpu.checks`).

Introduced in notebook 00.
"""

from __future__ import annotations

from .checks import check_choice
from .i18n import tr

__all__ = ["PROFILES", "resolve_profile", "hub_ids", "require_hub"]

PROFILES = ("auto", "smoke", "full")


def resolve_profile(profile: str, device_kind: str) -> str:
    """Turn `auto` into `full` (a GPU or TPU is here: real data, real model) or `smoke` (CPU only: tiny offline
    data, seconds per notebook); `smoke` and `full` stay as they are.

    Introduced in notebook 00.
    """
    check_choice("profile", profile, PROFILES)
    if profile != "auto":
        return profile
    return "full" if device_kind in ("cuda", "tpu") else "smoke"


def hub_ids(sources: dict[str, str]) -> dict[str, str]:
    """The `sources` (parameter name -> Hub id or folder) that name a Hub id, not an existing local folder."""
    from pathlib import Path

    return {name: source for name, source in sources.items() if not Path(source).expanduser().is_dir()}


def require_hub(profile: str, internet: bool, sources: dict[str, str] | None = None) -> None:
    """Fail fast when the full profile reads a Hub id and the Hugging Face Hub cannot be reached.

    `sources` maps each parameter that names the data or the model to its value (a Hub id or a folder); only the
    Hub ids need the Hub. Without `sources`, the full profile is taken to need it.
    """
    needed = hub_ids(sources) if sources is not None else {"": tr("its data")}
    if profile != "full" or internet or not needed:
        return
    named = ", ".join(f"{source} ({name})" if name else source for name, source in needed.items())
    folders = tr(" or ").join(name for name in needed if name)
    local = (tr("give {folders} a folder that holds it (a Kaggle input, a Drive folder), ").format(folders=folders)
             if folders else "")
    raise RuntimeError(tr(
        "profile='full' downloads {named} from the Hugging Face Hub, which is not reachable from here. Turn the "
        "internet on (Kaggle: Settings > Internet > On), {local}or run with profile='smoke', which uses small "
        "data shipped with the installed packages."
    ).format(named=named, local=local))
