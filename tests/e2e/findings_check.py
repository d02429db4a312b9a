#!/usr/bin/env python3
"""Verify finding ids against their list in docs/findings.md (findings.bats).

  findings_check.py source DOC SRC...
      Every id the list names is given in the source files SRC (the stage
      files and the engine): a listed `a.b` or `a.b.c` as the literal "a.b"
      or "a.b.c", a listed `a.b.<subject>` as its base "a.b" (handed to
      gp_report_add_subject), a listed `<stage>.b` as "%s.b" (and
      `<stage>.b.<subject>` as the base "%s.b"); and every
      literal in SRC shaped like an id of a stage (or gpuprov) is listed.
  findings_check.py reports DOC REPORT...
      In the verify --json documents REPORT: every finding has an id of the
      form <stage>.<check>[.<subject>] whose first part is its stage; no id
      appears twice in one report; every id is listed in DOC; and, over all
      the reports, one id is one check: an id never comes with two check
      texts unless it has a subject, and one check text of a stage never
      comes with two ids.

Exit status 0 when all is well, 1 otherwise, with one line per problem.
"""
import json
import re
import sys

ID_FORM = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+){1,2}$")
STAGES = ("nouveau", "driver", "cuda", "cudnn", "pytorch", "env", "gpuprov", "deep")
SUBJECT = re.compile(r"<[^>]+>")


def listed_ids(doc):
    """The Id column of DOC's tables, as written (with <...> parts)."""
    ids = []
    with open(doc) as f:
        for line in f:
            m = re.match(r"^\| `([^`]+)` \|", line)
            if m:
                ids.append(m.group(1))
    return ids


def listed_regex(listed):
    """A regex matching every id the list allows."""
    alts = []
    for pattern in listed:
        parts = [re.escape(p) for p in SUBJECT.split(pattern)]
        alts.append("[a-z0-9_]+".join(parts))
    return re.compile("^(" + "|".join(alts) + ")$")


def check_source(doc, srcs):
    problems = []
    listed = listed_ids(doc)
    if not listed:
        return ["%s lists no ids" % doc]
    text = ""
    for path in srcs:
        with open(path) as f:
            # A quoted #include ("cudnn.h") names a file, not a finding.
            text += "".join(line for line in f
                            if not re.match(r"\s*#\s*include\b", line))
    literals = set(re.findall(r'"([^"\\\n]*)"', text))
    for pattern in listed:
        if not ID_FORM.match(SUBJECT.sub("x", pattern)):
            problems.append("listed id %s is not <stage>.<check>[.<subject>]" % pattern)
        rest = pattern[len("<stage>"):]
        if pattern.startswith("<stage>.") and SUBJECT.search(rest):
            # A base formatted per stage ("%s.drift_file_edited"), handed
            # to gp_report_add_subject with the subject.
            literal = "%s" + rest[: rest.rindex(".<")]
        elif pattern.startswith("<stage>."):
            literal = "%s" + rest
        elif SUBJECT.search(pattern):
            if not re.search(r"\.<[^>]+>$", pattern):
                problems.append("listed id %s has a subject before its end" % pattern)
                continue
            literal = pattern[: pattern.rindex(".<")]
        else:
            literal = pattern
        if literal not in literals:
            problems.append('listed id %s: no "%s" in the source' % (pattern, literal))
    if len(set(listed)) != len(listed):
        problems.append("an id is listed twice")
    allowed = listed_regex(listed)
    bases = {p[: p.rindex(".<")] for p in listed if re.search(r"\.<[^>]+>$", p)}
    for lit in sorted(literals):
        if not ID_FORM.match(lit) or lit.split(".")[0] not in STAGES:
            continue
        if not allowed.match(lit) and lit not in bases:
            problems.append("id %s is in the source but not listed in %s" % (lit, doc))
    return problems


def check_reports(doc, reports):
    problems = []
    allowed = listed_regex(listed_ids(doc))
    checks_of = {}  # id -> check texts
    ids_of = {}  # (stage, check) -> ids
    has_subject = set()
    n = 0
    for path in reports:
        with open(path) as f:
            rep = json.load(f)
        seen = set()
        for fd in rep["findings"]:
            n += 1
            fid, stage, check = fd.get("id"), fd["stage"], fd["check"]
            where = "%s: %s finding %r" % (path, stage, check)
            if not isinstance(fid, str) or not ID_FORM.match(fid):
                problems.append("%s: id %r is not <stage>.<check>[.<subject>]" % (where, fid))
                continue
            if fid.split(".")[0] != stage:
                problems.append("%s: id %s does not start with its stage" % (where, fid))
            if fid in seen:
                problems.append("%s: id %s twice in one report" % (where, fid))
            seen.add(fid)
            if not allowed.match(fid):
                problems.append("%s: id %s is not listed in %s" % (where, fid, doc))
            checks_of.setdefault(fid, set()).add(check)
            ids_of.setdefault((stage, check), set()).add(fid)
    for pattern in listed_ids(doc):
        if SUBJECT.search(pattern):
            rx = listed_regex([pattern])
            has_subject.update(i for i in checks_of if rx.match(i))
    for fid, checks in sorted(checks_of.items()):
        if len(checks) > 1 and fid not in has_subject:
            problems.append("id %s names several checks: %s" % (fid, sorted(checks)))
    for (stage, check), fids in sorted(ids_of.items()):
        if len(fids) > 1:
            problems.append("%s check %r has several ids: %s" % (stage, check, sorted(fids)))
    if not n:
        problems.append("no findings in %s" % " ".join(reports))
    return problems


def main(argv):
    if len(argv) >= 4 and argv[1] == "source":
        problems = check_source(argv[2], argv[3:])
    elif len(argv) >= 4 and argv[1] == "reports":
        problems = check_reports(argv[2], argv[3:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
