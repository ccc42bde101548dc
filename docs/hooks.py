# SPDX-License-Identifier: Apache-2.0
"""MkDocs hooks: pages that mirror files outside docs/, and their links.

A page whose only content is `<!-- include: PATH -->` (PATH relative to the
repository root) shows that file: README.md is the home page, BENCHMARKS.md,
CONTRIBUTING.md and CHANGELOG.md have pages of their own, so each text lives
in one place and reads the same on GitHub and on the site.

Relative links are rewritten for the site, in every page: a link to a
mirrored file goes to its page; a link (in an included file) into docs/ is
made relative to the page; a link to any other file outside docs/ (which the
site does not have, e.g. LICENSE) keeps its text and loses its target.
Images must lie under docs/.
"""

import os
import re

from mkdocs.exceptions import PluginError

INCLUDE = re.compile(r"^<!--\s*include:\s*(\S+)\s*-->\s*$", re.M)
# [text](target) and ![alt](target); targets without spaces.
LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
EXTERNAL = re.compile(r"^([a-z][a-z0-9+.-]*:|#|/)", re.I)
FENCED = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)  # code is left alone

_mirrors = {}  # repository path -> docs page (both relative, posix)


def _root(config):
    return os.path.dirname(os.path.abspath(config.config_file_path))


def on_files(files, config):
    """Finds the pages that mirror a file, before any page is rendered."""
    _mirrors.clear()
    for file in files.documentation_pages():
        with open(file.abs_src_path, encoding="utf-8") as f:
            found = INCLUDE.search(f.read())
        if found:
            _mirrors[os.path.normpath(found.group(1))] = file.src_uri
    return files


def _rewrite(markdown, source, page_uri, config):
    """Links of `markdown` (a file at repository path `source`) for the page."""
    root, docs = _root(config), os.path.abspath(config.docs_dir)
    page_dir = os.path.dirname(page_uri)

    def fix(match):
        image, text, target = match.groups()
        if EXTERNAL.match(target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        anchor = "#" + anchor if anchor else ""
        if not path:
            return match.group(0)
        resolved = os.path.normpath(os.path.join(os.path.dirname(source), path))
        absolute = os.path.join(root, resolved)
        if resolved in _mirrors:
            new = os.path.relpath(_mirrors[resolved], page_dir or ".") + anchor
        elif absolute == docs or absolute.startswith(docs + os.sep):
            in_docs = os.path.relpath(absolute, docs)
            new = os.path.relpath(in_docs, page_dir or ".") + anchor
        elif image:
            raise PluginError(f"{source}: the image {target} is not under docs/")
        else:
            return text  # the site has no such file
        return f"{image}[{text}]({new.replace(os.sep, '/')})"

    pieces, start = [], 0
    for code in FENCED.finditer(markdown):
        pieces += [LINK.sub(fix, markdown[start : code.start()]), code.group(0)]
        start = code.end()
    return "".join(pieces) + LINK.sub(fix, markdown[start:])


def on_page_markdown(markdown, page, config, files):
    root, docs = _root(config), os.path.abspath(config.docs_dir)
    page_source = os.path.relpath(os.path.join(docs, page.file.src_uri), root)

    def include(match):
        source = os.path.normpath(match.group(1))
        path = os.path.join(root, source)
        if not os.path.isfile(path):
            raise PluginError(f"{page.file.src_uri}: no file {source} to include")
        with open(path, encoding="utf-8") as f:
            return _rewrite(f.read(), source, page.file.src_uri, config)

    if INCLUDE.search(markdown):
        return INCLUDE.sub(include, markdown)
    return _rewrite(markdown, page_source, page.file.src_uri, config)
