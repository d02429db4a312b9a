#!/usr/bin/env bats
# Debian 13 (trixie) with real apt 3: a debootstrapped trixie root
# (tests/fixtures/debroot.sh trixie, cached like the bookworm one) whose only
# apt source gpuprov writes, the stand-in NVIDIA repository of
# tests/fixtures/aptrepo.sh, in deb822 form (distro/debian13's
# apt_sources_format): apt must read the .sources file, verify the
# repository with the key it names and install from it; a rerun finds the
# repository configured and changes nothing.

load helpers

setup_file() {
	R=$BATS_FILE_TMPDIR/root
	AR=$BATS_FILE_TMPDIR/aptrepo
	export R AR
	file_apt_root "$R" "$AR" trixie || return 0
	mkdir -p "$R/srv"
	cp -a "$AR/repo" "$R/srv/repo"
}

setup() {
	[ ! -e "$BATS_FILE_TMPDIR/skip" ] || skip "$(cat "$BATS_FILE_TMPDIR/skip")"
	start_https_server
	cp "$AR/cuda-keyring_1.1-1_all.deb" "$WWW/"
	P=$BATS_TEST_TMPDIR/p.json
	cat > "$P" <<JSON
{
  "name": "trixie-test",
  "extends": "distro/debian13",
  "distro": {
    "keyring_url": "https://127.0.0.1:$PORT/cuda-keyring_1.1-1_all.deb",
    "keyring_sha256": "$(sha256sum < "$AR/cuda-keyring_1.1-1_all.deb" | cut -d' ' -f1)",
    "keyring_fingerprint": "$(cat "$AR/key.fpr")",
    "repo_url": "file:///srv/repo/"
  },
  "stages": { "cuda": { "method": "repo", "version": "12.4" } }
}
JSON
}

teardown() {
	stop_https_server
}

@test "apt trixie: the repository as a deb822 .sources file that real apt 3 reads, verifies and installs from; a rerun changes nothing" {
	grep -qx 'VERSION_CODENAME=trixie' "$R/etc/os-release" || fail "not a trixie root"
	chroot "$R" apt-get --version | head -1 | grep -q '^apt 3\.' ||
		fail "not apt 3: $(chroot "$R" apt-get --version | head -1)"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	local src=$R/etc/apt/sources.list.d/cuda-debian13-x86_64.sources
	[ -f "$src" ] || fail "no .sources file:" "$(ls "$R/etc/apt/sources.list.d")"
	[ ! -e "${src%.sources}.list" ] || fail "a .list file too"
	grep -qx 'Types: deb' "$src" && grep -qx 'URIs: file:///srv/repo/' "$src" &&
		grep -qx 'Suites: /' "$src" &&
		grep -qx 'Signed-By: /usr/share/keyrings/cuda-archive-keyring.gpg' "$src" ||
		fail "not the deb822 stanza:" "$(cat "$src")"
	[ "$(dpkg_status "$R" cuda-toolkit-12-4)" = "install ok installed 12.4.1-1" ]
	# apt itself lists the source from that file (and no other).
	run chroot "$R" apt-get indextargets --format '$(SITE) $(TARGET_OF)' 'Created-By: Packages'
	[ "$status" -eq 0 ] || fail "apt-get indextargets: $output"
	[[ $output == *"file:/srv/repo deb"* ]] || fail "apt does not see the repository:" "$output"
	snapshot "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	assert_stdout_has "cuda: satisfied"
	refute_stdout_has "apt-get"
	assert_unchanged "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json
}
