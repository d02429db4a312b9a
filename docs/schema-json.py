#!/usr/bin/env python3
"""docs/profile.schema.json with its "stages" part made from the binary.

usage: schema-json.py GPUPROV SCHEMA   (prints the new file on stdout)

Everything but properties.stages.properties is kept as SCHEMA has it (the
profile-level keys and $defs are written by hand); the stages come from
`GPUPROV --json stages`: one entry per stage, in run order, each key with
the JSON Schema its stage file declares. `make schema-json` writes it back;
tests/e2e/stages.bats checks that the committed file is what this prints.
"""
import json
import subprocess
import sys


def main():
    gpuprov, path = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    listing = json.loads(subprocess.run([gpuprov, "--json", "stages"], check=True,
                                        capture_output=True, text=True).stdout)
    stages = {}
    for s in listing["stages"]:
        stages[s["name"]] = {
            "description": s["doc"] + " false disables the stage.",
            "anyOf": [
                {"const": False},
                {
                    "type": "object",
                    "description": s["doc"],
                    "additionalProperties": False,
                    "properties": {k["name"]: k["schema"] for k in s["keys"]},
                },
            ],
        }
    doc["properties"]["stages"]["properties"] = stages
    sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


main()
