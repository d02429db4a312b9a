#!/usr/bin/env python3
"""docs/profile.schema.json against real profiles (run by schema.bats).

  schema_check.py valid SCHEMA DIR...
      Every *.json under each DIR (recursively) validates against SCHEMA.
  schema_check.py corpus SCHEMA DIR
      Every *.json directly in DIR (the broken-profile corpus) that is JSON
      at all (after blanking comments, without duplicate keys) is rejected
      by SCHEMA, except those whose fault only gpuprov can see (extends
      across files, http:// without allow_insecure_http after the merge, a
      rule overridden twice): those must be accepted, so the list stays true.

Comments are blanked the way src/json.c does it, so positions and strings
are the ones gpuprov sees. Exit status 0 when all is well, 1 otherwise,
with one line per problem.
"""
import json
import os
import sys

import jsonschema

# Broken profiles the schema cannot reject: what is wrong needs other files
# or the resolved profile, or compares items with each other.
SCHEMA_CANNOT_SEE = {
    "cycle-a",  # extends cycle
    "cycle-b",
    "missing-parent",  # extends a profile that does not exist
    "parent-broken",  # the parent is broken, not this file
    "http-url",  # http:// needs allow_insecure_http after extends
    "http-inherited",
    "http-allow-withdrawn",
    "override-duplicate-rule",  # the same rule in two overrides
    # Control characters are refused in the file's text (escapes, C1,
    # comments), before any schema applies to the values.
    "control-c1",
    "control-escape-esc",
    "control-in-comment",
    "control-newline-escape",
    "control-nul-escape",
}


def blank_comments(text):
    """// and /* */ outside strings become spaces (newlines kept); None when
    a block comment is never closed."""
    s = list(text)
    i, n, in_string = 0, len(s), False
    while i < n:
        c = s[i]
        if in_string:
            if c == "\\" and i + 1 < n:
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "/" and i + 1 < n and s[i + 1] == "/":
            while i < n and s[i] != "\n":
                s[i] = " "
                i += 1
            continue
        elif c == "/" and i + 1 < n and s[i + 1] == "*":
            s[i] = s[i + 1] = " "
            i += 2
            while i < n and not (s[i] == "*" and i + 1 < n and s[i + 1] == "/"):
                if s[i] != "\n":
                    s[i] = " "
                i += 1
            if i >= n:
                return None
            s[i] = s[i + 1] = " "
            i += 1
        i += 1
    return "".join(s)


class Duplicate(ValueError):
    pass


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise Duplicate("duplicate key")
    return dict(pairs)


def load(path):
    """The profile as gpuprov reads it, or None when it is not JSON at all."""
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\0" in text:
        return None
    text = blank_comments(text)
    if text is None:
        return None
    try:
        return json.loads(text, object_pairs_hook=no_duplicates)
    except (ValueError, RecursionError):
        return None


def validator(schema_path):
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def where(error):
    return "/" + "/".join(str(p) for p in error.absolute_path)


def check_valid(v, dirs):
    problems, seen = [], 0
    for d in dirs:
        for root, _, files in os.walk(d):
            for name in sorted(files):
                if not name.endswith(".json"):
                    continue
                path = os.path.join(root, name)
                seen += 1
                doc = load(path)
                if doc is None:
                    problems.append(f"{path}: not JSON")
                    continue
                for e in sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path)):
                    problems.append(f"{path}: {where(e)}: {e.message}")
    if seen == 0:
        problems.append(f"no profiles found under {' '.join(dirs)}")
    return problems


def check_corpus(v, d):
    problems = []
    names = sorted(n[:-5] for n in os.listdir(d) if n.endswith(".json"))
    for name in names:
        path = os.path.join(d, name + ".json")
        doc = load(path)
        if doc is None:
            continue  # syntax, encoding, duplicates: gpuprov's parser's job
        errors = list(v.iter_errors(doc))
        if name in SCHEMA_CANNOT_SEE and errors:
            problems.append(f"{path}: listed as schema-valid, but: {errors[0].message}")
        elif name not in SCHEMA_CANNOT_SEE and not errors:
            problems.append(f"{path}: gpuprov refuses it, the schema accepts it")
    for name in sorted(SCHEMA_CANNOT_SEE - set(names)):
        problems.append(f"{d}/{name}.json: listed but missing")
    return problems


def main(argv):
    if len(argv) < 4 or argv[1] not in ("valid", "corpus"):
        print(__doc__, file=sys.stderr)
        return 2
    v = validator(argv[2])
    problems = check_valid(v, argv[3:]) if argv[1] == "valid" else check_corpus(v, argv[3])
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
