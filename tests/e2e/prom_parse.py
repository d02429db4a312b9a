#!/usr/bin/env python3
"""Parse gpuprov's metrics with a real Prometheus text-format parser
(prometheus.bats).

  prom_parse.py [FILE]   (default: stdin)

Parses FILE with prometheus_client.parser.text_string_to_metric_families
(Debian's python3-prometheus-client) and prints, for each family, the line
"# family NAME", then one line per sample: NAME{k="v",...} VALUE, labels in
name order, values escaped as the text format writes them, the value as
Python's repr of the float (1.0). Exits 1, saying why, when the parser
refuses the text, when a family lacks HELP or TYPE gauge, when a name does
not start with gpuprov_, or when a series (name and labels) comes twice.
"""
import sys

from prometheus_client.parser import text_string_to_metric_families


def escape(value):
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    problems, seen, lines = [], set(), []
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser's own error, whatever its type
        print(f"not the Prometheus text format: {e!r}", file=sys.stderr)
        return 1
    for fam in families:
        if not fam.name.startswith("gpuprov_"):
            problems.append(f"{fam.name}: not prefixed gpuprov_")
        if fam.type != "gauge":
            problems.append(f"{fam.name}: TYPE {fam.type}, not gauge (missing TYPE?)")
        if not fam.documentation:
            problems.append(f"{fam.name}: no HELP")
        lines.append(f"# family {fam.name}")
        for s in fam.samples:
            labels = ",".join(f'{k}="{escape(v)}"' for k, v in sorted(s.labels.items()))
            series = f"{s.name}{{{labels}}}" if labels else s.name
            if series in seen:
                problems.append(f"{series}: given twice")
            seen.add(series)
            lines.append(f"{series} {s.value!r}")
    for p in problems:
        print(p, file=sys.stderr)
    print("\n".join(lines))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
