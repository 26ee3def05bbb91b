"""A small HTML reader for assertions on generated pages (standard library only)."""

from __future__ import annotations

from html.parser import HTMLParser


class Page(HTMLParser):
    """Collects elements (tag, attrs) and the text of the page."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text_parts: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data):
        self.text_parts.append(data)

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def ids(self) -> set[str]:
        return {a["id"] for _, a in self.elements if "id" in a}

    def with_class(self, cls: str, tag: str | None = None) -> list[dict[str, str]]:
        return [a for t, a in self.elements
                if cls in a.get("class", "").split() and (tag is None or t == tag)]

    def tags(self, tag: str) -> list[dict[str, str]]:
        return [a for t, a in self.elements if t == tag]
