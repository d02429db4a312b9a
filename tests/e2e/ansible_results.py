#!/usr/bin/env python3
"""Flattens the output of ansible-playbook's json callback for the tests
(tests/e2e/ansible.bats): one tab-separated line per host and task,

    HOST<TAB>TASK<TAB>STATUS<TAB>MESSAGE

STATUS being failed, changed, ok or skipped (a failed task that also
changed says failed), MESSAGE the result's msg on one line; then one line
per host of the play recap,

    HOST<TAB>RECAP<TAB>ok=N changed=N failed=N skipped=N unreachable=N

Usage: ansible_results.py FILE
"""

import json
import sys


def status(result):
    if result.get("failed") or result.get("unreachable"):
        return "failed"
    if result.get("skipped"):
        return "skipped"
    return "changed" if result.get("changed") else "ok"


def one_line(text):
    return " ".join(str(text).split())


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    for play in doc.get("plays", []):
        for task in play.get("tasks", []):
            name = task["task"]["name"]
            for host, result in task.get("hosts", {}).items():
                print("%s\t%s\t%s\t%s" % (host, name, status(result), one_line(result.get("msg", ""))))
    for host, s in sorted(doc.get("stats", {}).items()):
        print("%s\tRECAP\tok=%d changed=%d failed=%d skipped=%d unreachable=%d" % (
            host, s.get("ok", 0), s.get("changed", 0), s.get("failures", 0),
            s.get("skipped", 0), s.get("unreachable", 0)))


if __name__ == "__main__":
    main()
