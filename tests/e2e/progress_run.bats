#!/usr/bin/env bats
# A real install shows each stage and each command as it starts, before the
# command ends: update-initramfs is a stub that says on a fifo that it runs
# and then waits for the test to release it, so what gpuprov printed by then
# was printed while the command ran. Plain lines when stderr is not a
# terminal, a live line on one (script(1) gives it a pty), JSON event lines
# with --json (each effect as it is made, as the plan lists it), nothing
# with -q.

load helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-60}

setup() {
	setup_ubuntu_root
	mv "$R/usr/sbin/update-initramfs" "$R/usr/sbin/update-initramfs.real"
	mkfifo "$R/gate.started" "$R/gate.release"
	cat > "$R/usr/sbin/update-initramfs" <<'SH'
#!/bin/sh
echo started > /gate.started
read line < /gate.release
exec /usr/sbin/update-initramfs.real "$@"
SH
	chmod 0755 "$R/usr/sbin/update-initramfs"
	ERR=$BATS_TEST_TMPDIR/err
	GP_PID=
}

teardown() {
	[ -n "$GP_PID" ] || return 0
	kill "$GP_PID" 2> /dev/null || true
	release || true
	wait "$GP_PID" 2> /dev/null || true
}

# start_install [OPTION...]: the install in the background, stderr in $ERR.
start_install() {
	"$GPUPROV" --root "$R" "$@" install --profile "$PROFILE" --only "$ONLY" \
		> "$BATS_TEST_TMPDIR/out" 2> "$ERR" &
	GP_PID=$!
}

# Bounded: the stub runs (it has written to the fifo).
wait_started() {
	timeout 20 head -n1 "$R/gate.started" > /dev/null || fail "update-initramfs did not start" "$(cat "$ERR")"
}

release() {
	timeout 20 sh -c 'echo go > "$1"' _ "$R/gate.release"
}

finish() {
	release || fail "the stub was not waiting"
	local rc=0
	wait "$GP_PID" || rc=$?
	GP_PID=
	[ "$rc" -eq "$1" ] || fail "exit $rc, want $1" "$(cat "$ERR")"
}

@test "progress run: not a terminal: the stage and the command are shown while it runs" {
	start_install
	wait_started
	grep -qx "gpuprov: stage nouveau: starting" "$ERR" || fail "no stage line yet:" "$(cat "$ERR")"
	grep -qx "gpuprov: running: /usr/sbin/update-initramfs -u" "$ERR" ||
		fail "no command line yet:" "$(cat "$ERR")"
	grep -q "stage env" "$ERR" && fail "a later stage announced early:" "$(cat "$ERR")"
	finish 5
	grep -qx "gpuprov: stage env: starting" "$ERR" || fail "no env stage line:" "$(cat "$ERR")"
	grep -qx "gpuprov: running: /sbin/ldconfig" "$ERR" || fail "no ldconfig line:" "$(cat "$ERR")"
	! grep -q $'[\r\033]' "$ERR" || fail "terminal control characters on a non-terminal"
}

@test "progress run: --json gives stage, effect and command events as JSON lines on stderr" {
	start_install --json
	wait_started
	"$PYTHON" - "$ERR" <<'PY' || fail "events before the release:" "$(cat "$ERR")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
# The blacklist is written before update-initramfs runs: its effect is out.
want = [{"event": "stage_start", "stage": "nouveau"},
        {"event": "effect", "stage": "nouveau", "outcome": "done",
         "type": "write", "path": "/etc/modprobe.d/blacklist-nouveau.conf"},
        {"event": "command_start", "stage": "nouveau",
         "command": "/usr/sbin/update-initramfs -u"}]
got = [{k: v for k, v in e.items() if k not in ("elapsed_ms", "effect")}
       for e in ev]
for g, e in zip(got, ev):
    if "effect" in e:
        g.update(type=e["effect"]["type"], path=e["effect"]["path"])
assert got == want, got
PY
	finish 5
	"$PYTHON" - "$ERR" "$BATS_TEST_TMPDIR/out" <<'PY' || fail "events:" "$(cat "$ERR")"
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
ev = [json.loads(l) for l in lines]
names = [(e["event"], e["stage"]) + ((e["effect"]["type"],) if "effect" in e else ())
         for e in ev if e["event"] != "command_progress"]
assert names == [("stage_start", "nouveau"), ("effect", "nouveau", "write"),
                 ("command_start", "nouveau"), ("command_done", "nouveau"),
                 ("effect", "nouveau", "run"),
                 # reboot-required and its .pkgs list, then the reboot
                 ("effect", "nouveau", "write"), ("effect", "nouveau", "write"),
                 ("effect", "nouveau", "reboot"),
                 ("stage_done", "nouveau"),
                 ("stage_start", "env"), ("effect", "env", "write"),
                 ("effect", "env", "write"), ("command_start", "env"),
                 ("command_done", "env"), ("effect", "env", "run"),
                 ("stage_done", "env")], names
assert all(e["outcome"] == "done" for e in ev if e["event"] == "effect")
done = [e for e in ev if e["event"] == "command_done"]
assert all(e["status"] == 0 and e["elapsed_ms"] >= 0 for e in done), done
assert [e["state"] for e in ev if e["event"] == "stage_done"] == ["needed", "needed"]
json.load(open(sys.argv[2]))  # stdout is still one document
PY
}

# Every line of stderr is a JSON object, and the effects the events list are
# the plan's, in order (env alone: nouveau's reboot notice is a message).
@test "progress run: --json effect events are the plan's effects" {
	ONLY=env
	gp --root "$R" plan --json --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/plan.json"
	gp --root "$R" install --json --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	printf '%s\n' "$stderr" > "$ERR"
	"$PYTHON" - "$BATS_TEST_TMPDIR/plan.json" "$ERR" <<'PY' || fail "events:" "$stderr"
import json, sys
plan = json.load(open(sys.argv[1]))
want = [(s["name"], e) for s in plan["stages"] for e in s["effects"]]
ev = [json.loads(l) for l in open(sys.argv[2])]
assert all(isinstance(e, dict) and "event" in e for e in ev), ev
got = [(e["stage"], e["effect"]) for e in ev if e["event"] == "effect"]
assert [e["type"] for _, e in want] == ["write", "write", "run"], want
assert got == want, (got, want)
assert all(e["outcome"] == "done" for e in ev if e["event"] == "effect")
PY
}

@test "progress run: -q shows none of it" {
	start_install -q
	wait_started
	[ ! -s "$ERR" ] || fail "stderr with -q:" "$(cat "$ERR")"
	finish 5
	! grep -q "running:\|stage " "$ERR" || fail "progress with -q:" "$(cat "$ERR")"
}

@test "progress run: on a terminal the command is a live line with its time" {
	command -v script > /dev/null || skip "no script(1)"
	local cmd
	printf -v cmd '%q ' "$GPUPROV" --root "$R" install --profile "$PROFILE" --only "$ONLY"
	script -q -e -c "$cmd" /dev/null < /dev/null > "$BATS_TEST_TMPDIR/tty" 2>&1 &
	GP_PID=$!
	wait_started
	finish 5
	grep -q $'\rgpuprov: running: /usr/sbin/update-initramfs -u  0:[0-9][0-9]\033\\[K' "$BATS_TEST_TMPDIR/tty" ||
		fail "no live line:" "$(cat -v "$BATS_TEST_TMPDIR/tty")"
}
