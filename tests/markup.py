"""Pages parsed as a browser parses them, into a small tree the tests read.

html5lib implements the WHATWG parsing algorithm, so a test sees the elements a
browser builds from a page (implied ``html``, ``head``, ``body`` and ``tbody``,
attributes of SVG in their SVG spelling, a NUL character dropped), not what a
tokenizer of our own would guess. Both ``site_helpers`` and ``safety_helpers``
read pages through ``parse_html``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from xml.etree.ElementTree import Element

import html5lib

# Namespaced attributes (``xlink:href`` on SVG) come back as ``{namespace}name``.
ATTRIBUTE_PREFIXES = {
    "http://www.w3.org/1999/xlink": "xlink",
    "http://www.w3.org/XML/1998/namespace": "xml",
    "http://www.w3.org/2000/xmlns/": "xmlns",
}


def norm(text: str) -> str:
    """Whitespace as a reader sees it: non-breaking spaces are spaces, runs collapse."""
    return re.sub(r"\s+", " ", text.replace("\xa0", " ").replace("\u202f", " ")).strip()


@dataclass
class Node:
    """An element: its tag (without namespace), its attributes, and its children in order."""

    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    @property
    def classes(self) -> list[str]:
        return self.attrs.get("class", "").split()

    def iter(self) -> Iterator[Node]:
        """This node and every element under it, in document order."""
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list[Node]:
        return [
            node for node in self.iter()
            if (tag is None or node.tag == tag) and (cls is None or cls in node.classes)
        ]

    def find(self, tag: str | None = None, cls: str | None = None) -> Node:
        found = self.find_all(tag, cls)
        assert found, f"no <{tag} class={cls!r}> in <{self.tag}>"
        return found[0]

    def raw_text(self) -> str:
        """Every character of text under this node, exactly as parsed."""
        return "".join(child if isinstance(child, str) else child.raw_text() for child in self.children)

    def text(self) -> str:
        """The text under this node with its whitespace as a reader sees it."""
        return norm(self.raw_text())


def parse_html(text: str) -> Node:
    """The document tree of ``text`` under a ``#document`` node; comments are left out."""
    document = Node("#document", {})
    document.children.append(_node(html5lib.parse(text, treebuilder="etree", namespaceHTMLElements=False)))
    return document


def _node(element: Element) -> Node:
    node = Node(_local(element.tag), {_attribute_name(name): value for name, value in element.attrib.items()})
    if element.text:
        node.children.append(element.text)
    for child in element:
        if isinstance(child.tag, str):  # a comment's tag is a function
            node.children.append(_node(child))
        if child.tail:
            node.children.append(child.tail)
    return node


def _local(tag: str) -> str:
    """``{http://www.w3.org/2000/svg}rect`` -> ``rect``."""
    return tag.rpartition("}")[2]


def _attribute_name(name: str) -> str:
    """``{xlink namespace}href`` -> ``xlink:href``; ``{xmlns namespace}xmlns`` -> ``xmlns``."""
    if not name.startswith("{"):
        return name
    namespace, _, local = name[1:].partition("}")
    prefix = ATTRIBUTE_PREFIXES.get(namespace, namespace)
    return local if local == prefix else f"{prefix}:{local}"
