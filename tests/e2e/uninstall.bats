#!/usr/bin/env bats
# History and uninstall against real apt and dpkg: one debootstrapped
# Debian 12 root for the whole file (tests/fixtures/debroot.sh) with the
# stand-in repository of tests/fixtures/aptrepo.sh as NVIDIA's container
# toolkit repository (its four packages in 1.17.7-1 and 1.17.8-1), its key
# served over loopback HTTPS, and a daemon.json of the root's own that the
# install replaces. The tests run in order on that root: install 1.17.7-1,
# then 1.17.8-1 (a changed profile: two history entries), uninstall
# --dry-run and --only (nothing changes), uninstall (the root is as before
# the first install: files, dpkg status, holds); then packages that were
# there before gpuprov: one at the profile's version (kept, its hold
# released), one older (upgraded: kept and listed as not undoable).

load helpers

setup_file() {
	ctk_apt_root '{ "log-level": "warn" }'
}

setup() {
	ctk_setup
}

teardown() {
	[[ "$BATS_TEST_DESCRIPTION" == *"(stub root)"* ]] || stop_https_server
}

# dpkg_status_stub NAME: the Status of NAME in the stub root's dpkg status.
dpkg_status_stub() {
	sed -n "/^Package: $1\$/,/^\$/s/^Status: //p" "$R/var/lib/dpkg/status"
}

# uninstall_matches_plan: `uninstall --dry-run --json` then `uninstall
# --json`, their effects equal (assert_plan_matches_run).
uninstall_matches_plan() {
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R" "$@"
}

@test "uninstall: an install records a history entry with the resolved profile, versions, holds and files" {
	state "$R" > "$BATS_FILE_TMPDIR/before.state"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	gp --root "$R" --json history
	assert_status 0
	JSON=$BATS_TEST_TMPDIR/h.json
	printf '%s\n' "$output" > "$JSON"
	jeq 'len(d["entries"])' 1
	jeq 'd["entries"][0]["current"]' true
	jeq 'd["entries"][0]["result"]' completed
	jeq 'd["entries"][0]["verified"]' true
	jeq 'd["entries"][0]["record"]["versions"]["container_toolkit"]' 1.17.7-1
	jeq 'd["entries"][0]["record"]["profile"]["doc"]["stages"]["container_toolkit"]["version"]' 1.17.7-1
	jeq 'sorted(d["entries"][0]["record"]["holds"])' '["libnvidia-container-tools", "libnvidia-container1", "nvidia-container-toolkit", "nvidia-container-toolkit-base"]'
	jeq 'd["entries"][0]["record"]["packages"]["libnvidia-container1"]["version"]' 1.17.7-1
	jeq '"installed_before" in d["entries"][0]["record"]["packages"]["libnvidia-container1"]' false
	jeq 'd["entries"][0]["record"]["files"]["/etc/docker/daemon.json"]["backup"]' /var/lib/gpuprov/backup/etc/docker/daemon.json
	jeq '"extends" in d["entries"][0]["record"]["profile"]["doc"]' false
}

@test "uninstall: history after a second install of a changed profile lists both, newest first, the newest current" {
	ctk_profile 1.17.8-1
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	gp --root "$R" history
	assert_status 0
	[ "${#lines[@]}" -eq 4 ] || fail "expected two entries of two lines: $output"
	[[ "${lines[0]}" == "*   2  "*"ctk-apt (sha256 "*")  completed, verified" ]] || fail "newest: ${lines[0]}"
	[[ "${lines[2]}" == "    1  "*"ctk-apt (sha256 "*")  completed, verified" ]] || fail "oldest: ${lines[2]}"
	gp --root "$R" --json history
	JSON=$BATS_TEST_TMPDIR/h.json
	printf '%s\n' "$output" > "$JSON"
	jeq '[e["id"] for e in d["entries"]]' '[2, 1]'
	jeq '[e["current"] for e in d["entries"]]' '[true, false]'
	jeq 'd["entries"][0]["record"]["versions"]["container_toolkit"]' 1.17.8-1
	# The same profile again continues the entry: no third one.
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	gp --root "$R" --json history
	printf '%s\n' "$output" > "$JSON"
	jeq 'len(d["entries"])' 2
}

@test "uninstall: --dry-run plans the removal and changes nothing; --only another stage does nothing" {
	snapshot "$R" before
	snapshot "$R" before-run var/log/gpuprov.log var/lib/gpuprov/lock
	gp --root "$R" uninstall --dry-run
	assert_status 0
	assert_stdout_has "gpuprov uninstall --dry-run: profile ctk-apt (sha256 "
	assert_stdout_has "container_toolkit: needed - removes 4 packages and 3 files gpuprov added"
	assert_stdout_has "run apt-mark unhold"
	assert_stdout_has "run apt-get -y -q remove --purge"
	assert_stdout_has "replace /etc/docker/daemon.json"
	assert_stdout_has '+{ "log-level": "warn" }'
	assert_stdout_has "remove /etc/apt/sources.list.d/nvidia-container-toolkit.list"
	assert_stdout_has "remove /usr/share/keyrings/nvidia-container-toolkit-keyring.asc"
	assert_unchanged "$R" before
	gp --root "$R" uninstall --only driver
	assert_status 0
	assert_stdout_has "container_toolkit: skipped - excluded by --only/--skip"
	assert_unchanged "$R" before-run var/log/gpuprov.log var/lib/gpuprov/lock
}

@test "uninstall: removes what gpuprov added, exactly as planned: files, dpkg status and holds as before the first install" {
	uninstall_matches_plan
	assert_status 0
	state "$R" > "$BATS_TEST_TMPDIR/after.state"
	diff -u "$BATS_FILE_TMPDIR/before.state" "$BATS_TEST_TMPDIR/after.state" ||
		fail "the root differs from before the install (diff above: - before, + after)"
	gp --root "$R" --json history
	JSON=$BATS_TEST_TMPDIR/h.json
	printf '%s\n' "$output" > "$JSON"
	jeq '[e["result"] for e in d["entries"]]' '["uninstalled", "completed"]'
	jeq '[e["current"] for e in d["entries"]]' '[false, false]'
	# Nothing is left to undo.
	gp --root "$R" uninstall
	assert_status 0
	assert_stdout_has "container_toolkit: satisfied - gpuprov recorded nothing of it"
}

@test "uninstall: packages there before gpuprov are kept; the upgraded one is listed as not undoable, the hold gpuprov set is released" {
	# Before gpuprov: libnvidia-container1 at 1.17.7-1, the base package
	# at the profile's 1.17.8-1, from the repository as a local source.
	cp "$AR/key.asc" "$R/tmp/local.asc"
	echo "deb [signed-by=/tmp/local.asc] file:///srv/ctk-repo/ /" > "$R/etc/apt/sources.list.d/local.list"
	chroot "$R" apt-get -q update > /dev/null
	chroot "$R" apt-get -y -q install --no-install-recommends libnvidia-container1=1.17.7-1 \
		nvidia-container-toolkit-base=1.17.8-1 > /dev/null 2>&1
	rm "$R/etc/apt/sources.list.d/local.list" "$R/tmp/local.asc"
	state "$R" > "$BATS_TEST_TMPDIR/before.state"
	ctk_profile 1.17.8-1
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(dpkg_status "$R" libnvidia-container1)" = "hold ok installed 1.17.8-1" ] ||
		fail "libnvidia-container1: $(dpkg_status "$R" libnvidia-container1)"
	gp --root "$R" uninstall --dry-run
	assert_status 0
	assert_stdout_has "cannot undo (kept as they are now): libnvidia-container1 (1.17.7-1 before gpuprov, now 1.17.8-1)"
	uninstall_matches_plan
	assert_status 0
	[ "$(dpkg_status "$R" libnvidia-container1)" = "install ok installed 1.17.8-1" ] ||
		fail "libnvidia-container1: $(dpkg_status "$R" libnvidia-container1)"
	[ "$(dpkg_status "$R" nvidia-container-toolkit-base)" = "install ok installed 1.17.8-1" ] ||
		fail "nvidia-container-toolkit-base: $(dpkg_status "$R" nvidia-container-toolkit-base)"
	# Everything else as before: the upgraded package (its version, its
	# files) is the one difference.
	grep -v '/usr/share/doc/libnvidia-container1/' "$BATS_TEST_TMPDIR/before.state" > "$BATS_TEST_TMPDIR/before.kept"
	state "$R" | grep -v '/usr/share/doc/libnvidia-container1/' |
		sed 's/^libnvidia-container1 install ok installed 1.17.8-1$/libnvidia-container1 install ok installed 1.17.7-1/' \
		> "$BATS_TEST_TMPDIR/after.state"
	diff -u "$BATS_TEST_TMPDIR/before.kept" "$BATS_TEST_TMPDIR/after.state" ||
		fail "the root differs from before the install (diff above: - before, + after)"
	gp --root "$R" history
	[[ "${lines[0]}" == "    "*"uninstalled"* ]] || fail "newest: ${lines[0]}"
}

# operator_deb NAME DEPENDS: the operator's own package NAME, depending on
# DEPENDS, built with dpkg-deb and installed with dpkg in the root.
operator_deb() {
	local d=$R/tmp/$1
	mkdir -p "$d/DEBIAN" "$d/usr/share/doc/$1"
	printf 'Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: site <ops@example.org>\nDepends: %s\nDescription: the site'"'"'s own\n' \
		"$1" "$2" > "$d/DEBIAN/control"
	echo "$1" > "$d/usr/share/doc/$1/README"
	chroot "$R" dpkg-deb --build "/tmp/$1" "/tmp/$1.deb" > /dev/null
	chroot "$R" dpkg -i "/tmp/$1.deb" > /dev/null
	rm -rf "$d" "$d.deb"
}

@test "uninstall: a package of the operator's that depends on one gpuprov installed blocks the removal, naming it, and nothing changes" {
	# The packages there before (the test above) stay at their version.
	ctk_profile 1.17.8-1
	state "$R" > "$BATS_TEST_TMPDIR/before.state"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	# Theirs: one on gpuprov's tools (an alternative apt cannot fall back
	# on), one on theirs (taken along too).
	operator_deb site-gpu-monitor "libnvidia-container-tools (>= 1.17) | site-absent"
	operator_deb site-dashboard "site-gpu-monitor"
	snapshot "$R" installed var/log/gpuprov.log var/lib/gpuprov/lock
	gp --root "$R" uninstall --dry-run
	assert_status 4
	assert_stdout_has "container_toolkit: blocked - nothing changed: removing "
	assert_stdout_has "would take along site-gpu-monitor, site-dashboard, which gpuprov did not install and which depend on them"
	assert_stdout_has "remove them first (apt-get remove site-gpu-monitor, site-dashboard), or keep this stage (--skip container_toolkit)"
	gp --root "$R" uninstall
	assert_status 4
	assert_stdout_has "container_toolkit: blocked - nothing changed"
	assert_unchanged "$R" installed var/log/gpuprov.log var/lib/gpuprov/lock
	[ "$(dpkg_status "$R" site-dashboard)" = "install ok installed 1.0" ] || fail "site-dashboard: $(dpkg_status "$R" site-dashboard)"
	# The operator removes theirs: the uninstall goes ahead, as planned.
	chroot "$R" dpkg -r site-dashboard site-gpu-monitor > /dev/null
	uninstall_matches_plan
	assert_status 0
	state "$R" | grep -v '/usr/share/doc/site-' > "$BATS_TEST_TMPDIR/after.state"
	diff -u "$BATS_TEST_TMPDIR/before.state" "$BATS_TEST_TMPDIR/after.state" ||
		fail "the root differs from before the install (diff above: - before, + after)"
}

@test "uninstall: the driver's packages go, and the reboot that unloads the module is asked for (stub root)" {
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --nouveau unloaded --pkg-stubs
	P=$BATS_TEST_TMPDIR/drv.json
	cat > "$P" <<'JSON'
{
  "name": "drv-test",
  "extends": "distro/ubuntu2204",
  "stages": { "driver": { "method": "apt", "branch": "535", "flavor": "server",
    "modules": "proprietary", "hold": true } }
}
JSON
	gp --root "$R" install --profile "$P"
	assert_status 5
	[ "$(dpkg_status_stub nvidia-driver-535-server)" = "hold ok installed" ] ||
		fail "not installed and held:" "$(cat "$R/var/lib/dpkg/status")"
	rm -f "$R/var/run/reboot-required" "$R/var/run/reboot-required.pkgs" "$R/run/reboot-required" "$R/run/reboot-required.pkgs"
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R"
	assert_status 5
	assert_stderr_has "reboot required (driver: the NVIDIA driver was removed; its kernel module stays loaded until a reboot)"
	! grep -q '^Package: nvidia' "$R/var/lib/dpkg/status" ||
		fail "driver packages left:" "$(cat "$R/var/lib/dpkg/status")"
	[ -e "$R/var/run/reboot-required" ] || fail "no /var/run/reboot-required"
	grep -qx nvidia-driver-535-server "$R/var/run/reboot-required.pkgs" ||
		fail "reboot-required.pkgs:" "$(cat "$R/var/run/reboot-required.pkgs")"
}

# files_and_links ROOT: the manifest of ROOT without directories and
# without gpuprov's journal, backups and log, the stub log, the linker
# cache (which ldconfig rewrites) and the initramfs image (the stub's
# rebuild is not the image mkroot.sh installed).
files_and_links() {
	manifest "$1" | awk '$2 != "d"' |
		grep -v '^\S* *\./\(var/lib/gpuprov\|var/log\|run\|var/run\|etc/ld\.so\.cache\|boot/initrd\.img-[^ ]*\)\( \|/\|$\)'
}

@test "uninstall: the nouveau blacklist and the linker path file go, then the initramfs is rebuilt and ldconfig runs, as planned (stub root)" {
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --nouveau unloaded --cuda
	files_and_links "$R" > "$BATS_TEST_TMPDIR/before"
	gp --root "$R" install --profile "$REPO_ROOT/profiles/a100-ubuntu2204.json" --only nouveau,env
	assert_status 0
	: > "$R/var/log/stub-commands.log"
	gp --root "$R" uninstall --dry-run
	assert_status 0
	assert_stdout_has "remove /etc/modprobe.d/blacklist-nouveau.conf"
	assert_stdout_has "run update-initramfs -u"
	assert_stdout_has "remove /etc/ld.so.conf.d/gpuprov-cuda.conf"
	assert_stdout_has "run ldconfig"
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R"
	assert_status 0
	[ "$(stub_log "$R")" = "$(printf '%s\n' '/sbin/ldconfig ' '/usr/sbin/update-initramfs -u')" ] ||
		fail "commands run:" "$(stub_log "$R")"
	# The initramfs image is rebuilt without the blacklist.
	! grep -q "blacklist nouveau" "$R"/boot/initrd.img-* ||
		fail "the initramfs still blacklists nouveau:" "$(cat "$R"/boot/initrd.img-*)"
	files_and_links "$R" > "$BATS_TEST_TMPDIR/after"
	diff -u "$BATS_TEST_TMPDIR/before" "$BATS_TEST_TMPDIR/after" ||
		fail "the root's files and links differ from before the install (diff above: - before, + after)"
}
