"""What a GPU-hour costs, per GPU type and engine: the committed table, a repository's own table
(`.megatron-compile/prices.yaml`, which replaces rows of the same GPU and engine), and the cost of a
run's GPU-hours.

Each row carries its currency, the date the price was read and where it was read. The committed rows
are public list prices of one cloud, Amazon EC2 Capacity Blocks for ML (the "effective accelerator
hourly rate" of its pricing page, US East (Ohio), the rates it listed for the period ending
2025-01-01): a reference for comparing jobs, not what AIStudio or a team's own Slurm or Kubernetes
cluster charges; a team puts its own rates in prices.yaml. engine `any` matches every engine.
"""

from __future__ import annotations

from typing import Any

from ..tuples import NamedTuple
from ..diagnostics import Diagnostic, make_error
from ..load.source import SourceDoc
from ..text import printable

ANY_ENGINE = "any"
_AWS = ("Amazon EC2 Capacity Blocks for ML pricing, aws.amazon.com/ec2/capacityblocks/pricing/, "
        "US East (Ohio), effective accelerator hourly rate")


class PriceRow(NamedTuple):
    gpu: str  # the GPU table's key (megatron/gpus.py): h200, h100, a100, ...
    engine: str  # aistudio, slurm, kubernetes, or any
    per_gpu_hour: float
    currency: str  # ISO 4217
    date: str  # when the price was read, YYYY-MM-DD
    source: str  # where it was read
    where: str = "compiler/platform/prices.py"  # the file (and line) the row comes from


PRICES: tuple[PriceRow, ...] = (
    PriceRow("h200", ANY_ENGINE, 5.408, "USD", "2024-12-01", f"{_AWS}: p5e.48xlarge (8 x H200) $43.26/h"),
    PriceRow("h100", ANY_ENGINE, 4.916, "USD", "2024-12-01", f"{_AWS}: p5.48xlarge (8 x H100) $39.33/h"),
    PriceRow("a100", ANY_ENGINE, 1.844, "USD", "2024-12-01", f"{_AWS}: p4d.24xlarge (8 x A100 40GB) $14.75/h"),
)

_FIELDS = ("gpu", "engine", "per_gpu_hour", "currency", "date", "source")
MAX_PER_GPU_HOUR = 1e6  # no GPU rents for more an hour; past it a typo, and float() of a huge int overflows


class Cost(NamedTuple):
    amount: float  # gpu_hours × per_gpu_hour
    currency: str
    per_gpu_hour: float
    gpu: str
    engine: str
    date: str
    source: str
    where: str


def price_table(doc: SourceDoc | None) -> tuple[tuple[PriceRow, ...], list[Diagnostic]]:
    """The committed rows, with a repository's prices.yaml (`prices: [{gpu, engine, per_gpu_hour,
    currency, date, source}]`) put first; each malformed row a located error."""
    if doc is None:
        return PRICES, []
    rows = doc.data.get("prices") if isinstance(doc.data, dict) else None
    if not isinstance(rows, list):
        return PRICES, [_error(doc, ("prices",), "expected `prices:` with a list of rows")]
    own: list[PriceRow] = []
    diags: list[Diagnostic] = []
    for index, row in enumerate(rows):
        problem = _row_problem(row)
        if problem:
            diags.append(_error(doc, ("prices", index), problem))
            continue
        loc = doc.value_location(("prices", index))
        own.append(PriceRow(str(row["gpu"]).lower(), str(row["engine"]).lower(), float(row["per_gpu_hour"]),
                            str(row["currency"]), str(row["date"]), str(row["source"]),
                            f"{doc.file}:{loc.span.line}" if loc else doc.file))
    return tuple(own) + PRICES, diags


def _row_problem(row: Any) -> str | None:
    if not isinstance(row, dict):
        return "a price row is a mapping of " + ", ".join(_FIELDS)
    missing = [f for f in _FIELDS if f not in row]
    if missing:
        return f"the price row lacks {', '.join(missing)}"
    unknown = sorted(set(row) - set(_FIELDS))
    if unknown:
        return f"the price row has unknown keys {', '.join(map(str, unknown))}"
    value = row["per_gpu_hour"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_PER_GPU_HOUR:
        return f"per_gpu_hour must be a number from 0 to {MAX_PER_GPU_HOUR:g}, got {value!r}"
    for field in ("gpu", "engine", "currency", "date", "source"):  # printed into plan.md's one-line cost
        if isinstance(row[field], str) and printable(row[field]) != row[field]:
            return f"{field} holds a control character: {printable(row[field])!r}"
    return None


def _error(doc: SourceDoc, path: tuple[str | int, ...], message: str) -> Diagnostic:
    loc = doc.value_location(path)
    where: dict[str, Any] = {"file": doc.file}
    if loc is not None:
        where.update(line=loc.span.line, column=loc.span.column)
    return make_error("price-table", message, hint="each row: {gpu: h200, engine: any, per_gpu_hour: 5.4, "
                      "currency: USD, date: 2024-12-01, source: where the price was read}", key_path=path, **where)


def price_of(rows: tuple[PriceRow, ...], gpu: str, engine: str) -> PriceRow | None:
    """The first row for the GPU and the engine, else for the GPU and any engine."""
    for wanted in (engine, ANY_ENGINE):
        for row in rows:
            if row.gpu == gpu and row.engine == wanted:
                return row
    return None


def cost_of(gpu_hours: float, rows: tuple[PriceRow, ...], gpu: str, engine: str) -> Cost | None:
    """What the GPU-hours cost at the table's price, or None when it has no price for the GPU."""
    row = price_of(rows, gpu, engine)
    if row is None:
        return None
    return Cost(gpu_hours * row.per_gpu_hour, row.currency, row.per_gpu_hour, gpu, row.engine, row.date, row.source,
                row.where)
