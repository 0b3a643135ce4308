#!/usr/bin/env python3
"""Prints the longest C++ functions of the given folders, longest first.

    tools/longest_functions.py [--top N] [--limit L] [DIR_OR_FILE...]   default: golden tools

A function is a brace block opened at namespace or class scope whose header has a parameter list
(member functions, free functions, lambdas assigned at namespace scope); its length runs from the
header's first line to the closing brace. Comments, strings and character literals are skipped,
so braces inside them do not count. With --limit L the exit code is 1 when a function is longer
than L lines (the project keeps golden/, tools/ and optimized/ under 150).
"""
import argparse
import os
import re
import sys

EXTS = (".cpp", ".hpp", ".cc", ".h")


def strip(text):
    """`text` with comments, strings, char literals and preprocessor lines blanked (newlines
    kept)."""
    text = re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c); i += 1; continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(" "); i += 1; continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i)); i = min(j + 1, n)
        else:
            out.append(c); i += 1
    return "".join(out)


HEADER_KIND = re.compile(r"^\s*(template\s*<.*>\s*)?(namespace|class|struct|union|enum|extern)\b", re.S)


def functions(path):
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    stack, found, last = [], [], 0  # stack of (kind, name, start line)
    for i, c in enumerate(text):
        if c in ";}":
            if c == "}" and stack:
                kind, name, start = stack.pop()
                if kind == "func":
                    found.append((text.count("\n", 0, i) + 1 - start + 1, name, start))
            last = i + 1
        elif c == "{":
            header = text[last:i]
            outer = not stack or stack[-1][0] in ("ns", "class")
            m = HEADER_KIND.match(header)
            if m:
                kind = "ns" if m.group(2) == "namespace" else "class"
                stack.append((kind, "", 0))
            elif outer and ("(" in header or re.search(r"\[[^\]]*\]", header)):
                sig = " ".join(header.split())
                before = sig.split("(")[0]
                ids = re.findall(r"[A-Za-z_~][A-Za-z_0-9:~]*|operator\S+", before)
                name = ids[-1] if ids else "?"
                if "=" in before:  # a lambda or object initialised at this scope
                    name = re.findall(r"[A-Za-z_][A-Za-z_0-9]*", before.split("=")[0])[-1]
                lead = len(header) - len(header.lstrip())
                start = text.count("\n", 0, last + lead) + 1
                stack.append(("func", name, start))
            else:
                stack.append(("other" if not outer else "block", "", 0))
            last = i + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", default=["golden", "tools"])
    ap.add_argument("--top", type=int, default=25, help="how many to print (default 25)")
    ap.add_argument("--limit", type=int, default=0, help="exit 1 if a function is longer")
    a = ap.parse_args()
    rows = []
    for p in a.paths:
        files = [p] if os.path.isfile(p) else [os.path.join(d, f) for d, _, fs in os.walk(p)
                                                 for f in fs if f.endswith(EXTS)]
        for f in sorted(files):
            rows += [(n, name, f, line) for n, name, line in functions(f)]
    rows.sort(key=lambda r: (-r[0], r[2], r[3]))
    for n, name, f, line in rows[:a.top]:
        print(f"{n:5d}  {f}:{line}  {name}")
    over = [r for r in rows if a.limit and r[0] > a.limit]
    if a.limit:
        print(f"{len(over)} function(s) over {a.limit} lines", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
