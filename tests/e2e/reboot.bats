#!/usr/bin/env bats
# REBOOT FLOW: nouveau loaded -> install exits 5 -> (no reboot yet) exit 5
# again, nothing run -> reboot simulated -> install ends 0 -> verify ends 0 ->
# status shows no pending reboot. And a reboot that did not help -> exit 4.

load helpers

setup() {
	setup_ubuntu_root
}

# The first install: exit 5, one line on stderr saying to reboot.
first_install() {
	install_ubuntu
	assert_status 5
	assert_one_stderr_line
	assert_stderr_has "reboot"
	assert_same_file "$EXPECTED/ubuntu2204/stub-commands.log" "$R/var/log/stub-commands.log"
}

assert_no_pending_reboot() {
	gp --root "$R" status
	assert_status 0
	printf '%s\n' "$output" | grep -qx "reboot pending: no" ||
		fail "status still shows a pending reboot:" "$output"
	gp --root "$R" --json status
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/status.json"
	[ "$(json_get "$BATS_TEST_TMPDIR/status.json" 'd["reboot"]')" = null ] ||
		fail "status --json still has a reboot: $output"
}

@test "reboot: install before the reboot exits 5 again and runs nothing" {
	first_install
	snapshot "$R" pending var/lib/gpuprov/state.json var/log/gpuprov.log
	install_ubuntu
	assert_status 5
	assert_one_stderr_line
	assert_stderr_has "reboot"
	# Nothing new ran and nothing changed: the work is done, only the reboot is missing.
	assert_same_file "$EXPECTED/ubuntu2204/stub-commands.log" "$R/var/log/stub-commands.log"
	assert_unchanged "$R" pending var/lib/gpuprov/state.json var/log/gpuprov.log
	printf '%s\n' "$output" | grep -Eq '^\[1/9\] nouveau: reboot[ _]pending' ||
		fail "nouveau should be reboot pending:" "$output"
	# The boot id of the first request is kept.
	[ "$(json_get "$R/var/lib/gpuprov/state.json" 'd["reboot"]["boot_id"]')" = \
		11111111-2222-4333-8444-555555555555 ]
	# verify before the reboot fails and says why.
	gp --root "$R" verify --only "$ONLY"
	assert_status 3
	assert_stdout_has "nouveau is loaded"
	assert_stdout_has "pending reboot"
}

@test "reboot: after the reboot install resumes, ends 0; verify 0; no pending reboot" {
	first_install
	simulate_reboot "$R"
	install_ubuntu
	assert_status 0
	assert_stderr_empty
	assert_stdout_has "nouveau: satisfied"
	assert_stdout_has "env: satisfied"
	# Resuming does not redo finished work.
	assert_same_file "$EXPECTED/ubuntu2204/stub-commands.log" "$R/var/log/stub-commands.log"
	gp --root "$R" verify --only "$ONLY"
	assert_status 0
	refute_stdout_has "fail "
	assert_stdout_has "pass  nouveau not loaded"
	assert_stdout_has "pass  GPU binding"
	# verify without --profile used the profile the install recorded.
	assert_stdout_has "$PROFILE"
	assert_no_pending_reboot
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/status.json"
	json_get "$BATS_TEST_TMPDIR/status.json" '[s["state"] for s in d["stages"] if s["name"] == "nouveau"][0]' |
		grep -Eqx 'satisfied|done' || fail "nouveau's state after the reboot: $output"
}

@test "reboot: rebooted but nouveau still loaded -> exit 4, the change did not take effect" {
	first_install
	new_boot_id "$R"
	snapshot "$R" rebooted var/lib/gpuprov/state.json var/log/gpuprov.log
	install_ubuntu
	assert_status 4
	# The stage says why, with the original reason intact.
	line=$(printf '%s\n' "$output" | grep -a '^\[1/9\] nouveau:') || fail "no nouveau line: $output"
	case $line in
	*"nouveau: blocked - "*"nouveau is loaded"*"did not take effect"*) ;;
	*) fail "unexpected nouveau line: $line" ;;
	esac
	# Only printable text (no garbage from freed memory).
	! printf '%s' "$line" | LC_ALL=C grep -q '[^[:print:]]' ||
		fail "the nouveau line holds unprintable bytes: $(printf '%s' "$line" | od -c | head -n 3)"
	assert_stderr_has "did not take effect"
	# Nothing ran again and nothing changed.
	assert_same_file "$EXPECTED/ubuntu2204/stub-commands.log" "$R/var/log/stub-commands.log"
	assert_unchanged "$R" rebooted var/lib/gpuprov/state.json var/log/gpuprov.log
	# verify names the module still loaded.
	gp --root "$R" verify --only "$ONLY"
	assert_status 3
	assert_stdout_has "fail  nouveau not loaded"
}

@test "reboot: an install of another stage meanwhile keeps the pending reboot" {
	first_install
	gp --root "$R" status
	assert_status 0
	assert_stdout_has "reboot pending: nouveau"
	# A later run of an unrelated stage (env only) must not lose the
	# pending reboot the journal holds for nouveau.
	gp --root "$R" install --profile "$PROFILE" --only env
	assert_documented_status
	gp --root "$R" status
	assert_stdout_has "reboot pending: nouveau"
	simulate_reboot "$R"
	install_ubuntu
	assert_status 0
	assert_no_pending_reboot
}

# --- The reboot-required convention (Debian's update-notifier-common) --------

@test "reboot: a pending reboot writes /var/run/reboot-required and .pkgs, once each" {
	# As on Debian: /var/run is a link to /run, resolved inside the root.
	mkdir -p "$R/run"
	ln -s /run "$R/var/run"
	# Another tool (unattended-upgrades) asked first: its name stays.
	printf 'linux-image-6.1.0-99-amd64' > "$R/run/reboot-required.pkgs"
	gp --root "$R" install --dry-run --profile "$PROFILE" --only "$ONLY"
	assert_status 5
	assert_stdout_has "/var/run/reboot-required"
	[ ! -e "$R/run/reboot-required" ] || fail "the dry run wrote reboot-required"
	first_install
	[ "$(cat "$R/run/reboot-required")" = "*** System restart required ***" ] ||
		fail "reboot-required: $(cat "$R/run/reboot-required")"
	[ -L "$R/var/run" ] || fail "/var/run is no longer a link"
	printf 'linux-image-6.1.0-99-amd64\ngpuprov\n' > "$BATS_TEST_TMPDIR/pkgs"
	assert_same_file "$BATS_TEST_TMPDIR/pkgs" "$R/run/reboot-required.pkgs"
	# Journaled like every write.
	journal_files "$R/var/lib/gpuprov/state.json" | grep -q '/var/run/reboot-required.pkgs' ||
		fail "the journal does not record the package list: $(journal_files "$R/var/lib/gpuprov/state.json")"
	# The same install again: no second "gpuprov" line.
	install_ubuntu
	assert_status 5
	assert_same_file "$BATS_TEST_TMPDIR/pkgs" "$R/run/reboot-required.pkgs"
	gp --root "$R" status
	assert_status 0
	assert_stdout_has "reboot required (/var/run/reboot-required): yes, for linux-image-6.1.0-99-amd64, gpuprov"
	gp --root "$R" --json status
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/status.json"
	[ "$(json_get "$BATS_TEST_TMPDIR/status.json" 'd["reboot_signals"]["reboot_required"]')" = true ]
	[ "$(json_get "$BATS_TEST_TMPDIR/status.json" '",".join(d["reboot_signals"]["packages"])')" = \
		linux-image-6.1.0-99-amd64,gpuprov ]
	[ "$(json_get "$BATS_TEST_TMPDIR/status.json" 'd["reboot_signals"]["dnf_needs_restarting"]')" = null ]
}

@test "reboot: status refuses a package list that is not a regular file" {
	mkdir -p "$R/var/run"
	mkfifo "$R/var/run/reboot-required.pkgs"
	gp --root "$R" status
	assert_status 0
	refute_stdout_has "reboot required"
}

@test "reboot: status on a RHEL-family root asks dnf needs-restarting -r" {
	R=$BATS_TEST_TMPDIR/rocky
	mkroot "$R" --distro rocky9
	mkdir -p "$R/usr/bin"
	cat > "$R/usr/bin/dnf" <<'STUB'
#!/bin/sh
echo "$0 $*" >> /var/log/dnf-args.log
[ "$*" = "needs-restarting -r" ] || exit 2
echo "Core libraries or services have been updated since boot-up:"
echo "  * kernel"
echo "Reboot is required to fully utilize these updates."
exit 1
STUB
	chmod 0755 "$R/usr/bin/dnf"
	gp --root "$R" status
	assert_status 0
	assert_stdout_has "dnf needs-restarting -r: reboot needed"
	assert_stdout_has "Reboot is required"
	gp --root "$R" --json status
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/status.json"
	[ "$(json_get "$BATS_TEST_TMPDIR/status.json" 'd["reboot_signals"]["dnf_needs_restarting"]["reboot"]')" = true ]
	# No reboot needed: exit 0.
	sed -i 's/^exit 1$/exit 0/' "$R/usr/bin/dnf"
	gp --root "$R" status
	assert_stdout_has "dnf needs-restarting -r: no reboot needed"
	# Not asked on a Debian-family root, even with a dnf there.
	cp "$R/usr/bin/dnf" "$BATS_TEST_TMPDIR/dnf"
	R2=$BATS_TEST_TMPDIR/root
	cp "$BATS_TEST_TMPDIR/dnf" "$R2/usr/bin/dnf"
	gp --root "$R2" status
	refute_stdout_has "dnf needs-restarting"
}
