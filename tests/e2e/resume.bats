#!/usr/bin/env bats
# REBOOTS THAT RESUME THEMSELVES: install --reboot=auto on the Ubuntu fixture
# root (nouveau loaded) arms gpuprov-resume.service and "reboots" (the root's
# stub, GPUPROV_REBOOT_STUB, records the call); the test then does what a
# boot does (simulate_reboot: nouveau gone, a new boot id, /run emptied) and
# runs the unit's ExecStart as make install-units wrote it, on the root. Also
# the loop cap, a resume killed after it removed the marker, the dry run, a
# root that is not / without a stub, and systemd-analyze verify of the unit.

load helpers

# The units as make install-units writes them, once per file, with BINDIR a
# directory holding a copy of the binary under test: ExecStart names it.
setup_file() {
	local u=$BATS_FILE_TMPDIR/units
	make -s -C "$REPO_ROOT" BUILD="$BATS_FILE_TMPDIR/build" install-units \
		DESTDIR="$u" BINDIR="$BATS_FILE_TMPDIR/bin" UNITDIR=/lib/systemd/system
	mkdir -p "$BATS_FILE_TMPDIR/bin"
	cp "$GPUPROV" "$BATS_FILE_TMPDIR/bin/gpuprov"
}

UNIT_REL=lib/systemd/system/gpuprov-resume.service
WANTS=etc/systemd/system/multi-user.target.wants/gpuprov-resume.service
MARKER=var/lib/gpuprov/resume
TEXTFILE=var/lib/prometheus/node-exporter/gpuprov.prom

setup() {
	setup_ubuntu_root
	mkdir -p "$R/lib/systemd/system" "$R/var/lib/prometheus/node-exporter"
	cp "$BATS_FILE_TMPDIR/units/$UNIT_REL" "$R/$UNIT_REL"
	# The reboot: a stub in the root, logged like the fixture's others.
	printf '#!/bin/sh\necho "$0 $*" >> /var/log/stub-commands.log\n' > "$R/usr/sbin/reboot-stub"
	chmod 0755 "$R/usr/sbin/reboot-stub"
	export GPUPROV_REBOOT_STUB=/usr/sbin/reboot-stub
}

install_auto() {
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY" --reboot=auto "$@"
}

# The reboots the stub recorded.
reboots() {
	grep -c '^/usr/sbin/reboot-stub' "$R/var/log/stub-commands.log" || true
}

# run_exec_start: the unit's ExecStart, split into words as systemd splits
# them (it has no quotes), on the root.
run_exec_start() {
	local exec
	exec=$(sed -n 's/^ExecStart=//p' "$R/$UNIT_REL")
	[ -n "$exec" ] || fail "no ExecStart in $R/$UNIT_REL"
	# shellcheck disable=SC2086 # the unit's words
	run --separate-stderr $exec --root "$R"
}

resume_count() {
	json_get "$R/var/lib/gpuprov/state.json" 'd.get("resume", {}).get("reboots", 0)'
}

@test "resume: install --reboot=auto arms the unit and reboots; the unit's ExecStart resumes, ends 0 and writes the textfile" {
	install_auto
	assert_status 5
	assert_stderr_has "rebooting now (--reboot=auto)"
	assert_stdout_has "[10/10] reboot: changed"
	assert_stdout_has "a reboot will follow (--reboot=auto)"
	[ "$(reboots)" = 1 ] || fail "the stub recorded $(reboots) reboots:" "$(stub_log "$R")"
	# The reboot comes last, after every stage's command.
	[ "$(tail -n 1 "$R/var/log/stub-commands.log")" = "/usr/sbin/reboot-stub " ] ||
		fail "the reboot is not the last command:" "$(stub_log "$R")"
	# The marker holds the command line exactly as typed, as JSON.
	"$PYTHON" - "$R/$MARKER" "$GPUPROV" "$R" "$PROFILE" "$ONLY" <<-'PY' || fail "marker: $(cat "$R/$MARKER")"
	import json, sys
	path, gp, root, profile, only = sys.argv[1:]
	want = [gp, "--root", root, "install", "--profile", profile, "--only", only, "--reboot=auto"]
	got = json.load(open(path))
	sys.exit(0 if got == want else f"{got} != {want}")
	PY
	[ "$(stat -c %a "$R/$MARKER")" = 600 ] || fail "marker mode $(stat -c %a "$R/$MARKER")"
	[ "$(readlink "$R/$WANTS")" = "/$UNIT_REL" ] || fail "the unit is not enabled: $(ls -l "$R/$WANTS" 2>&1)"
	# The boot.
	simulate_reboot "$R"
	run_exec_start
	assert_status 0
	assert_stderr_has "resume: running"
	assert_stdout_has "nouveau: satisfied"
	assert_stdout_has "gpuprov verify: profile $PROFILE"
	[ ! -e "$R/$MARKER" ] || fail "the marker is still there"
	[ ! -L "$R/$WANTS" ] || fail "the unit is still enabled"
	[ "$(reboots)" = 1 ] || fail "resume rebooted again"
	grep -qx 'gpuprov_verify_success 1' "$R/$TEXTFILE" ||
		fail "textfile:" "$(cat "$R/$TEXTFILE" 2>&1)"
	grep -qx 'gpuprov_reboot_pending 0' "$R/$TEXTFILE" || fail "textfile: a reboot still pending"
	# The install got there: no resume record, no pending reboot.
	[ "$(json_get "$R/var/lib/gpuprov/state.json" 'd.get("resume")')" = null ] ||
		fail "the journal keeps the resume record: $(cat "$R/var/lib/gpuprov/state.json")"
	gp --root "$R" status
	assert_status 0
	assert_stdout_has "reboot pending: no"
	refute_stdout_has "automatic reboots"
	# With no marker the unit's command does nothing.
	run_exec_start
	assert_status 0
	assert_stderr_has "nothing to resume"
	[ "$(reboots)" = 1 ]
}

@test "resume: a reboot that never takes stops at the cap of 3; status and verify say so; a person's install clears it" {
	install_auto
	assert_status 5
	# The stub's reboots never happen: same boot, nouveau still loaded.
	local n
	for n in 1 2; do
		run_exec_start
		assert_status 5
		[ "$(resume_count)" = "$n" ] || fail "boot counter $(resume_count), not $n"
		[ "$(reboots)" = $((n + 1)) ] || fail "after resume $n: $(reboots) reboots"
		[ -e "$R/$MARKER" ] || fail "resume $n did not arm the next one"
	done
	run_exec_start
	assert_status 5
	assert_stderr_has "not rebooting: gpuprov rebooted 3 times for this install"
	[ "$(reboots)" = 3 ] || fail "rebooted past the cap: $(reboots)"
	[ ! -e "$R/$MARKER" ] || fail "armed past the cap"
	[ ! -L "$R/$WANTS" ] || fail "the unit is still enabled at the cap"
	json_get "$R/var/lib/gpuprov/state.json" 'd["resume"]["stopped"]' | grep -q "rebooted 3 times" ||
		fail "the journal does not say why: $(cat "$R/var/lib/gpuprov/state.json")"
	gp --root "$R" status
	assert_status 0
	assert_stdout_has "automatic reboots (--reboot=auto): 3 for this install"
	assert_stdout_has "automatic reboots stopped: not rebooting"
	gp --root "$R" --json status
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/status.json"
	[ "$(json_get "$BATS_TEST_TMPDIR/status.json" 'd["resume"]["reboots"]')" = 3 ]
	gp --root "$R" verify --only "$ONLY"
	assert_status 3
	assert_stdout_has "fail  automatic reboots: not rebooting"
	grep -q '^gpuprov_verify_check_success{.*check="gpuprov.resume_stopped"} 0$' "$R/$TEXTFILE" ||
		fail "the resume's textfile lacks the cap:" "$(cat "$R/$TEXTFILE")"
	# A person's install starts the count anew (and may reboot again).
	unset GPUPROV_REBOOT_STUB
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 5
	gp --root "$R" status
	refute_stdout_has "automatic reboots"
}

@test "resume: a resume killed after it removed the marker does not run again at the next boot" {
	# A profile of the test's own, changed after the boot, so that the
	# resumed install has a command to run: ldconfig for the env stage's
	# new linker configuration, whose stub blocks until it is killed.
	local p=$BATS_TEST_TMPDIR/resume-test.json
	printf '{"name": "resume-test", "extends": "%s"}\n' "$PROFILE" > "$p"
	gp --root "$R" install --profile "$p" --only "$ONLY" --reboot=auto
	assert_status 5
	simulate_reboot "$R"
	printf '{"name": "resume-test", "extends": "%s", "stages": {"env": {"cuda_home": "/usr/local/cuda"}}}\n' \
		"$PROFILE" > "$p"
	cp -p "$R/sbin/ldconfig" "$BATS_TEST_TMPDIR/stub.orig"
	mkfifo "$R/tmp/ready"
	open_fifo_reader "$R/tmp/held" HELD_FD
	cat > "$R/sbin/ldconfig" <<-'EOF'
	#!/bin/sh
	[ "${1-}" = -p ] && exit 0
	exec 9<> /tmp/held
	echo started > /tmp/ready
	read -r _ <&9
	EOF
	local exec
	exec=$(sed -n 's/^ExecStart=//p' "$R/$UNIT_REL")
	# shellcheck disable=SC2086 # the unit's words
	$exec --root "$R" > "$BATS_TEST_TMPDIR/resume.out" 2>&1 {HELD_FD}<&- &
	local pid=$!
	read_fifo_line "$R/tmp/ready" "$pid" 60 > /dev/null ||
		fail "the resumed install did not reach ldconfig:" "$(cat "$BATS_TEST_TMPDIR/resume.out")"
	kill -KILL "$pid"
	wait "$pid" || true
	await_eof "$HELD_FD" 30 || fail "the blocked stub outlived gpuprov"
	exec {HELD_FD}<&-
	# The marker went first: the unit's condition is false at the next boot.
	[ ! -e "$R/$MARKER" ] || fail "the marker survived the kill"
	[ ! -L "$R/$WANTS" ] || fail "the unit is still enabled"
	[ "$(resume_count)" = 1 ]
	cp -p "$BATS_TEST_TMPDIR/stub.orig" "$R/sbin/ldconfig"
	run_exec_start
	assert_status 0
	assert_stderr_has "nothing to resume"
	# The same install by hand finishes the job.
	gp --root "$R" install --profile "$p" --only "$ONLY" --reboot=auto
	assert_status 0
	[ "$(reboots)" = 1 ]
	[ ! -e "$R/$MARKER" ]
}

@test "resume: --reboot=auto with --dry-run shows the reboot and the arming, and changes nothing" {
	snapshot "$R" before
	install_auto --dry-run
	assert_status 5
	assert_stdout_has "[10/10] reboot: needed - a reboot will follow"
	assert_stdout_has "create /$MARKER (new file, mode 0600)"
	assert_stdout_has "symlink /$WANTS -> /$UNIT_REL"
	assert_stdout_has "reboot now: run /usr/sbin/reboot-stub"
	assert_stdout_has "summary: 3 needed, 7 skipped; a reboot will follow (--reboot=auto)"
	# The marker shown is the install's, not the dry run's.
	assert_stdout_has "\"install\",\"--profile\",\"$PROFILE\""
	refute_stdout_has '"--dry-run"'
	assert_unchanged "$R" before
	# plan --json: the engine's reboot entry, with the command it runs.
	gp --root "$R" plan --json --profile "$PROFILE" --only "$ONLY" --reboot=auto
	assert_status 5
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/plan.json"
	[ "$(json_get "$BATS_TEST_TMPDIR/plan.json" '[e["type"] for e in d["stages"][-1]["effects"]]')" = \
		'["write", "symlink", "reboot"]' ] || fail "plan: $output"
	[ "$(json_get "$BATS_TEST_TMPDIR/plan.json" 'd["stages"][-1]["effects"][2]["argv"]')" = \
		'["/usr/sbin/reboot-stub"]' ]
	assert_unchanged "$R" before
	# Without --reboot=auto the plan is what it always was.
	gp --root "$R" plan --profile "$PROFILE" --only "$ONLY"
	refute_stdout_has "reboot: needed"
	assert_stdout_has "[1/9] nouveau"
	# The run makes what the plan showed, the marker's bytes included.
	assert_plan_matches_run "$R" --profile "$PROFILE" --only "$ONLY" --reboot=auto
	assert_status 5
	[ "$(reboots)" = 1 ] || fail "the stub recorded $(reboots) reboots"
}

@test "resume: a root that is not / is armed but never rebooted without the stub; no unit is blocked" {
	unset GPUPROV_REBOOT_STUB
	# A systemctl in the root must not run either.
	printf '#!/bin/sh\necho "$0 $*" >> /var/log/stub-commands.log\n' > "$R/usr/bin/systemctl"
	chmod 0755 "$R/usr/bin/systemctl"
	install_auto
	assert_status 5
	assert_stderr_has "armed, not rebooted (the root is not the host's /)"
	refute_stdout_has "reboot now"
	! grep -q 'systemctl\|reboot-stub' "$R/var/log/stub-commands.log" ||
		fail "a reboot command ran:" "$(stub_log "$R")"
	[ -e "$R/$MARKER" ] && [ -L "$R/$WANTS" ] || fail "not armed"
	# No unit in the root: blocked before any change.
	rm -rf "$R" && setup_ubuntu_root
	snapshot "$R" bare
	install_auto
	assert_status 4
	assert_stdout_has "reboot: blocked - --reboot=auto needs gpuprov-resume.service"
	# Only the lock (taken before the plan) is new.
	assert_unchanged "$R" bare var/lib/gpuprov var/lib/gpuprov/lock
}

@test "resume: a marker that is not a command line is removed and nothing runs" {
	mkdir -p "$R/var/lib/gpuprov"
	printf '["gpuprov", 1]\n' > "$R/$MARKER"
	run_exec_start
	assert_status 65
	assert_stderr_has "removed it, nothing was run"
	[ ! -e "$R/$MARKER" ]
	printf '["gpuprov", "--root", "/", "verify"]\n' > "$R/$MARKER"
	run_exec_start
	assert_status 65
	assert_stderr_has "not an install"
	[ ! -e "$R/$MARKER" ]
	[ ! -e "$R/var/log/stub-commands.log" ] || fail "something ran:" "$(stub_log "$R")"
}

@test "resume: systemd-analyze verify accepts the unit; its settings are the issue's" {
	command -v systemd-analyze > /dev/null || fail "no systemd-analyze (Debian's systemd package, in TEST_DEPS)"
	local unit=$BATS_FILE_TMPDIR/units/$UNIT_REL
	run systemd-analyze verify --man=no --recursive-errors=no "$unit"
	[ "$status" -eq 0 ] && [ -z "$output" ] || fail "systemd-analyze verify (exit $status):" "$output"
	grep -qx 'Type=oneshot' "$unit" || fail "not oneshot"
	grep -qx 'ConditionPathExists=/var/lib/gpuprov/resume' "$unit" || fail "no marker condition"
	grep -qx 'Wants=network-online.target' "$unit" || fail "no network-online"
	grep -q '^After=.*network-online.target.*cloud-init.target' "$unit" || fail "not after cloud-init"
	# cloud-final.service and cloud-init.target are After=multi-user.target:
	# without its own, the After= the target adds would close a cycle.
	grep -q '^After=.*multi-user.target' "$unit" || fail "not after multi-user.target"
	grep -qx 'TimeoutStartSec=45min' "$unit" || fail "start timeout"
	grep -qx 'WantedBy=multi-user.target' "$unit" || fail "install section"
	grep -qx "ExecStart=$BATS_FILE_TMPDIR/bin/gpuprov resume" "$unit" || fail "ExecStart: $(grep ExecStart "$unit")"
}
