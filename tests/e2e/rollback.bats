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
# adds a package (a second CUDA toolkit) that the rollback removes. Stub
# roots (mkroot.sh): the files a newer install wrote put back (an
# operator's from its backup, gpuprov's own removed), the tree as after the
# older install; a rocky9 root with the dnf stub, which cannot answer the
# query of what the repositories offer, so a rollback that would install
# packages is refused. Real dnf's rollback is in dnf.bats. The rollback across driver branches
# (its reboot) is in upgrade.bats, on that file's root.

load helpers

setup_file() {
	ctk_apt_root
}

setup() {
	if [[ "$BATS_TEST_DESCRIPTION" == *"(dnf root)"* ]]; then
		require_root
		return 0
	fi
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
	# Only after a rollback do install and plan go on without --profile.
	gp --root "$R" install
	assert_status 2
	assert_stderr_has "install needs --profile NAME|PATH (only after a rollback does it go on without one"
	gp --root "$R" plan
	assert_status 2
	assert_stderr_has "plan needs --profile NAME|PATH"
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
	# And install goes on with it (what a resume after a rollback's reboot
	# runs, and the hints say), finding it done.
	gp --root "$R" install --only container_toolkit --ca-file "$CA"
	assert_status 0
	assert_stdout_has "container_toolkit: satisfied"
	# Done: a second rollback plan back to entry 1 changes nothing.
	gp --root "$R" rollback --to 1 --dry-run
	assert_status 0
	assert_stdout_has "rollback: satisfied - the packages, holds and files are as history entry 1 had them"
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

# files_tree ROOT: the manifest of ROOT (paths, modes, owners, sha256s)
# without gpuprov's journal, backups and log, the stub log, the linker cache
# (ldconfig rewrites it) and the initramfs image (the stub's rebuild).
files_tree() {
	manifest "$1" | grep -v '^\S* *\./\(var/lib/gpuprov\|var/log\|run\|var/run\|etc/ld\.so\.cache\|boot/initrd\.img-[^ ]*\)\( \|/\|$\)'
}

# files_rollback THEIRS: in a stub root, install A (the env stage), then B
# (nouveau too, and env's variable changed), then rollback as planned: the
# tree is as after A. THEIRS "yes": the root has an operator's nouveau
# file (mode 0640) that B replaces and the rollback restores from its
# backup; "no": B's file is new, in a directory B made, and the rollback
# removes both.
files_rollback() {
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --nouveau unloaded --cuda
	local mp=$R/etc/modprobe.d/blacklist-nouveau.conf
	if [ "$1" = yes ]; then
		printf 'options nouveau modeset=1 # the operator'"'"'s\n' > "$mp"
		chmod 0640 "$mp"
	else
		# B makes the directory too: the rollback removes it.
		rm -r "$R/etc/modprobe.d"
	fi
	local a=$BATS_TEST_TMPDIR/a.json b=$BATS_TEST_TMPDIR/b.json
	printf '%s\n' '{ "name": "files-a", "extends": "distro/ubuntu2204",' \
		'  "stages": { "env": { "vars": { "GPUPROV_TEST": "a" } } } }' > "$a"
	printf '%s\n' '{ "name": "files-b", "extends": "distro/ubuntu2204",' \
		'  "stages": { "nouveau": {}, "env": { "vars": { "GPUPROV_TEST": "b" } } } }' > "$b"
	gp --root "$R" install --profile "$a"
	assert_status 0
	files_tree "$R" > "$BATS_TEST_TMPDIR/a.tree"
	gp --root "$R" install --profile "$b"
	assert_status 0
	grep -qx 'blacklist nouveau' "$mp" || fail "B did not write $mp:" "$(cat "$mp")"
	grep -q "GPUPROV_TEST='b'" "$R/etc/profile.d/gpuprov-cuda.sh" || fail "B did not change the env script"
	gp --root "$R" rollback --dry-run
	assert_status 0
	if [ "$1" = yes ]; then
		assert_stdout_has "rollback: needed - back to history entry 1: restores /etc/modprobe.d/blacklist-nouveau.conf from /var/lib/gpuprov/backup/etc/modprobe.d/blacklist-nouveau.conf"
	else
		assert_stdout_has "rollback: needed - back to history entry 1: removes /etc/modprobe.d/blacklist-nouveau.conf; removes the directory it made since, /etc/modprobe.d"
		assert_stdout_line "      remove directory /etc/modprobe.d (0 entries, installed by gpuprov)"
	fi
	assert_stdout_has "run update-initramfs -u"
	assert_stdout_line "        +GPUPROV_TEST='a'"
	: > "$R/var/log/stub-commands.log"
	rollback_matches_plan
	assert_status 0
	files_tree "$R" > "$BATS_TEST_TMPDIR/after.tree"
	diff -u "$BATS_TEST_TMPDIR/a.tree" "$BATS_TEST_TMPDIR/after.tree" ||
		fail "the root's files differ from after install A (diff above: - A, + after the rollback)"
	# The initramfs is rebuilt without B's blacklist.
	grep -qx '/usr/sbin/update-initramfs -u' "$R/var/log/stub-commands.log" ||
		fail "no initramfs rebuild:" "$(cat "$R/var/log/stub-commands.log")"
	! grep -q "blacklist nouveau" "$R"/boot/initrd.img-* ||
		fail "the initramfs still blacklists nouveau"
	# The journal has B's file no more: done, a plan changes nothing.
	gp --root "$R" rollback --to 1 --dry-run
	assert_status 0
	assert_stdout_has "rollback: satisfied - the packages, holds and files are as history entry 1 had them"
}

@test "rollback: the operator's file the newer install replaced comes back from its backup (bytes and mode), the changed file is the entry's again, as planned (stub root)" {
	files_rollback yes
	[ "$(stat -c %a "$R/etc/modprobe.d/blacklist-nouveau.conf")" = 640 ] || fail "mode not restored"
}

@test "rollback: a file only the newer install wrote is removed, and the directory it made for it, as planned (stub root)" {
	files_rollback no
	[ ! -e "$R/etc/modprobe.d" ] || fail "B's directory is still there"
}

@test "rollback: on a dnf root where dnf cannot say which versions its repositories offer, a rollback that would install older packages is refused before any change, naming them (dnf root)" {
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --distro rocky9 --nouveau unloaded --pkg-stubs
	start_https_server
	local fpr ksha k=kernel-devel-5.14.0-362.8.1.el9_3.x86_64
	fpr=$(stand_in_key "$WWW/RPM-GPG-KEY-test")
	ksha=$(sha256sum < "$WWW/RPM-GPG-KEY-test" | cut -d' ' -f1)
	P=$BATS_TEST_TMPDIR/drv.json
	# dnf_profile NAME: the dnf driver of branch 580, held, as profile NAME.
	dnf_profile() {
		cat > "$P" <<JSON
{
  "name": "$1",
  "extends": "distro/rocky9",
  "distro": { "keyring_url": "https://127.0.0.1:$PORT/RPM-GPG-KEY-test",
              "keyring_sha256": "$ksha", "keyring_fingerprint": "$fpr" },
  "stages": { "driver": { "method": "dnf", "branch": "580", "modules": "open", "hold": true } }
}
JSON
	}
	dnf_profile dnf-a
	echo '* 3:580.95.05-1.el9' > "$R/var/lib/stub-pkg/candidates"
	rpmdb_write "$R/var/lib/stub-pkg/rpmdb.after" "nvidia-driver 3:580.95.05-1.el9" \
		"kmod-nvidia-open-dkms 3:580.95.05-1.el9" "$k 5.14.0-362.8.1.el9_3"
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	assert_status 5
	# dnf moved the driver on (an operator's dnf upgrade), then a second
	# profile is installed: entry 1 recorded 580.95.05.
	rm "$R/var/lib/rpm/rpmdb.sqlite"
	rpmdb_write "$R/var/lib/rpm/rpmdb.sqlite" "nvidia-driver 3:580.105.08-1.el9" \
		"kmod-nvidia-open-dkms 3:580.105.08-1.el9" "$k 5.14.0-362.8.1.el9_3"
	dnf_profile dnf-b
	gp --root "$R" --ca-file "$CA" install --profile "$P"
	[ "$status" -eq 0 ] || [ "$status" -eq 5 ] || { show_run; fail "second install failed"; }
	: > "$R/var/log/stub-commands.log"
	snapshot "$R" before var/log/gpuprov.log var/lib/gpuprov/lock
	gp --root "$R" rollback --dry-run
	assert_status 4
	assert_stdout_has "rollback: blocked - cannot roll back to history entry 1: it would install "
	assert_stdout_has "nvidia-driver=3:580.95.05-1.el9"
	gp --root "$R" rollback
	assert_status 4
	assert_stderr_has "and dnf could not say whether the repositories in its cache still offer these versions (dnf -C repoquery: "
	assert_stderr_has "nothing was changed"
	[ ! -s "$R/var/log/stub-commands.log" ] || fail "commands ran:" "$(cat "$R/var/log/stub-commands.log")"
	assert_unchanged "$R" before var/log/gpuprov.log var/lib/gpuprov/lock
}
