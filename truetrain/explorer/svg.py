"""Small line charts as inline SVG, drawn on the server (no script, no CDN).

Every text in the chart is escaped here, so the markup can be placed in a page as it is.
"""

from __future__ import annotations

from html import escape

from markupsafe import Markup

WIDTH, HEIGHT = 560, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 40


def _ticks(lo: float, hi: float, count: int = 4) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / count for i in range(count + 1)]


def _label(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def line_chart(lines: list[tuple[str, list[tuple[float, float]]]], *, x_label: str, y_label: str,
               title: str) -> Markup:
    """One chart of ``lines`` (name, points); a line without points is left out, a chart with
    no points at all says so."""
    drawn = [(name, sorted(points)) for name, points in lines if points]
    parts = [f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']
    if not drawn:
        parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" class="empty">no data yet</text></svg>')
        return Markup("".join(parts))
    xs = [x for _, points in drawn for x, _ in points]
    ys = [y for _, points in drawn for _, y in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(0.0, min(ys)), max(ys)
    if y1 == y0:
        y1 = y0 + 1
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    parts.append(f'<g class="axes"><line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}"/>'
                 f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}"/></g>')
    for y in _ticks(y0, y1):
        parts.append(f'<g class="tick"><line x1="{LEFT}" y1="{py(y):.1f}" x2="{LEFT + plot_w}" y2="{py(y):.1f}"/>'
                     f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{escape(_label(y))}</text></g>')
    x_ticks = sorted(set(xs)) if len(set(xs)) <= 10 else _ticks(x0, x1)
    for x in x_ticks:
        parts.append(f'<text class="tick" x="{px(x):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">'
                     f'{escape(_label(x))}</text>')
    parts.append(f'<text class="axis-label" x="{LEFT + plot_w / 2}" y="{HEIGHT - 4}" text-anchor="middle">'
                 f'{escape(x_label)}</text>')
    parts.append(f'<text class="axis-label" x="12" y="{TOP + plot_h / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 12 {TOP + plot_h / 2})">{escape(y_label)}</text>')
    for number, (name, points) in enumerate(drawn):
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        parts.append(f'<g class="series s{number}"><polyline points="{path}"/>')
        parts += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3"><title>{escape(name)}: {escape(_label(y))}'
                  f'</title></circle>' for x, y in points]
        parts.append(f'<text class="legend" x="{LEFT + 8 + 150 * number}" y="{TOP + 12}">{escape(name)}</text></g>')
    parts.append("</svg>")
    return Markup("".join(parts))
