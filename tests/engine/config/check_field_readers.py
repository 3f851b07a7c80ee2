#!/usr/bin/env python3
"""No inert config fields: every field of the schema is read somewhere outside its definition.

    python check_field_readers.py LATHE_ENGINE SOURCE_DIR

Walks `lathe-engine schema` and, for every field a.b.c, looks for code that reads it: `.c` or
`->c` in engine/, ui/ or app/ sources other than the config's own definition and reflection
(engine/config/config.h, json_io.cpp, schema.cpp), or a bare `c` in the config's member functions
(engine/config/util.cpp). A name that several sections share (`enabled`, `name` ...) must be read
in a file that also names its section (`.b`), is named after it (profiler.cpp) or lies in its
folder (engine/model/ for model.rope_theta). A field with no
reader fails the test, named with its path: make it do what its description says, or retire it
(engine/config/json_io.cpp, is_retired).

Exits 0 when every field has a reader, 1 listing those that have none.
"""

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

DEFINITIONS = {"engine/config/config.h", "engine/config/json_io.cpp", "engine/config/schema.cpp"}
MEMBER_FUNCTIONS = ["engine/config/util.cpp"]


def leaves(schema, path=()):
    props = schema.get("properties")
    if props is None:
        for alt in schema.get("anyOf", []):  # an optional section
            if "properties" in alt:
                yield from leaves(alt, path)
                return
        items = schema.get("items")
        if isinstance(items, dict) and "properties" in items:  # a list of sections
            yield from leaves(items, path)
            return
        yield path
        return
    for name, sub in props.items():
        yield from leaves(sub, path + (name,))


def main():
    engine, source = sys.argv[1], Path(sys.argv[2])
    schema = json.loads(subprocess.run([engine, "schema"], check=True, stdout=subprocess.PIPE,
                                       text=True).stdout)
    # Duration's value/unit are read through Duration's own methods.
    fields = [p for p in leaves(schema) if p[-1] not in ("value", "unit") or len(p) < 2
              or p[-2] not in ("max_duration", "hard_stop")]
    texts = {}
    for folder in ("engine", "ui", "app"):
        for f in (source / folder).rglob("*"):
            rel = f.relative_to(source).as_posix()
            if f.suffix in (".cpp", ".h") and rel not in DEFINITIONS:
                texts[rel] = f.read_text(errors="replace")
    shared = Counter(p[-1] for p in fields)
    missing = []
    for p in fields:
        name = p[-1]
        read = re.compile(r"(\.|->)" + re.escape(name) + r"\b(?!\s*=[^=])")
        files = [rel for rel, t in texts.items() if read.search(t)]
        # The config's own member functions (engine/config/util.cpp) read their fields bare.
        bare = re.compile(r"\b" + re.escape(name) + r"\b")
        files += [rel for rel in MEMBER_FUNCTIONS if rel in texts and bare.search(texts[rel])]
        if shared[name] > 1 and len(p) > 1:
            # Read where the section is named, or in the section's own file (profiler.cpp).
            section = re.compile(r"(\.|->)" + re.escape(p[-2]) + r"\b")
            stem = p[-2].rstrip("s")
            files = [rel for rel in files
                     if section.search(texts[rel]) or stem in Path(rel).stem
                     or p[-2] in Path(rel).parts[:-1]]
        if not files:
            missing.append(".".join(p))
    if missing:
        print("fields that nothing reads (make them work, or retire them):")
        for m in missing:
            print("  " + m)
        return 1
    print(f"ok: each of the {len(fields)} config fields has a reader")
    return 0


if __name__ == "__main__":
    sys.exit(main())
