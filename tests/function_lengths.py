#!/usr/bin/env python3
"""Lists the functions of C++ sources longer than a limit, and fails if any.

    function_lengths.py [--max 60] [--all] FILE_OR_DIR...

A directory counts with every .cpp and .h file under it.

A function is a brace block at namespace level (namespace blocks themselves
do not count) whose opening line is not a class, struct, enum, union or an
initializer; its length runs from the first line of its signature to its
closing brace. Comments, strings and character literals are skipped. Good
enough for allot's style (one definition per top-level block); not a C++
parser.
"""
import argparse
import os
import re
import sys

NOT_FUNCTION = re.compile(r"^\s*(template\s*<.*>\s*)?(class|struct|enum|union)\b|=\s*$|=\s*\{?$")


def strip(text):
    """Blanks out comments and literals, keeping newlines (line numbers)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name line, first line, last line) of each top-level block."""
    lines = strip(open(path, encoding="utf-8").read()).split("\n")
    depth = 0          # braces below namespace level
    namespaces = 0     # open namespace blocks
    stack = []         # what each open brace is: "ns", "block"
    start = None
    signature_start = None
    found = []
    for number, line in enumerate(lines, 1):
        for k, c in enumerate(line):
            if c == "{":
                if depth == 0 and re.search(r"\bnamespace\b[^{;]*$", line[:k] if line[:k].strip() else
                                             (lines[number - 2] if number > 1 else "")):
                    stack.append("ns")
                    namespaces += 1
                    continue
                if depth == 0:
                    start = (signature_start or number, line)
                depth += 1
                stack.append("block")
            elif c == "}":
                if not stack:
                    continue
                kind = stack.pop()
                if kind == "ns":
                    namespaces -= 1
                    continue
                depth -= 1
                if depth == 0 and start:
                    first, text = start
                    header = " ".join(l.strip() for l in lines[first - 1:first + 2])
                    if not NOT_FUNCTION.search(lines[first - 1]) and "(" in header:
                        found.append((header[:100], first, number))
                    start = None
                    signature_start = None
        stripped = line.strip()
        if depth == 0:
            if not stripped or stripped.endswith((";", "}")) or stripped.startswith("#"):
                signature_start = None
            elif signature_start is None and not stripped.startswith(("namespace", "{")):
                signature_start = number
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max", type=int, default=60)
    parser.add_argument("--all", action="store_true", help="print every function, longest first")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    files = []
    for p in args.paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs.sort()
                files += [os.path.join(root, f) for f in sorted(names) if f.endswith((".cpp", ".h"))]
        else:
            files.append(p)
    rows = []
    for f in files:
        for header, first, last in functions(f):
            rows.append((last - first + 1, f, first, header))
    rows.sort(reverse=True)
    over = [r for r in rows if r[0] > args.max]
    for length, f, first, header in rows if args.all else over:
        print(f"{length:4d} {f}:{first}: {header}")
    print(f"{len(rows)} functions in {len(files)} files; longest {rows[0][0] if rows else 0} lines; "
          f"{len(over)} over {args.max}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
