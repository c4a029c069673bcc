"""Sphinx configuration of the course site; `build/course_site.py` stages the pages and runs Sphinx on them.

The staged source folder holds this file, the generated pages, the executed notebooks and `course.json` (the
repository, branch and per-page launch links that build/course_site.py computes from pyproject.toml, the same
source as the notebooks' badges). Nothing is executed here and nothing is fetched from the internet.
"""

from __future__ import annotations

import json
from pathlib import Path

COURSE = json.loads((Path(__file__).parent / "course.json").read_text())

project = COURSE["title"]
language = COURSE.get("language", "en")  # zh_CN for the Chinese edition: Sphinx's Chinese search (jieba) indexes it
author = "The course authors"
release = COURSE["version"]
copyright = COURSE["copyright"]

extensions = ["myst_nb"]
exclude_patterns = ["course.json", "**/.ipynb_checkpoints"]

# The notebooks were executed by build/run_course.py; the site shows those outputs and never runs a cell.
nb_execution_mode = "off"
nb_render_markdown_format = "myst"  # results tables are markdown outputs
nb_ipywidgets_js = {}  # widget state would load require.js and the widget manager from a CDN
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_render_error_lexer = "myst-ansi"  # tracebacks carry ANSI colours; the ipythontb lexer warns on some
# A %%writefile cell holds a shell, YAML or JSON file, which the notebook's ipython3 lexer cannot always lex
# (07's train.sbatch): Sphinx then highlights it in relaxed mode. That is cosmetic, not a broken page.
suppress_warnings = ["misc.highlighting_failure"]
myst_enable_extensions = ["colon_fence", "attrs_inline"]
myst_heading_anchors = 3

html_theme = "sphinx_book_theme"
html_title = COURSE["title"]
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_last_updated_fmt = None
html_context = {"default_mode": "auto"}  # light or dark as the reader's system says (empty logs a console error)
html_copy_source = True  # the download button offers the executed .ipynb
html_theme_options = {
    "repository_url": COURSE["repository"],
    "repository_branch": COURSE["branch"],
    "use_repository_button": True,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navigation_with_keys": False,
}


if language.startswith("zh"):
    # Sphinx 9.0.4's Chinese search writes `window.Stemmer = ChineseStemmer;`, a class that does not exist (it
    # uses the English stemmer), so search.html fails with "ChineseStemmer is not defined" (sphinx-doc/sphinx
    # #14229, fixed upstream by #14416: name the class after the stemmer file). The same fix, until a release has it.
    from sphinx.search import languages
    from sphinx.search.zh import SearchChinese

    class SearchChineseEnglishStemmer(SearchChinese):
        language_name = "English"  # only names the JavaScript stemmer class: jieba still cuts the words

    if SearchChinese.js_stemmer_rawcode == "english-stemmer.js":
        languages["zh"] = SearchChineseEnglishStemmer

# The other editions: {"zh": [its page names]} on the English site, {"en": [...]} on the Chinese one (site/zh/).
EDITIONS = COURSE.get("editions", {})
SWITCH_LABELS = {"en": "English", "zh": "中文"}
OPEN_IN = COURSE.get("open_in", "Open in {platform}")


def edition_link(pagename: str, edition: str) -> str:
    """The same page in `edition` (its front page where it has none), relative to this page."""
    up = "../" * pagename.count("/")
    target = pagename if pagename in EDITIONS[edition] else "index"
    here = COURSE.get("edition", "en")
    root = up + ("../" if here != "en" else "") + ("" if edition == "en" else f"{edition}/")
    return f"{root}{target}.html"


def add_language_switch(app, pagename, templatename, context, doctree) -> None:
    """A header link on every page to the same page in the other language."""
    if "header_buttons" not in context:
        return
    for edition in EDITIONS:
        context["header_buttons"].append({
            "type": "link", "text": SWITCH_LABELS.get(edition, edition),
            "tooltip": SWITCH_LABELS.get(edition, edition), "icon": "fas fa-language",
            "label": f"language-{edition}", "url": edition_link(pagename, edition)})


def add_launch_buttons(app, pagename, templatename, context, doctree) -> None:
    """Colab and Kaggle in the header's launch menu, with the URLs the notebooks' own badges use."""
    links = COURSE["launch"].get(pagename)
    if not links or "header_buttons" not in context:
        return
    context["header_buttons"].append({
        "type": "group",
        "tooltip": COURSE.get("run_this", "Run this notebook"),
        "icon": "fas fa-rocket",
        "label": "launch-buttons",
        "buttons": [
            {"type": "link", "text": "Colab", "tooltip": OPEN_IN.format(platform="Colab"),
             "icon": "_static/images/logo_colab.png",
             "url": links["colab"]},
            {"type": "link", "text": "Kaggle", "tooltip": OPEN_IN.format(platform="Kaggle"), "icon": "fab fa-kaggle",
             "url": links["kaggle"]},
        ],
    })


def setup(app):
    app.connect("html-page-context", add_launch_buttons, priority=502)  # after the theme prepares the header
    app.connect("html-page-context", add_language_switch, priority=503)
