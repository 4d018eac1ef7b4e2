"""Charts as inline SVG: the geometry is computed here and drawn by the `chart` macro, so a
report needs no chart library and no network. Every mark carries a tooltip (`<title>`) with its
figures, and each chart is followed by the same figures as a table."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, Field

WIDTH, HEIGHT = 680, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 14, 44  # margins around the plot
PALETTE = ("#2563eb", "#d97706", "#7c3aed", "#059669", "#db2777", "#0891b2", "#65a30d", "#6b7280")


class Mark(BaseModel):
    """A point, with an optional interval drawn as a vertical bar."""

    x: float = Field(description="Horizontal position in pixels.")
    y: float = Field(description="Vertical position of the value in pixels.")
    low: float | None = Field(default=None, description="Pixel position of the interval's low.")
    high: float | None = Field(default=None, description="Pixel position of the interval's high.")
    css: str = Field(default="", description="CSS class (pass, fail) of the mark.")
    title: str = Field(description="Tooltip: the figures behind the mark.")


class Line(BaseModel):
    """A series: its marks joined by a line."""

    name: str = Field(description="Legend text.")
    color: str = Field(description="Stroke and fill color.")
    marks: list[Mark] = Field(default_factory=list, description="Points in x order.")

    @property
    def points(self) -> str:
        return " ".join(f"{m.x:.1f},{m.y:.1f}" for m in self.marks)


class Tick(BaseModel):
    """An axis label."""

    at: float = Field(description="Pixel position along the axis.")
    label: str = Field(description="Text.")
    note: str = Field(default="", description="A second line under an x label.")


class Chart(BaseModel):
    """An SVG chart over categories (weeks) with a numeric y axis."""

    title: str = Field(description="Caption and accessible name.")
    width: int = WIDTH
    height: int = HEIGHT
    left: float = LEFT
    right: float = WIDTH - RIGHT
    top: float = TOP
    bottom: float = HEIGHT - BOTTOM
    x_ticks: list[Tick] = Field(default_factory=list, description="Category labels.")
    y_ticks: list[Tick] = Field(default_factory=list, description="Value labels.")
    lines: list[Line] = Field(default_factory=list, description="Series drawn as lines.")
    dots: list[Mark] = Field(default_factory=list, description="Marks drawn without a line.")


class Frame:
    """Maps category indexes and values to pixels."""

    def __init__(self, categories: list[str], y_max: float):
        self.categories = categories
        self.y_max = y_max if y_max > 0 else 1.0
        self.step = (WIDTH - RIGHT - LEFT) / max(len(categories), 1)

    def x(self, index: float) -> float:
        return LEFT + self.step * (index + 0.5)

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - (HEIGHT - BOTTOM - TOP) * min(value, self.y_max) / self.y_max

    def chart(self, title: str, y_format: Callable[[float], str], notes: list[str]) -> Chart:
        """An empty chart with its axes' labels; five value labels from 0 to the top."""
        x_ticks = [
            Tick(at=self.x(i), label=label, note=notes[i] if notes else "")
            for i, label in enumerate(self.categories)
        ]
        y_ticks = [
            Tick(at=self.y(self.y_max * i / 4), label=y_format(self.y_max * i / 4))
            for i in range(5)
        ]
        return Chart(title=title, x_ticks=x_ticks, y_ticks=y_ticks)


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]
