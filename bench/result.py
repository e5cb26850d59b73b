#!/usr/bin/env python3
"""One way every shell and Python benchmark prints a result (bench/README.md).

A result is a name and ordered key=value fields. It is printed for a person
(the name, then one field a line, aligned), and, when $BENCH_OUT names a
directory, appended to $BENCH_OUT/NAME.csv (a header line first) and
$BENCH_OUT/NAME.jsonl (one JSON object a line, numbers as numbers) for plots.
The C++ benchmarks print the same way through bench/result.h.

    from result import emit            # bench/ on sys.path
    emit("overhead", {"direct_s": 12.1, "allot_s": 12.3})

    bench/result.py NAME KEY=VALUE...  # from shell: lib.sh's `result`
"""

from __future__ import annotations

import csv
import json
import os
import sys
from typing import Mapping, Union

Value = Union[str, int, float]


def _number(text: str) -> Value:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _text(value: Value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def summary(name: str, fields: Mapping[str, Value]) -> str:
    """The person's view: the name, then `key  value` lines."""
    width = max((len(k) for k in fields), default=0)
    lines = [f"== {name}"] + [f"  {k:<{width}}  {_text(v)}" for k, v in fields.items()]
    return "\n".join(lines)


def _append(out_dir: str, name: str, fields: Mapping[str, Value]) -> None:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.csv")
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(fields.keys())
        writer.writerow(_text(v) for v in fields.values())
    with open(os.path.join(out_dir, f"{name}.jsonl"), "a") as f:
        f.write(json.dumps({k: (_number(v) if isinstance(v, str) else v)
                            for k, v in fields.items()}) + "\n")


def emit(name: str, fields: Mapping[str, Value], out_dir: str | None = None) -> None:
    """Prints the result; appends it to OUT_DIR (default $BENCH_OUT) when set."""
    print(summary(name, fields), flush=True)
    out_dir = out_dir or os.environ.get("BENCH_OUT")
    if out_dir:
        _append(out_dir, name, fields)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or any("=" not in a for a in argv[2:]):
        print("usage: result.py NAME KEY=VALUE...", file=sys.stderr)
        return 2
    fields = dict(a.split("=", 1) for a in argv[2:])
    emit(argv[1], fields)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
