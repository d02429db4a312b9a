#!/usr/bin/python3
# -*- coding: utf-8 -*-
# Ansible module of the gpuprov role: runs gpuprov (plan, install, verify)
# on the host and turns its JSON and exit status into Ansible's changed,
# failed and diff. The exit codes are gpuprov's (include/gpuprov/exitcodes.h,
# docs/gpuprov.8); the JSON shapes are docs/architecture.md's "JSON output".
# gpuprov runs from an argv list, never through a shell.
# SPDX-License-Identifier: MIT

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpuprov
short_description: Provision a GPU server with gpuprov, or verify it
description:
  - Runs C(gpuprov install --json --profile PROFILE) and reports C(changed)
    when it made a change (an C(effect) event on its standard error, or a
    stage the result marks C(changed)).
  - In check mode runs C(gpuprov plan --json) instead, which changes
    nothing; C(changed) is true when the plan has an effect, and the plan is
    the diff (C(--diff)).
  - Exit 5 (reboot required) is not a failure: the result has
    C(reboot_required=true) and the caller decides whether to reboot.
    Any other non-zero exit fails with gpuprov's own message.
  - With I(command=verify), runs C(gpuprov verify --json) and returns its
    report, also as the fact C(gpuprov_report); verify failures (exit 3)
    fail the task unless I(fail_on_findings=false).
options:
  command:
    description: What to run.
    type: str
    choices: [install, verify]
    default: install
  profile:
    description:
      - Profile name (searched in /etc/gpuprov/profiles, then the
        catalogue) or path on the host. Required for I(command=install).
    type: str
  root:
    description:
      - The system gpuprov works on, C(--root); C(/) is the host itself.
        Another directory is a mounted image or a chroot, provisioned from
        the host.
    type: path
    default: /
  only:
    description: Stages to run (C(--only)); empty runs all of the profile's.
    type: list
    elements: str
    default: []
  skip:
    description: Stages to leave out (C(--skip)).
    type: list
    elements: str
    default: []
  force:
    description: Go ahead on a host the profile's C(match) does not fit (C(--force)).
    type: bool
    default: false
  offline:
    description: Use the download cache only (C(--offline)).
    type: bool
    default: false
  mirrors:
    description: C(FROM=TO) URL rewrites (C(--mirror), repeated).
    type: list
    elements: str
    default: []
  ca_file:
    description: Extra CA certificates (PEM) for HTTPS downloads (C(--ca-file)).
    type: path
  fail_on_findings:
    description: With I(command=verify), fail when verify finds a failure (exit 3).
    type: bool
    default: true
  binary:
    description: The gpuprov program; by default C(gpuprov) on the PATH.
    type: path
author:
  - gpuprov contributors
"""

EXAMPLES = r"""
- name: Provision the host
  gpuprov:
    profile: a100-site
  register: gpuprov_install

- name: Verify the host
  gpuprov:
    command: verify
    profile: a100-site
"""

RETURN = r"""
exit_status:
  description: >-
    gpuprov's exit status (not C(rc), which Ansible reads as failed when it
    is not 0, and exit 5 is no failure here); a failed result also has C(rc).
  returned: always
  type: int
reboot_required:
  description: gpuprov exited 5, or its plan says a reboot is required.
  returned: command is install
  type: bool
applied:
  description: The effects the install made, in order (each as the plan lists it, with its stage).
  returned: command is install and not check mode
  type: list
plan:
  description: gpuprov's plan (check mode) or install result, as JSON.
  returned: command is install, when gpuprov printed it
  type: dict
stages:
  description: Each stage's state, by name.
  returned: command is install, when gpuprov printed a plan
  type: dict
messages:
  description: gpuprov's messages (the standard error lines that are not JSON).
  returned: always
  type: list
report:
  description: The verify report.
  returned: command is verify
  type: dict
failures:
  description: With I(command=verify), each failed finding of the report as
    "ID: EVIDENCE (HINT)", when verify found failures (exit 3).
  returned: command is verify and verify found failures
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

EXIT_OK = 0
EXIT_VERIFY_FAILED = 3
EXIT_REBOOT = 5


def gpuprov_argv(module, binary):
    """The command line shared by every command: global options first."""
    p = module.params
    argv = [binary, "--json"]
    if p["root"] and p["root"] != "/":
        argv += ["--root", p["root"]]
    return argv


def stage_options(p):
    argv = []
    if p["only"]:
        argv.append("--only=" + ",".join(p["only"]))
    if p["skip"]:
        argv.append("--skip=" + ",".join(p["skip"]))
    return argv


def download_options(p):
    argv = []
    if p["force"]:
        argv.append("--force")
    if p["offline"]:
        argv.append("--offline")
    for m in p["mirrors"]:
        argv += ["--mirror", m]
    if p["ca_file"]:
        argv += ["--ca-file", p["ca_file"]]
    return argv


def split_stderr(stderr):
    """gpuprov's standard error under --json: one JSON event a line, and
    its messages (lines that do not start with '{')."""
    events, messages = [], []
    for line in stderr.splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
                continue
            except ValueError:
                pass
        if line.strip():
            messages.append(line)
    return events, messages


def pass_on_warnings(module, messages):
    for m in messages:
        if m.startswith("gpuprov: warning: "):
            module.warn(m)


def parse_json(text):
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def effect_text(effect):
    """One effect of a plan as a line (and a write's diff) for --diff."""
    kind = effect.get("type")
    if kind in ("write", "remove") and effect.get("diff"):
        return effect["diff"].rstrip("\n")
    if kind == "run":
        return "run: " + " ".join(effect.get("argv") or [])
    if kind == "reboot":
        return "reboot: " + str(effect.get("reason"))
    if kind == "download":
        return "download: " + str(effect.get("url"))
    target = effect.get("path") or effect.get("url") or ""
    return "%s: %s" % (kind, target)


def plan_diff(plan):
    """The plan as Ansible's prepared diff: each stage with effects, its
    reason, then its effects."""
    out = []
    for stage in plan.get("stages") or []:
        effects = stage.get("effects") or []
        if not effects:
            continue
        out.append("# %s: %s" % (stage.get("name"), stage.get("reason")))
        out.extend(effect_text(e) for e in effects)
    return "\n".join(out) + "\n" if out else ""


def stage_states(plan):
    return dict((s.get("name"), s.get("state")) for s in plan.get("stages") or [])


def fail(module, result, msg):
    result["msg"] = msg
    result["rc"] = result.get("exit_status")
    module.fail_json(**result)


def fail_message(what, rc, messages):
    text = "; ".join(m[len("gpuprov: "):] if m.startswith("gpuprov: ") else m for m in messages)
    return "gpuprov %s exited %d: %s" % (what, rc, text or "(no message)")


def run_install(module, binary):
    p = module.params
    if not p["profile"]:
        module.fail_json(msg="command=install needs a profile")
    what = "plan" if module.check_mode else "install"
    argv = gpuprov_argv(module, binary) + [what, "--profile", p["profile"]]
    argv += stage_options(p) + download_options(p)
    rc, stdout, stderr = module.run_command(argv, expand_user_and_vars=False)
    events, messages = split_stderr(stderr)
    pass_on_warnings(module, messages)
    plan = parse_json(stdout)
    result = dict(exit_status=rc, cmd=argv, messages=messages, changed=False,
                  reboot_required=rc == EXIT_REBOOT)
    if plan is not None:
        result["plan"] = plan
        result["stages"] = stage_states(plan)
        result["reboot_required"] = result["reboot_required"] or bool(plan.get("reboot_required"))
    if rc not in (EXIT_OK, EXIT_REBOOT):
        fail(module, result, fail_message(what, rc, messages))
    if plan is None:
        fail(module, result, "gpuprov %s exited %d without its JSON result on stdout" % (what, rc))
    if module.check_mode:
        text = plan_diff(plan)
        result["changed"] = bool(text)
        if module._diff and text:
            result["diff"] = dict(prepared=text)
    else:
        applied = [dict(e["effect"], stage=e.get("stage")) for e in events
                   if e.get("event") == "effect" and e.get("outcome") == "done"
                   and isinstance(e.get("effect"), dict)]
        result["applied"] = applied
        result["changed"] = bool(applied) or any(
            s.get("changed") for s in plan.get("stages") or [])
    if result["reboot_required"]:
        result["msg"] = "; ".join(messages) or "gpuprov: reboot required"
    module.exit_json(**result)


def run_verify(module, binary):
    p = module.params
    argv = gpuprov_argv(module, binary) + ["verify"]
    if p["profile"]:
        argv += ["--profile", p["profile"]]
    argv += stage_options(p)
    rc, stdout, stderr = module.run_command(argv, expand_user_and_vars=False)
    _, messages = split_stderr(stderr)
    pass_on_warnings(module, messages)
    report = parse_json(stdout)
    result = dict(exit_status=rc, cmd=argv, messages=messages, changed=False)
    if report is not None:
        result["report"] = report
        result["ansible_facts"] = dict(gpuprov_report=report)
    if rc == EXIT_VERIFY_FAILED and report is not None:
        failures = ["%s: %s (%s)" % (f.get("id"), f.get("evidence"), f.get("hint"))
                    for f in report.get("findings") or [] if f.get("level") == "fail"]
        result["failures"] = failures
        if p["fail_on_findings"]:
            fail(module, result, "gpuprov verify failed: " + "; ".join(failures))
        module.exit_json(**result)
    if rc != EXIT_OK or report is None:
        fail(module, result, fail_message("verify", rc, messages))
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            command=dict(type="str", default="install", choices=["install", "verify"]),
            profile=dict(type="str"),
            root=dict(type="path", default="/"),
            only=dict(type="list", elements="str", default=[]),
            skip=dict(type="list", elements="str", default=[]),
            force=dict(type="bool", default=False),
            offline=dict(type="bool", default=False),
            mirrors=dict(type="list", elements="str", default=[]),
            ca_file=dict(type="path"),
            fail_on_findings=dict(type="bool", default=True),
            binary=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    binary = module.params["binary"] or module.get_bin_path("gpuprov")
    if not binary or not os.access(binary, os.X_OK):
        if module.check_mode and module.params["command"] == "install":
            # The package task before this one only pretended to install it.
            module.exit_json(changed=True, exit_status=None, reboot_required=False, messages=[],
                             msg="gpuprov is not installed yet; a real run installs it, then runs gpuprov install")
        module.fail_json(msg="gpuprov is not installed (no %s); install the package first"
                         % (binary or "gpuprov on the PATH"))
    if module.params["command"] == "verify":
        run_verify(module, binary)
    run_install(module, binary)


if __name__ == "__main__":
    main()
