#!/usr/bin/env bats
# IDEMPOTENCE: after a finished install, a second install reports every
# stage satisfied, exits 0, runs no command and changes nothing outside the
# run log and the journal.

load helpers

JOURNAL=var/lib/gpuprov/state.json
RUNLOG=var/log/gpuprov.log

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
}

# second_install ROOT ARGS...: the first install must finish with 0; the
# second one then changes nothing.
second_install() {
	local root=$1
	shift
	gp --root "$root" install "$@"
	assert_status 0
	snapshot "$root" first "$JOURNAL" "$RUNLOG"
	cp "$root/var/log/stub-commands.log" "$BATS_TEST_TMPDIR/stub-log.first"
	local log_lines
	log_lines=$(wc -l < "$root/$RUNLOG")

	gp --root "$root" install "$@"
	assert_status 0
	assert_stderr_empty
	assert_stdout_has "nouveau: satisfied"
	assert_stdout_has "env: satisfied"
	refute_stdout_has ": needed"
	refute_stdout_has "run "
	refute_stdout_has "reboot required"
	# No stub command ran.
	cmp "$BATS_TEST_TMPDIR/stub-log.first" "$root/var/log/stub-commands.log" ||
		fail "the second install ran a command:" "$(stub_log "$root")"
	# The run log's new lines record no write and no command.
	new=$(tail -n +"$((log_lines + 1))" "$root/$RUNLOG")
	! printf '%s\n' "$new" | grep -Eq ': (wrote|run|removed|backed up) ' ||
		fail "the second install changed something:" "$new"
	assert_unchanged "$root" first "$JOURNAL" "$RUNLOG"
	# The journal still parses and still records the files.
	[ "$(json_get "$root/$JOURNAL" 'len(d["files"])')" -ge 3 ]

	# A third run, as JSON: every selected stage satisfied.
	gp --root "$root" --json install "$@"
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/third.json"
	states=$(json_get "$BATS_TEST_TMPDIR/third.json" \
		'sorted(set(s["state"] for s in d["stages"] if s["name"] in ("nouveau", "env")))')
	[ "$states" = '["satisfied"]' ] || fail "third install: states $states"
	[ "$(json_get "$BATS_TEST_TMPDIR/third.json" '[e for s in d["stages"] for e in s["effects"]]')" = "[]" ]
	cmp "$BATS_TEST_TMPDIR/stub-log.first" "$root/var/log/stub-commands.log"
	assert_unchanged "$root" first "$JOURNAL" "$RUNLOG"
}

@test "idempotence: ubuntu, second install satisfied, exit 0, no command, no change" {
	mkroot "$R" --cuda --nouveau unloaded
	second_install "$R" --profile "$PROFILE" --only "$ONLY"
	# The first install did run both commands.
	assert_same_file "$EXPECTED/ubuntu2204/stub-commands.log" "$R/var/log/stub-commands.log"
}

@test "idempotence: rocky9, second install satisfied, exit 0, no command, no change" {
	mkroot "$R" --cuda --nouveau unloaded --distro rocky9
	second_install "$R" --profile-dir "$FIXTURE_PROFILES" --profile a100-rocky9
	assert_same_file "$EXPECTED/rocky9/stub-commands.log" "$R/var/log/stub-commands.log"
}

@test "idempotence: --skip instead of --only gives the same result" {
	mkroot "$R" --cuda --nouveau unloaded
	second_install "$R" --profile "$PROFILE" --skip driver,cuda,cudnn,pytorch
}

@test "idempotence: a root without /proc/modules (an image) also settles" {
	mkroot "$R" --cuda --nouveau unloaded --no-proc-modules
	second_install "$R" --profile "$PROFILE" --only "$ONLY"
	# Whether nouveau is loaded is "unknown" there, never "not loaded".
	gp --root "$R" plan --profile "$PROFILE" --only nouveau
	assert_status 0
	assert_stdout_has "unknown"
	refute_stdout_has "not loaded"
	gp --root "$R" verify --only nouveau
	refute_stdout_has "pass  nouveau not loaded"
	assert_stdout_has "unknown"
}

@test "idempotence: a no-op install leaves the journal byte-identical, mtime too, and status unchanged" {
	mkroot "$R" --cuda --nouveau unloaded
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	j=$R/$JOURNAL
	# An mtime in the past: any rewrite shows, even within the same second.
	touch -d '2001-02-03 04:05:06' "$j"
	sum=$(sha256sum < "$j")
	mtime=$(stat -c %y "$j")
	gp --root "$R" status
	assert_status 0
	status_before=$output

	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	refute_stdout_has ": needed"
	[ "$(sha256sum < "$j")" = "$sum" ] || fail "the no-op install rewrote the journal:" "$(cat "$j")"
	[ "$(stat -c %y "$j")" = "$mtime" ] || fail "the no-op install touched the journal: $(stat -c %y "$j")"
	gp --root "$R" status
	assert_status 0
	[ "$output" = "$status_before" ] ||
		fail "status changed:" "--- before:" "$status_before" "--- after:" "$output"
}

@test "idempotence: a no-op install checks each stage once, taking the preflight plan's findings; after settling a killed run's write it checks again" {
	mkroot "$R" --cuda --nouveau unloaded
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	log_lines=$(wc -l < "$R/$RUNLOG")
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	new=$(tail -n +"$((log_lines + 1))" "$R/$RUNLOG")
	for stage in nouveau env; do
		[ "$(printf '%s\n' "$new" | grep -c "] $stage: check: satisfied (.*), as the preflight plan found it$")" = 1 ] ||
			fail "$stage: not one check line taken from the preflight plan:" "$new"
	done

	# A write a killed run announced and never made: the run settles it (the
	# journal changes) after the preflight plan, so the real pass checks the
	# machine itself again.
	python3 - "$R/$JOURNAL" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["intents"] = {"/etc/gpuprov-never-written.conf": {"sha256": "0" * 64, "stage": "env"}}
json.dump(d, open(p, "w"))
PY
	log_lines=$(wc -l < "$R/$RUNLOG")
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	new=$(tail -n +"$((log_lines + 1))" "$R/$RUNLOG")
	[ "$(printf '%s\n' "$new" | grep -c '] env: check: satisfied')" = 1 ] || fail "env: not checked once:" "$new"
	! printf '%s\n' "$new" | grep -q "as the preflight plan found it" ||
		fail "the real pass took the preflight plan's findings after the journal changed:" "$new"
	[ "$(json_get "$R/$JOURNAL" 'len(d.get("intents", {}))')" = 0 ]
}
