#!/usr/bin/env bats
# gpuprov rollback against real apt and dpkg: one debootstrapped Debian 12
# root for the whole file (tests/fixtures/debroot.sh) with the stand-in
# repository of tests/fixtures/aptrepo.sh as NVIDIA's container toolkit
# repository (its four packages in 1.17.7-1 and 1.17.8-1, the toolkit
# depending on -base at exactly its version), its key served over loopback
# HTTPS. The tests run in order on that root: install 1.17.7-1 (entry 1),
# then 1.17.8-1 (entry 2), rollback --dry-run (nothing changes), rollback
# (dpkg status and the held set as after entry 1, as planned: entry 3),
# --to 2, then a refused rollback once 1.17.7-1 is gone from the repository.
# One test has a root of its own (setup_apt_root) where the second install
# adds a package (a second CUDA toolkit) that the rollback removes.

load helpers

setup_file() {
	ctk_apt_root
}

setup() {
	if [[ "$BATS_TEST_DESCRIPTION" == *"(cuda root)"* ]]; then
		setup_apt_root # a root of its own, the same stand-in repository
		P=$BATS_TEST_TMPDIR/p.json
		return 0
	fi
	ctk_setup
}

teardown() {
	[[ "$BATS_TEST_DESCRIPTION" == *"(stub root)"* ]] || stop_https_server
}

# pkg_state: each package's dpkg status and version, then the held set.
pkg_state() {
	chroot "$R" dpkg-query -W -f '${Package} ${Status} ${Version}\n'
	echo "--- held"
	chroot "$R" apt-mark showhold
}

# rollback_matches_plan ARGS...: `rollback --dry-run --json ARGS`, then
# `rollback --json ARGS`, their effects equal (assert_plan_matches_run).
rollback_matches_plan() {
	PLAN_CMD="rollback --dry-run" RUN_CMD=rollback assert_plan_matches_run "$R" "$@"
}

@test "rollback: with nothing installed there is nothing to roll back to: a clear error, exit 4 (stub root)" {
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R"
	gp --root "$R" rollback --dry-run
	assert_status 4
	assert_stderr_has "rollback: no install recorded; there is nothing to roll back to; nothing was changed"
	gp --root "$R" rollback --to 0
	assert_status 2
	assert_stderr_has "--to 0: give a history entry's id"
}

@test "rollback: one install only: nothing before it to roll back to; --to names an entry that is not there" {
	ctk_profile 1.17.7-1
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	pkg_state > "$BATS_FILE_TMPDIR/v1.state"
	grep -qx 'nvidia-container-toolkit hold ok installed 1.17.7-1' "$BATS_FILE_TMPDIR/v1.state" ||
		fail "not installed:" "$(cat "$BATS_FILE_TMPDIR/v1.state")"
	snapshot "$R" v1 var/log/gpuprov.log var/lib/gpuprov/lock
	gp --root "$R" rollback
	assert_status 4
	assert_stderr_has "rollback: only one install recorded; there is nothing before it to roll back to; nothing was changed"
	gp --root "$R" rollback --to 7
	assert_status 2
	assert_stderr_has "rollback: --to 7: no such history entry"
	gp --root "$R" rollback --to 1
	assert_status 2
	assert_stderr_has "rollback: --to 1 is the current entry; nothing to roll back"
	assert_unchanged "$R" v1 var/log/gpuprov.log var/lib/gpuprov/lock
}

@test "rollback: --dry-run after an upgrade plans the downgrade to the previous entry's versions and changes nothing" {
	ctk_profile 1.17.8-1
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	pkg_state > "$BATS_FILE_TMPDIR/v2.state"
	grep -qx 'nvidia-container-toolkit hold ok installed 1.17.8-1' "$BATS_FILE_TMPDIR/v2.state" ||
		fail "not upgraded and held:" "$(cat "$BATS_FILE_TMPDIR/v2.state")"
	snapshot "$R" v2
	gp --root "$R" rollback --dry-run
	assert_status 0
	assert_stdout_has "gpuprov rollback --dry-run: profile ctk-apt (sha256 "
	assert_stdout_has "rollback: needed - back to history entry 1: installs "
	assert_stdout_has "nvidia-container-toolkit=1.17.7-1"
	assert_stdout_has "libnvidia-container1=1.17.7-1"
	assert_stdout_has "--allow-downgrades"
	assert_stdout_has "container_toolkit: "
	assert_unchanged "$R" v2
}

@test "rollback: makes the previous entry's packages and holds again, exactly as planned, and records a history entry" {
	rollback_matches_plan
	assert_status 0
	pkg_state > "$BATS_TEST_TMPDIR/after.state"
	diff -u "$BATS_FILE_TMPDIR/v1.state" "$BATS_TEST_TMPDIR/after.state" ||
		fail "dpkg status or holds differ from entry 1's (diff above: - entry 1, + after)"
	gp --root "$R" --json history
	JSON=$BATS_TEST_TMPDIR/h.json
	printf '%s\n' "$output" > "$JSON"
	jeq '[e["id"] for e in d["entries"]]' '[3, 2, 1]'
	jeq '[e["current"] for e in d["entries"]]' '[true, false, false]'
	jeq 'd["entries"][0]["result"]' completed
	jeq 'd["entries"][0]["record"]["rollback_of"]' 1
	jeq 'd["entries"][0]["record"]["packages"]["nvidia-container-toolkit"]["stage"]' container_toolkit
	jeq 'd["entries"][0]["record"]["profile"]["sha256"] == d["entries"][2]["record"]["profile"]["sha256"]' true
	gp --root "$R" history
	assert_stdout_has "; a rollback to entry 1"
	# What is installed now is the entry's profile: verify checks that one.
	gp --root "$R" verify --only container_toolkit
	assert_status 0
	# Done: a second rollback plan back to entry 1 changes nothing.
	gp --root "$R" rollback --to 1 --dry-run
	assert_status 0
	assert_stdout_has "rollback: satisfied - the packages and holds are as history entry 1 had them"
}

@test "rollback: --to 2 goes forward again to the upgrade's versions, as planned" {
	rollback_matches_plan --to 2
	assert_status 0
	pkg_state > "$BATS_TEST_TMPDIR/after.state"
	diff -u "$BATS_FILE_TMPDIR/v2.state" "$BATS_TEST_TMPDIR/after.state" ||
		fail "dpkg status or holds differ from entry 2's (diff above: - entry 2, + after)"
	gp --root "$R" --json history
	JSON=$BATS_TEST_TMPDIR/h.json
	printf '%s\n' "$output" > "$JSON"
	jeq 'd["entries"][0]["record"]["rollback_of"]' 2
}

@test "rollback: refused before any change when no repository offers the old versions any more, naming them" {
	# The repository drops 1.17.7-1: its packages and their stanzas (apt's
	# list of a file: repository is a link to its Packages file).
	local pk=$R/srv/ctk-repo/Packages
	rm "$R"/srv/ctk-repo/*_1.17.7-1_*.deb
	awk -v RS= -v ORS='\n\n' '!/\nVersion: 1\.17\.7-1\n/' "$pk" > "$pk.new" && mv "$pk.new" "$pk"
	! grep -q '^Version: 1.17.7-1$' "$R"/var/lib/apt/lists/*_Packages || fail "1.17.7-1 still listed"
	snapshot "$R" before var/log/gpuprov.log var/lib/gpuprov/lock
	cp "$R/var/lib/dpkg/status" "$BATS_TEST_TMPDIR/status.before"
	gp --root "$R" rollback --to 1
	assert_status 4
	assert_stderr_has "cannot roll back to history entry 1: no configured repository offers "
	assert_stderr_has "nvidia-container-toolkit=1.17.7-1"
	assert_stderr_has "nothing was changed"
	cmp "$BATS_TEST_TMPDIR/status.before" "$R/var/lib/dpkg/status" || fail "dpkg status changed"
	assert_unchanged "$R" before var/log/gpuprov.log var/lib/gpuprov/lock
	gp --root "$R" rollback --to 1 --dry-run
	assert_status 4
	assert_stdout_has "rollback: blocked - cannot roll back to history entry 1"
}

@test "rollback: the package the newer install added is removed, the link the profile sets points back, as planned (cuda root)" {
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "11.8", "link": true } }'
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	pkg_state > "$BATS_TEST_TMPDIR/v1.state"
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "12.4", "link": true } }'
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(dpkg_status "$R" cuda-toolkit-12-4)" = "install ok installed 12.4.1-1" ] ||
		fail "cuda-toolkit-12-4: $(dpkg_status "$R" cuda-toolkit-12-4)"
	gp --root "$R" rollback --dry-run
	assert_status 0
	assert_stdout_has "rollback: needed - back to history entry 1: removes cuda-toolkit-12-4"
	rollback_matches_plan --ca-file "$CA"
	assert_status 0
	pkg_state > "$BATS_TEST_TMPDIR/after.state"
	diff -u "$BATS_TEST_TMPDIR/v1.state" "$BATS_TEST_TMPDIR/after.state" ||
		fail "dpkg status or holds differ from entry 1's (diff above: - entry 1, + after)"
	[ "$(readlink "$R/usr/local/cuda")" = cuda-11.8 ] || fail "/usr/local/cuda -> $(readlink "$R/usr/local/cuda")"
}
