"""The docs site: plain Markdown pages (MyST), built with Sphinx by `make docs` with every warning an error.

A page is ordinary Markdown: relative links to other pages (`../operating/rbac.md#rbac`) are checked, and so
are their anchors (every heading down to level 4 has one, spelled as on GitHub). Nothing is fetched at build
time: the theme is Sphinx's bundled one and no extension reaches the network.
"""

project = "nsscaler"
author = "the nsscaler authors"
copyright = "the nsscaler authors"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# heading anchors as GitHub spells them, so a link works on the site and in a repository browser alike
myst_heading_anchors = 4
# a link to a file that is not a page (a manifest, a source file) fails the build, like a missing page
myst_all_links_external = False

nitpicky = True
html_theme = "alabaster"
html_theme_options = {"description": "Freeze namespace families to zero, restore them exactly",
                      "fixed_sidebar": True, "show_relbars": True}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html", "searchbox.html"]}
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
