#!/usr/bin/env bats
# KILL ANYWHERE: a run killed after any of its effects leaves a root that the
# next install finishes, with the same tree and the same journal as a run that
# was never interrupted.
#
# `install --only nouveau,env` on a root with nouveau unloaded makes these
# effects, in order: write /etc/modprobe.d/blacklist-nouveau.conf; run
# update-initramfs -u; write /etc/profile.d/gpuprov-cuda.sh; write
# /etc/ld.so.conf.d/gpuprov-cuda.conf; run ldconfig. The kill points that can
# be reached from outside lie inside the two commands. The fixture's stub is
# replaced by one that logs its argv as the normal stub does, tells the test
# through a fifo that it runs (its pid and its parent's: gpuprov's guard,
# src/sys/run.c), and blocks until it is killed; the test then signals
# gpuprov, and gpuprov alone (the stub runs chrooted in a process group of its
# own), and ends the stub's group after. Or the stub does its work and
# SIGKILLs gpuprov itself (the test tells it the pid through a fifo), so the
# kill lands after the command's effect and before the journal records it.
#
# No sleeps: every wait is on a fifo, with a timeout. A process's end is seen
# as end-of-file on a fifo whose write end only that process holds.

load helpers

# A handshake that goes wrong must not hang the suite.
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-60}

JOURNAL=var/lib/gpuprov/state.json
RUNLOG=var/log/gpuprov.log
STUBLOG=var/log/stub-commands.log
INITRAMFS=usr/sbin/update-initramfs
LDCONFIG=sbin/ldconfig
INITRAMFS_RUN="/usr/sbin/update-initramfs -u"
LDCONFIG_RUN="/sbin/ldconfig "

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	REF=$BATS_TEST_TMPDIR/ref
	GP_PID=
	STUB_PID=
	STUB_PGID=
	GP_PID_FD=
	GP_WATCH_FD=
	STUB_WATCH_FD=
	mkroot "$R" --nouveau unloaded --cuda
}

teardown() {
	local p
	# gpuprov still running (the test failed before it was killed).
	if [ -n "$GP_PID" ]; then
		proc_running "$GP_PID" && kill -KILL "$GP_PID"
		wait "$GP_PID" 2> /dev/null || true
	fi
	# The stub runs in a process group of its own: end all of it.
	if [ -n "$STUB_PGID" ]; then
		kill -KILL -- "-$STUB_PGID" 2> /dev/null || true
	fi
	# Whatever else still runs chrooted into one of this test's roots.
	for p in $(procs_in_root "$R") $(procs_in_root "$REF"); do
		kill -KILL "$p" 2> /dev/null || true
	done
	close_watches
}

close_watches() {
	if [ -n "$GP_WATCH_FD" ]; then
		exec {GP_WATCH_FD}<&-
		GP_WATCH_FD=
	fi
	if [ -n "$STUB_WATCH_FD" ]; then
		exec {STUB_WATCH_FD}<&-
		STUB_WATCH_FD=
	fi
	if [ -n "$GP_PID_FD" ]; then
		exec {GP_PID_FD}>&-
		GP_PID_FD=
	fi
}

# save_stub STUB: keeps the fixture's stub STUB (a path in the root) aside
# and opens the test's end of the fifo the replacement holds while it runs.
save_stub() {
	cp -p "$R/$1" "$BATS_TEST_TMPDIR/stub.orig"
	mkfifo "$R/tmp/kill-ready"
	open_fifo_reader "$R/tmp/kill-held" STUB_WATCH_FD
}

# block_stub STUB: STUB logs its argv as the fixture's stub does, holds the
# write end of /tmp/kill-held, says "PID PPID" on /tmp/kill-ready and blocks
# until it is killed (nothing ever writes to the fifo it reads).
block_stub() {
	save_stub "$1"
	cat > "$R/$1" <<-'EOF'
	#!/bin/sh
	echo "$0 $*" >> /var/log/stub-commands.log
	exec 9<> /tmp/kill-held
	echo "$$ $PPID" > /tmp/kill-ready
	read -r _ <&9
	exit 1
	EOF
}

# self_kill_stub STUB: STUB holds the write end of /tmp/kill-held, does all
# the fixture's stub does (log, change the tree), then SIGKILLs gpuprov (its
# pid read from /tmp/kill-gp-pid) before gpuprov can journal that the command
# ran.
self_kill_stub() {
	save_stub "$1"
	mkfifo "$R/tmp/kill-gp-pid"
	{
		printf '#!/bin/sh\nexec 9<> /tmp/kill-held\n'
		tail -n +2 "$BATS_TEST_TMPDIR/stub.orig"
		printf 'read -r gp < /tmp/kill-gp-pid\nkill -KILL "$gp"\n'
	} > "$R/$1"
}

# restore_stub STUB: the fixture's stub again; the fifos are gone.
restore_stub() {
	cp -p "$BATS_TEST_TMPDIR/stub.orig" "$R/$1"
	rm -f "$R/tmp/kill-ready" "$R/tmp/kill-held" "$R/tmp/kill-gp-pid"
	close_watches
}

# start_install: the install in the background, holding the only write end
# of a fifo whose read end (GP_WATCH_FD) then tells when gpuprov has ended.
# Called after save_stub (STUB_WATCH_FD is open). gpuprov gets none of the
# test's own fds (bats' fd 3, the fifo read ends).
start_install() {
	local fifo=$BATS_TEST_TMPDIR/gp-watch w
	rm -f "$fifo"
	open_fifo_reader "$fifo" GP_WATCH_FD
	exec {w}> "$fifo"
	"$GPUPROV" --root "$R" install --profile "$PROFILE" --only "$ONLY" \
		9>&"$w" {w}>&- {GP_WATCH_FD}<&- {STUB_WATCH_FD}<&- 3>&- \
		> "$BATS_TEST_TMPDIR/killed.out" 2>&1 &
	GP_PID=$!
	exec {w}>&-
}

killed_output() {
	cat "$BATS_TEST_TMPDIR/killed.out"
}

# await_gpuprov_end SIGNAL: gpuprov ends (within 10 s) killed by SIGNAL.
await_gpuprov_end() {
	local want rc=0
	want=$((128 + $(kill -l "$1")))
	await_eof "$GP_WATCH_FD" 10 ||
		fail "gpuprov (pid $GP_PID) still runs 10 s after SIG$1:" "$(killed_output)"
	# (stderr aside: bash's "Killed" notice for the job)
	{ wait "$GP_PID"; } 2> /dev/null || rc=$?
	GP_PID=
	[ "$rc" -eq "$want" ] ||
		fail "the killed install exited $rc, want $want (killed by SIG$1):" "$(killed_output)"
}

# await_stub_end: the stub has ended (within 10 s) and nothing runs in the
# root any more.
await_stub_end() {
	await_eof "$STUB_WATCH_FD" 10 || fail "the stub (pid $STUB_PID) still runs after 10 s"
	! proc_running "$STUB_PID" || fail "the stub (pid $STUB_PID) still runs"
	assert_nothing_runs
}

assert_nothing_runs() {
	local left
	left=$(procs_in_root "$R")
	[ -z "$left" ] || fail "still running chrooted into $R:" \
		"$(ps -o pid,pgid,ppid,args -p "$(paste -sd, - <<< "$left")" 2>&1)"
	[ -z "$GP_PID" ] || ! proc_running "$GP_PID" || fail "gpuprov (pid $GP_PID) still runs"
}

# kill_during STUB SIGNAL: an install whose STUB blocks; while it runs,
# gpuprov (only gpuprov) gets SIGNAL. Returns with gpuprov ended by the
# signal, the stub's process group killed and ended, and the fixture's stub
# back in place.
kill_during() {
	local stub=$1 sig=$2 line ppid
	block_stub "$stub"
	start_install
	line=$(read_fifo_line "$R/tmp/kill-ready" "$GP_PID" 30) ||
		fail "the install did not reach /$stub:" "$(killed_output)"
	STUB_PID=${line% *}
	ppid=${line#* }
	# The stub's parent is gpuprov's guard, whose pid is the id of the
	# stub's process group, apart from gpuprov's; the guard is not in it.
	[ "$(_proc_stat_field "$ppid" 4)" = "$GP_PID" ] ||
		fail "the stub's parent $ppid is not a child of gpuprov ($GP_PID)"
	STUB_PGID=$(proc_pgid "$STUB_PID")
	[ "$STUB_PGID" = "$ppid" ] ||
		fail "the stub is in process group $STUB_PGID, not its guard's ($ppid)"
	[ "$(proc_pgid "$GP_PID")" != "$STUB_PGID" ]
	[ "$(proc_pgid "$ppid")" != "$STUB_PGID" ] || fail "the guard is in the stub's group"
	# Only now is gpuprov killed: the handshake says the stub runs.
	kill -s "$sig" "$GP_PID"
	await_gpuprov_end "$sig"
	kill -KILL -- "-$STUB_PGID" 2> /dev/null || true
	await_stub_end
	STUB_PID=
	STUB_PGID=
	restore_stub "$stub"
}

# self_killed STUB: an install whose STUB does its work and then SIGKILLs
# gpuprov. Returns with both ended and the fixture's stub back in place.
self_killed() {
	local stub=$1
	self_kill_stub "$stub"
	start_install
	# The pid waits in the fifo (held open here) until the stub reads it.
	exec {GP_PID_FD}<> "$R/tmp/kill-gp-pid"
	echo "$GP_PID" >&"$GP_PID_FD"
	await_gpuprov_end KILL
	await_stub_end
	restore_stub "$stub"
}

# expect_stub_log LINE...: the command log of the root is exactly LINEs.
expect_stub_log() {
	printf '%s\n' "$@" > "$BATS_TEST_TMPDIR/stub-log.want"
	diff -u "$BATS_TEST_TMPDIR/stub-log.want" "$R/$STUBLOG" >&2 ||
		fail "the command log differs (- expected, + got)"
}

# stage_state STAGE: its state in `gpuprov --json status` of the root.
stage_state() {
	gp --root "$R" --json status
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/status.json"
	json_get "$BATS_TEST_TMPDIR/status.json" \
		"[s['state'] for s in d['stages'] if s['name'] == '$1'][0]"
}

# assert_not_done STAGE: status (text and JSON) does not show STAGE done.
assert_not_done() {
	local state
	state=$(stage_state "$1")
	case $state in
	done | satisfied) fail "status --json shows $1 $state after the kill" ;;
	esac
	gp --root "$R" status
	assert_status 0
	! printf '%s\n' "$output" | grep -Eq "^  $1 +(done|satisfied)" ||
		fail "status shows $1 done after the kill:" "$output"
}

# journal_mark STAGE KEY: a mark the stage keeps in the journal ("null": none).
journal_mark() {
	json_get "$R/$JOURNAL" "d.get('stages', {}).get('$1', {}).get('$2')"
}

# The state every kill leaves: the journal claims nothing that did not
# happen, and no temporary file lies about.
assert_sound_after_kill() {
	[ -f "$R/$JOURNAL" ] || fail "no journal after the kill"
	assert_journal_true "$R"
	local tmp
	tmp=$(temp_files "$R")
	[ -z "$tmp" ] || fail "temporary files after the kill:" "$tmp"
}

# finish_and_compare RUN: the same install again ends 0 (not locked out by
# the dead run) and shows that it runs the command RUN ("run ldconfig"); the
# root then matches a root on which the same install ran
# uninterrupted: the same tree (the run log, the journal and the command log
# aside), a journal recording the same files with the same sha256 (and the
# same stage states and marks), no temporary file, nothing left running.
finish_and_compare() {
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	if [ "$status" -eq 6 ]; then
		show_run
		fail "the rerun is locked out (exit 6): the killed run's lock was not released"
	fi
	assert_status 0
	assert_stdout_has "$1"

	mkroot "$REF" --nouveau unloaded --cuda
	gp --root "$REF" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	assert_same_file "$EXPECTED/ubuntu2204/stub-commands.log" "$REF/$STUBLOG"

	manifest "$REF" "$JOURNAL" "$RUNLOG" "$STUBLOG" > "$BATS_TEST_TMPDIR/ref.manifest"
	manifest "$R" "$JOURNAL" "$RUNLOG" "$STUBLOG" > "$BATS_TEST_TMPDIR/rerun.manifest"
	diff -u "$BATS_TEST_TMPDIR/ref.manifest" "$BATS_TEST_TMPDIR/rerun.manifest" >&2 ||
		fail "the tree after kill + rerun differs from an uninterrupted run's" \
			"(diff above: - uninterrupted, + kill + rerun)"

	journal_files "$REF/$JOURNAL" > "$BATS_TEST_TMPDIR/ref.files"
	journal_files "$R/$JOURNAL" > "$BATS_TEST_TMPDIR/rerun.files"
	[ "$(wc -l < "$BATS_TEST_TMPDIR/ref.files")" -eq 3 ] ||
		fail "the uninterrupted run's journal:" "$(cat "$REF/$JOURNAL")"
	diff -u "$BATS_TEST_TMPDIR/ref.files" "$BATS_TEST_TMPDIR/rerun.files" >&2 ||
		fail "the rerun's journal records other files or sha256s (- uninterrupted, + rerun)"
	# A stage that the killed run finished is "satisfied" in the rerun's
	# journal, as in the journal of any install after the first: the same
	# outcome as "done" there.
	journal_view "$REF/$JOURNAL" > "$BATS_TEST_TMPDIR/ref.journal"
	journal_view "$R/$JOURNAL" | sed 's/^\( *"state": \)"satisfied"/\1"done"/' \
		> "$BATS_TEST_TMPDIR/rerun.journal"
	diff -u "$BATS_TEST_TMPDIR/ref.journal" "$BATS_TEST_TMPDIR/rerun.journal" >&2 ||
		fail "the rerun's journal differs from the uninterrupted run's, times aside"
	assert_journal_true "$R"

	local tmp
	tmp=$(temp_files "$R")
	[ -z "$tmp" ] || fail "temporary files left after the rerun:" "$tmp"
	[ -z "$(temp_files "$REF")" ]

	gp --root "$R" status
	assert_status 0
	printf '%s\n' "$output" | grep -Eq '^  nouveau +(done|satisfied) ' || fail "status:" "$output"
	printf '%s\n' "$output" | grep -Eq '^  env +(done|satisfied) ' || fail "status:" "$output"
	assert_nothing_runs
}

# What a run killed while update-initramfs runs leaves: the blacklist
# written and journaled, the initramfs not marked rebuilt, nouveau not done,
# nothing of env.
assert_killed_in_initramfs() {
	assert_sound_after_kill
	assert_same_file "$EXPECTED/ubuntu2204/blacklist-nouveau.conf" \
		"$R/etc/modprobe.d/blacklist-nouveau.conf"
	[ "$(journal_files "$R/$JOURNAL" | cut -d' ' -f1)" = \
		/etc/modprobe.d/blacklist-nouveau.conf ] ||
		fail "journal after the kill:" "$(cat "$R/$JOURNAL")"
	[ "$(journal_mark nouveau initramfs_rebuilt_for)" = null ] ||
		fail "the journal claims the initramfs was rebuilt:" "$(cat "$R/$JOURNAL")"
	[ "$(journal_mark env ldconfig_ran_for)" = null ]
	[ ! -e "$R/etc/profile.d/gpuprov-cuda.sh" ]
	[ ! -e "$R/etc/ld.so.conf.d/gpuprov-cuda.conf" ]
	assert_not_done nouveau
	assert_not_done env
	# status tells an interrupted stage from one that never ran.
	run "$GPUPROV" --root "$R" status
	[[ "$output" =~ nouveau\ +interrupted ]] ||
		fail "status does not say nouveau was interrupted:" "$output"
	[[ "$output" =~ env\ +never\ run ]] || fail "status for env:" "$output"
}

# What a run killed while ldconfig runs leaves: nouveau done, both env files
# written and journaled, ldconfig not marked as run, env not done.
assert_killed_in_ldconfig() {
	assert_sound_after_kill
	assert_same_file "$EXPECTED/ubuntu2204/gpuprov-cuda.sh" "$R/etc/profile.d/gpuprov-cuda.sh"
	assert_same_file "$EXPECTED/ubuntu2204/gpuprov-cuda.conf" \
		"$R/etc/ld.so.conf.d/gpuprov-cuda.conf"
	[ "$(journal_files "$R/$JOURNAL" | wc -l)" -eq 3 ] ||
		fail "journal after the kill:" "$(cat "$R/$JOURNAL")"
	[ "$(journal_mark nouveau initramfs_rebuilt_for)" != null ]
	[ "$(journal_mark env ldconfig_ran_for)" = null ] ||
		fail "the journal claims ldconfig ran:" "$(cat "$R/$JOURNAL")"
	[ "$(stage_state nouveau)" = done ]
	assert_not_done env
}

@test "kill: SIGKILL while update-initramfs runs; the rerun reruns it and ends like an uninterrupted run" {
	kill_during "$INITRAMFS" KILL
	expect_stub_log "$INITRAMFS_RUN"
	assert_killed_in_initramfs
	finish_and_compare "run update-initramfs -u"
	expect_stub_log "$INITRAMFS_RUN" "$INITRAMFS_RUN" "$LDCONFIG_RUN"
}

@test "kill: history shows an install killed in the middle as interrupted, not completed; the rerun completes the same entry" {
	kill_during "$INITRAMFS" KILL
	gp --root "$R" history
	assert_status 0
	[[ "${lines[0]}" == "*   1  "*")  interrupted, not completed" ]] || fail "history:" "$output"
	gp --root "$R" --json history
	JSON=$BATS_TEST_TMPDIR/h.json
	printf '%s\n' "$output" > "$JSON"
	jeq '[(e["result"], e["verified"]) for e in d["entries"]]' '[["interrupted", false]]'
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	gp --root "$R" --json history
	printf '%s\n' "$output" > "$JSON"
	jeq '[(e["id"], e["result"], e["verified"]) for e in d["entries"]]' '[[1, "completed", true]]'
}

@test "kill: SIGTERM while update-initramfs runs; the rerun reruns it and ends like an uninterrupted run" {
	kill_during "$INITRAMFS" TERM
	expect_stub_log "$INITRAMFS_RUN"
	assert_killed_in_initramfs
	finish_and_compare "run update-initramfs -u"
	expect_stub_log "$INITRAMFS_RUN" "$INITRAMFS_RUN" "$LDCONFIG_RUN"
}

@test "kill: SIGKILL while ldconfig runs; the rerun reruns it and ends like an uninterrupted run" {
	kill_during "$LDCONFIG" KILL
	expect_stub_log "$INITRAMFS_RUN" "$LDCONFIG_RUN"
	assert_killed_in_ldconfig
	finish_and_compare "run ldconfig"
	expect_stub_log "$INITRAMFS_RUN" "$LDCONFIG_RUN" "$LDCONFIG_RUN"
}

@test "kill: SIGTERM while ldconfig runs; the rerun reruns it and ends like an uninterrupted run" {
	kill_during "$LDCONFIG" TERM
	expect_stub_log "$INITRAMFS_RUN" "$LDCONFIG_RUN"
	assert_killed_in_ldconfig
	finish_and_compare "run ldconfig"
	expect_stub_log "$INITRAMFS_RUN" "$LDCONFIG_RUN" "$LDCONFIG_RUN"
}

@test "kill: update-initramfs finishes, then SIGKILLs gpuprov before the journal marks it; the rerun runs it again" {
	self_killed "$INITRAMFS"
	expect_stub_log "$INITRAMFS_RUN"
	# The command did its work; gpuprov never learnt it.
	assert_same_file "$EXPECTED/ubuntu2204/initrd.img" "$R/boot/initrd.img-5.15.0-91-generic"
	assert_killed_in_initramfs
	finish_and_compare "run update-initramfs -u"
	expect_stub_log "$INITRAMFS_RUN" "$INITRAMFS_RUN" "$LDCONFIG_RUN"
}

@test "kill: ldconfig finishes, then SIGKILLs gpuprov before the journal marks it; the rerun runs it again" {
	self_killed "$LDCONFIG"
	expect_stub_log "$INITRAMFS_RUN" "$LDCONFIG_RUN"
	grep -qx /usr/local/cuda-11.8/lib64 "$R/etc/ld.so.cache"
	assert_killed_in_ldconfig
	finish_and_compare "run ldconfig"
	expect_stub_log "$INITRAMFS_RUN" "$LDCONFIG_RUN" "$LDCONFIG_RUN"
}

@test "kill: killed in update-initramfs, the rerun killed in ldconfig; the third run ends like an uninterrupted run" {
	kill_during "$INITRAMFS" KILL
	assert_killed_in_initramfs
	kill_during "$LDCONFIG" KILL
	expect_stub_log "$INITRAMFS_RUN" "$INITRAMFS_RUN" "$LDCONFIG_RUN"
	assert_killed_in_ldconfig
	finish_and_compare "run ldconfig"
	expect_stub_log "$INITRAMFS_RUN" "$INITRAMFS_RUN" "$LDCONFIG_RUN" "$LDCONFIG_RUN"
}

# stopped_with SIGNAL: an install whose update-initramfs blocks gets SIGNAL
# (gpuprov only); by the time gpuprov has ended, the stub must have ended
# too: gpuprov stops its command's group (TERM/INT/HUP) or its
# guard does (SIGKILL of gpuprov) instead of leaving it running unlocked.
stopped_with() {
	local sig=$1 line
	block_stub "$INITRAMFS"
	start_install
	line=$(read_fifo_line "$R/tmp/kill-ready" "$GP_PID" 30) ||
		fail "the install did not reach /$INITRAMFS:" "$(killed_output)"
	STUB_PID=${line% *}
	kill -s "$sig" "$GP_PID"
	await_gpuprov_end "$sig"
	# No kill from the test: the stub must end by itself, soon.
	await_stub_end
	STUB_PID=
	restore_stub "$INITRAMFS"
}

@test "kill: SIGTERM stops the running command before gpuprov exits, and says so" {
	stopped_with TERM
	grep -q "update-initramfs -u' stopped because gpuprov received signal 15" \
		"$BATS_TEST_TMPDIR/killed.out" || fail "no stop message:" "$(killed_output)"
	assert_killed_in_initramfs
	finish_and_compare "run update-initramfs -u"
}

@test "kill: SIGINT and SIGHUP stop the running command too" {
	stopped_with INT
	assert_killed_in_initramfs
	stopped_with HUP
	assert_killed_in_initramfs
}

@test "kill: after SIGKILL of gpuprov the running command is killed by its guard" {
	stopped_with KILL
	assert_killed_in_initramfs
	finish_and_compare "run update-initramfs -u"
}

# shim_killed KIND:TEXT: an install SIGKILLed by tests/fixtures/killshim.c
# right after its first KIND call (create, rename, ...) on a path holding TEXT.
shim_killed() {
	local rc=0
	: "${KILLSHIM:=$REPO_ROOT/build/killshim.so}"
	[ -f "$KILLSHIM" ] || fail "no kill shim at $KILLSHIM (make build/killshim.so)"
	{
		LD_PRELOAD=$KILLSHIM GPUPROV_KILL_MATCH=$1 \
			ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
			"$GPUPROV" --root "$R" install --profile "$PROFILE" --only "$ONLY" \
			> "$BATS_TEST_TMPDIR/killed.out" 2>&1 || rc=$?
	} 2> /dev/null
	[ "$rc" -eq 137 ] || fail "the install was not killed at $1 (exit $rc):" "$(killed_output)"
}

@test "kill: SIGKILL right after a file is renamed into place; the rerun records it as gpuprov's" {
	shim_killed rename:gpuprov-cuda.sh
	assert_same_file "$EXPECTED/ubuntu2204/gpuprov-cuda.sh" "$R/etc/profile.d/gpuprov-cuda.sh"
	finish_and_compare "run ldconfig"
	journal_files "$R/$JOURNAL" | grep -q '^/etc/profile.d/gpuprov-cuda.sh ' ||
		fail "the file renamed into place before the kill is not journaled:" "$(cat "$R/$JOURNAL")"
}

@test "kill: SIGKILL while a file or the journal is in its temp file; the rerun removes the temp files" {
	shim_killed create:.#gpuprov-cuda.sh
	[ -n "$(temp_files "$R")" ] || fail "the kill left no temp file (the test needs one)"
	finish_and_compare "run ldconfig"
	# A no-op run leaves the journal alone: give the next one a file to restore.
	rm "$R/etc/profile.d/gpuprov-cuda.sh"
	shim_killed create:.#state.json
	[ -n "$(temp_files "$R")" ] || fail "the kill left no temp file of the journal"
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	[ -z "$(temp_files "$R")" ] || fail "temp files left:" "$(temp_files "$R")"
}

@test "kill: a temp file whose pid is no live gpuprov goes; a file not named as gpuprov's temp stays" {
	local dead=$R/etc/profile.d/.#x.gpuprov$$.0 other=$R/etc/profile.d/.#x.gpuprovnot.0
	: > "$dead"
	: > "$other"
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
	assert_status 0
	# $$ is bash, not gpuprov: its name is not gpuprov's, so it goes.
	[ ! -e "$dead" ] || fail "a temp file whose pid is no gpuprov was kept"
	[ -e "$other" ] || fail "a file not named as gpuprov's temp was removed"
}

@test "kill: SIGKILL after the nouveau stage asked for a reboot; status shows the reboot pending" {
	rm -rf "$R"
	mkroot "$R" --cuda
	kill_during "$LDCONFIG" KILL
	gp --root "$R" status
	assert_status 0
	assert_stdout_has "reboot pending: nouveau: "
	gp --root "$R" --json status
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/status.json"
	[ "$(json_get "$BATS_TEST_TMPDIR/status.json" 'd["reboot"]["boot_id"]')" = \
		11111111-2222-4333-8444-555555555555 ] || fail "status --json: $output"
}

# spawning_stub STUB: like block_stub, but STUB first starts a grandchild in
# its process group and a double-forked one in a session of its own; all
# three hold the write end of /tmp/kill-held, so its end-of-file says that
# every one of them has ended. (ash opens /dev/null for a background job:
# the root gets one for the time of the test.)
spawning_stub() {
	save_stub "$1"
	mkdir -p "$R/dev"
	: > "$R/dev/null"
	cat > "$R/$1" <<-'EOF'
	#!/bin/sh
	echo "$0 $*" >> /var/log/stub-commands.log
	exec 9<> /tmp/kill-held
	sh -c 'read -r _ <&9' &
	/bin/busybox setsid sh -c 'sh -c "read -r _ <&9" & exit 0'
	echo "$$ $PPID" > /tmp/kill-ready
	read -r _ <&9
	exit 1
	EOF
}

@test "kill: after SIGKILL of gpuprov no process of the command survives: children, grandchildren, a double-forked setsid daemon" {
	spawning_stub "$INITRAMFS"
	start_install
	line=$(read_fifo_line "$R/tmp/kill-ready" "$GP_PID" 30) ||
		fail "the install did not reach /$INITRAMFS:" "$(killed_output)"
	STUB_PID=${line% *}
	[ -n "$(procs_in_root "$R" | grep -vx "$STUB_PID")" ] ||
		fail "the stub started no other process (the test needs them)"
	kill -KILL "$GP_PID"
	await_gpuprov_end KILL
	# No kill from the test: every process of the run must end by itself.
	await_stub_end
	STUB_PID=
	restore_stub "$INITRAMFS"
	rm -r "$R/dev"
	finish_and_compare "run update-initramfs -u"
}
