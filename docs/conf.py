"""Sphinx configuration of the documentation site (``tox -e docs``).

The pages are the Markdown files of this folder (MyST), and the README is the landing page.
The build is part of CI with warnings as errors: a link to a page or heading anchor that does
not exist fails it (MyST cross-reference warnings). External links are not fetched: the build
needs no network.
"""

project = "audiorepro"
author = "audiorepro developers"
copyright = "audiorepro developers"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "schemas"]
# Headings down to level 4 get GitHub-style anchors, so that `page.md#a-heading` links work
# both on GitHub and in the site, and a missing anchor is a warning (an error here).
myst_heading_anchors = 4
myst_enable_extensions = ["deflist"]
# Every cross-reference must resolve.
nitpicky = True
html_theme = "alabaster"
html_title = "audiorepro"
html_show_sourcelink = False
# A dump of the build's environment would differ between machines; not needed offline.
html_last_updated_fmt = None
