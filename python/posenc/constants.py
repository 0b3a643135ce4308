"""Names and numbers shared with the C++ code, read from constants.json.

constants.json is the output of `posenc constants`, committed beside this file; the ctest
`python.constants` fails when it differs from what the binary prints, so the package never
keeps a second copy of a C++ table.

HARD_POSITIONS   the hard positions of golden/cases/hard_positions.cpp, sorted
HARD_POSITION_WHY  {position: why it is hard}
PROFILES         the profile names in manifest order; PROFILE_ALIASES {alias: name}
PIPELINES        the `posenc engine --pipeline` names
SCHEMES          the scheme slugs; MISTAKES {slug: [mistake names of `posenc engine --mistake`]}
"""
import json
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "constants.json")

with open(_PATH, encoding="utf-8") as _f:
    RAW = json.load(_f)

if RAW.get("schema") != "posenc-constants" or RAW.get("version") != 1:
    raise ImportError(f"posenc: {_PATH} is not a posenc-constants version 1 file")

HARD_POSITIONS = tuple(h["position"] for h in RAW["hard_positions"])
HARD_POSITION_WHY = {h["position"]: h["why"] for h in RAW["hard_positions"]}
PROFILES = tuple(p["name"] for p in RAW["profiles"])
PROFILE_ALIASES = {a: p["name"] for p in RAW["profiles"] for a in p["aliases"]}
PIPELINES = tuple(RAW["pipelines"])
SCHEMES = tuple(s["slug"] for s in RAW["schemes"])
MISTAKES = {s["slug"]: tuple(s["mistakes"]) for s in RAW["schemes"]}


def canonical_profile(name):
    """The profile `name` means (aliases resolved), or None when posenc has no such profile."""
    if name in PROFILES:
        return name
    return PROFILE_ALIASES.get(name)
