#!/usr/bin/env python3
"""docs.self_contained: the repository names no file outside itself, and its docs' links hold.

Run by ctest as `python3 tools/docs_check.py <source dir>`. Two checks, each printing every
offending place as `path:line: problem` and exiting 1 if there is any:

1. No text file of the repository (the files git tracks, golden manifests and the fuzz corpus
   included; .safetensors, .npy and any file with a NUL byte skipped) names a file that lives
   outside it: the notes folder next to the checkout, the spec and design notes kept there, the
   conventions file. A user of posenc has only the repository.
2. Every relative link in README.md and docs/**/*.md (outside code blocks and inline code)
   points to a file inside the repository that exists, and a `#fragment` to a heading of that
   Markdown file (GitHub's anchor rule).
3. Every repository path README.md and docs/**/*.md name in their text or inline code (a word
   starting with one of the project's top folders, `golden/cases/registry.cpp`, `optimized/`)
   names a file or folder that exists. A path with a placeholder or a glob (`reference/<slug>.hpp`,
   `optimized/mrope.*`) is a pattern, not a name, and is skipped.

Without git (a source tarball) the tree is walked instead, skipping build folders.
"""
import os
import re
import subprocess
import sys

# Spelled in pieces so that this file does not name them itself.
OUTSIDE = [
    "../" + "shared",
    "spec/" + "verification.md",
    "spec/" + "schemes.md",
    "spec/" + "presets.json",
    "spec/" + "toolchain.md",
    "CONVENTIONS" + ".md",
    "DESIGN" + ".md",
]
SKIP_SUFFIXES = (".safetensors", ".npy", ".png", ".svg", ".gz")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def repository_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout
        files = [f for f in out.decode().split("\0") if f]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git" and not d.startswith("build")]
        for name in filenames:
            files.append(os.path.relpath(os.path.join(dirpath, name), root))
    return files


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data[:65536]:
        return None
    return data.decode("utf-8", errors="replace")


def outside_references(root):
    problems = []
    for rel in repository_files(root):
        if rel.endswith(SKIP_SUFFIXES):
            continue
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            continue
        text = read_text(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for needle in OUTSIDE:
                if needle in line:
                    problems.append(f"{rel}:{number}: names {needle}, a file outside the repository")
    return problems


def anchor(heading):
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def markdown_lines(text):
    """(line number, line) outside fenced code blocks, with inline code removed."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, re.sub(r"`[^`]*`", "", line)


def anchors_of(path, cache):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found, seen = set(), {}
        fenced = False
        for line in text.splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m and not fenced:
                a = anchor(m.group(1))
                n = seen.get(a, 0)
                seen[a] = n + 1
                found.add(a if n == 0 else f"{a}-{n}")
        cache[path] = found
    return cache[path]


def broken_links(root):
    root = os.path.realpath(root)
    pages = [os.path.join(root, "README.md")]
    for dirpath, _, filenames in os.walk(os.path.join(root, "docs")):
        pages += [os.path.join(dirpath, n) for n in filenames if n.endswith(".md")]
    problems, cache = [], {}
    for page in sorted(pages):
        rel_page = os.path.relpath(page, root)
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for number, line in markdown_lines(text):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                    continue
                file_part, _, fragment = target.partition("#")
                dest = page if not file_part else os.path.realpath(
                    os.path.join(os.path.dirname(page), file_part))
                where = f"{rel_page}:{number}: link ({target})"
                if os.path.commonpath([root, dest]) != root:
                    problems.append(f"{where} leaves the repository")
                elif not os.path.exists(dest):
                    problems.append(f"{where}: no such file")
                elif fragment and dest.endswith(".md") and fragment not in anchors_of(dest, cache):
                    problems.append(f"{where}: no heading with anchor #{fragment} there")
    return problems, len(pages)


TOP_FOLDERS = ("reference", "optimized", "properties", "golden", "tools", "docs", "python",
               "check", "fuzz", "examples", "cmake", ".ci")
# A path word: a top folder, then path characters; a placeholder or glob right after it makes it
# a pattern.
PATH_WORD = re.compile(r"(?<![\w./<>-])((?:" + "|".join(re.escape(t) for t in TOP_FOLDERS) +
                       r")/[\w./-]*)([*<{]?)")


def missing_paths(root):
    problems = []
    pages = ["README.md"]
    for dirpath, _, filenames in os.walk(os.path.join(root, "docs")):
        pages += [os.path.relpath(os.path.join(dirpath, n), root) for n in filenames
                  if n.endswith(".md")]
    for rel_page in sorted(pages):
        with open(os.path.join(root, rel_page), encoding="utf-8") as f:
            text = f.read()
        fenced = False
        for number, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            for m in PATH_WORD.finditer(line):
                path, pattern = m.group(1).rstrip(".,:;-"), m.group(2)
                if pattern or path.endswith("/."):
                    continue
                if not os.path.exists(os.path.join(root, path)):
                    problems.append(f"{rel_page}:{number}: names {path}, which does not exist")
    return problems


def main():
    if len(sys.argv) != 2:
        print("usage: docs_check.py <source dir>", file=sys.stderr)
        return 2
    root = sys.argv[1]
    outside = outside_references(root)
    links, n_pages = broken_links(root)
    missing = missing_paths(root)
    for p in outside + links + missing:
        print(p)
    if outside or links or missing:
        print(f"docs_check: {len(outside)} reference(s) outside the repository, "
              f"{len(links)} broken link(s), {len(missing)} named path(s) that do not exist")
        return 1
    print(f"docs_check: no reference outside the repository; the links and named paths of "
          f"{n_pages} pages hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
