"""The equal-loss comparison of docs/stop-resume.md: a stopped and restarted run's iteration lines
against an uninterrupted run's, from their train.logs (and TensorBoard's float32 values when the run
wrote them).

    python tools/stop_resume_compare.py REFERENCE_ROOT RESUMED_ROOT [COUNT]

Prints, for the COUNT (default 5) iterations after each load in RESUMED_ROOT/train.log, the
reference's and the resumed run's loss, learning rate and grad norm as Megatron printed them, and
whether they are equal; exit 0 only when every compared value is.

Megatron does not reset its loss accumulator after a start's first iteration (training_log,
megatron/training/training.py:2386-2387 at 571370c8), so with --log-interval 1 the line of a
start's second iteration prints the mean of its first two: the resumed run's K+2 line is compared
with the reference's K+1 and K+2 losses averaged as Megatron averages them (a float32 sum, then
/2), and TensorBoard's per-iteration float32 values are compared bitwise.
"""

from __future__ import annotations

import math
import re
import struct
import sys
from pathlib import Path
from typing import NamedTuple

ITERATION = re.compile(r" iteration +(\d+)/ *\d+ \| consumed samples: +(\d+) .*?\| learning rate: ([^ ]+) \|"
                       r".*?lm loss: ([^ ]+) \|.*?grad norm: ([^ ]+) \|")
LOADED = re.compile(r"successfully loaded checkpoint from .* at iteration +(\d+)")


class Step(NamedTuple):
    iteration: int
    consumed: str
    lr: str
    loss: str
    grad_norm: str


def runs(log: str) -> list[tuple[int, dict[int, Step]]]:
    """Each start in a train.log (appended across restarts): the iteration it loaded (0 for none)
    and its iteration lines."""
    out: list[tuple[int, dict[int, Step]]] = [(0, {})]
    for line in log.splitlines():
        loaded = LOADED.search(line)
        if loaded:
            out.append((int(loaded.group(1)), {}))
            continue
        m = ITERATION.search(line)
        if m:
            step = Step(int(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5))
            out[-1][1][step.iteration] = step
    return [r for r in out if r[1] or r[0]]


def _f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def accumulated(first: str, second: str) -> str:
    """Megatron's line for a start's second iteration: (loss1 + loss2) in float32, / 2, printed %.6E."""
    return f"{_f32(_f32(float(first)) + _f32(float(second))) / 2:.6E}"


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def _fields(data: bytes):
    """(field number, wire type, value) of a protobuf message: ints for varints, bytes otherwise."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        else:
            raise ValueError(f"protobuf wire type {wire}")
        yield number, wire, value


def tensorboard_losses(root: Path) -> dict[int, list[float]] | None:
    """iteration -> the float32 'lm loss' values of the TensorBoard event files (TFRecords of
    tensorboard's Event: step = 2, summary = 5; Summary.value = 1; Value.tag = 1, simple_value = 2),
    read without TensorBoard; None when the run wrote none."""
    paths = sorted((root / "tensorboard").glob("events.*"))
    if not paths:
        return None
    values: dict[int, list[float]] = {}
    for path in paths:
        data, i = path.read_bytes(), 0
        while i + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[i:i + 8])
            record = data[i + 12:i + 12 + length]
            i += 12 + length + 4
            step, summaries = 0, []
            for number, _, value in _fields(record):
                if number == 2:
                    step = value
                elif number == 5:
                    summaries.append(value)
            for summary in summaries:
                for number, _, value in _fields(summary):
                    if number != 1:
                        continue
                    fields = {n: v for n, _, v in _fields(value)}
                    if fields.get(1) == b"lm loss" and 2 in fields:
                        values.setdefault(step, []).append(struct.unpack("<f", fields[2])[0])
    return values


def compare(reference: Path, resumed: Path, count: int = 5) -> tuple[list[str], bool]:
    """The comparison's lines and whether every value is equal."""
    ref_runs = runs((reference / "train.log").read_text(errors="replace"))
    ref = ref_runs[0][1]
    lines, ok = [], True
    got_runs = runs((resumed / "train.log").read_text(errors="replace"))
    ref_tb, got_tb = tensorboard_losses(reference), tensorboard_losses(resumed)
    for loaded, steps in got_runs[1:]:
        lines.append(f"resumed from iteration {loaded}: first logged iteration {min(steps) if steps else 'none'}")
        ok &= bool(steps) and min(steps) == loaded + 1
        for i in range(loaded + 1, loaded + 1 + count):
            a, b = ref.get(i), steps.get(i)
            if a is None or b is None:
                lines.append(f"  iteration {i}: missing ({'reference' if a is None else 'resumed'})")
                ok = False
                continue
            want, note = a.loss, ""
            if i == loaded + 2 and ref.get(i - 1) is not None:
                # the start's second line averages its first two iterations (module docstring)
                want = accumulated(ref[i - 1].loss, a.loss)
                note = f" (the resumed line is the mean of {i - 1} and {i}: {want} from the reference)"
            same = (a.consumed, a.lr, want, a.grad_norm) == (b.consumed, b.lr, b.loss, b.grad_norm)
            if note and not same and (a.consumed, a.lr, a.grad_norm) == (b.consumed, b.lr, b.grad_norm) and \
                    abs(float(want) - float(b.loss)) <= 1.01e-6 * 10 ** math.floor(math.log10(abs(float(want)))):
                # the mean rebuilt from two printed (rounded) losses may differ from Megatron's mean of
                # the unrounded ones by one unit of the last printed digit
                same, note = True, note[:-1] + ", within one unit of the last printed digit)"
            ok &= same
            text = (f"  iteration {i}: consumed {a.consumed}/{b.consumed}, lr {a.lr}/{b.lr}, "
                    f"loss {a.loss}/{b.loss}{note}, grad norm {a.grad_norm}/{b.grad_norm}: "
                    + ("equal as printed" if same else "DIFFERENT"))
            if ref_tb is not None and got_tb is not None and ref_tb.get(i) and got_tb.get(i):
                bits = ref_tb[i][0] == got_tb[i][-1]
                ok &= bits
                text += f"; float32 loss {ref_tb[i][0]!r}/{got_tb[i][-1]!r}: " + ("bitwise equal" if bits else "DIFFERENT")
            lines.append(text)
    if ref_tb is not None and got_tb is not None:
        for loaded, steps in got_runs[1:]:
            after = [i for i in sorted(steps) if i in ref_tb and i in got_tb]
            equal = [i for i in after if ref_tb[i][0] == got_tb[i][-1]]
            ok &= len(equal) == len(after)
            lines.append(f"every iteration after {loaded} ({after[0] if after else '-'}-{after[-1] if after else '-'}): "
                         f"{len(equal)} of {len(after)} float32 losses bitwise equal")
    if len(got_runs) < 2:
        lines.append("no restart found in the resumed run's train.log")
        ok = False
    return lines, ok


if __name__ == "__main__":
    found, equal = compare(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 5)
    print("\n".join(found))
    print("equal" if equal else "NOT equal")
    sys.exit(0 if equal else 1)
