"""HTML pages from the same data the JSON endpoints return, through Jinja2 with autoescape on:
every string from the chain or IPFS is escaped wherever it lands (text or attribute)."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.responses import HTMLResponse

from truetrain.cli_options import TOKEN, format_tokens

from . import svg

TEMPLATES = Path(__file__).parent / "templates"
#: Longest on-chain or IPFS string shown whole; the rest is cut with an ellipsis.
MAX_SHOWN = 120


def tokens(value) -> str:
    """Wei (int or decimal string) → ``1,234.50``; ``-`` for None."""
    if value is None:
        return "-"
    return format_tokens(int(value))


def clip(value, limit: int = MAX_SHOWN) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def short(address) -> str:
    text = str(address or "")
    return text[:8] + "…" + text[-4:] if len(text) == 42 else clip(text, 24)


def fmt(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}"


def loss_chart(per_round: list[dict], metric: str) -> Markup:
    loss = [(r["round"], r["mean_train_loss"]) for r in per_round if r["mean_train_loss"] is not None]
    held = [(r["round"], r["heldout"] * (100 if metric == "accuracy" else 1)) for r in per_round
            if r["heldout"] is not None]
    label = "held-out accuracy (%)" if metric == "accuracy" else "held-out bits per byte"
    return Markup(svg.line_chart([("mean training loss", loss)], x_label="round", y_label="loss",
                                 title="mean training loss by round")
                  + svg.line_chart([(label, held)], x_label="round", y_label=label, title=label + " by round"))


def tokens_chart(points: list[dict]) -> Markup:
    def line(key: str) -> list[tuple[float, float]]:
        return [(p["block"], int(p[key]) / TOKEN) for p in points]

    # Minted is left out: it dwarfs the rest (the totals above give it).
    return svg.line_chart([("in the market", line("market")), ("in the stake manager", line("staked")),
                           ("burned", line("burned"))], x_label="block", y_label="TRAIN", title="tokens over time")


ENV = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"], default=True),
                  trim_blocks=True, lstrip_blocks=True)
ENV.filters.update(tokens=tokens, clip=clip, short=short, fmt=fmt)
ENV.globals.update(loss_chart=loss_chart, tokens_chart=tokens_chart)


def render(page: str, data, *, title: str, api: str, block: int, version: str, status: int = 200) -> HTMLResponse:
    html = ENV.get_template(f"{page}.html").render(data=data, title=title, api=api, block=block, version=version,
                                                   page=page)
    return HTMLResponse(html, status_code=status)


def error(status: int, message: str) -> HTMLResponse:
    from .app import HEADERS  # 500s skip the middleware stack: set the headers here too

    html = ENV.get_template("error.html").render(status=status, message=message, title=f"{status}", page="error",
                                                 api=None, block=None, version=None)
    return HTMLResponse(html, status_code=status, headers=HEADERS)
