#!/usr/bin/env bats
# The Debian package (make deb: dist/mkdeb.sh, dist/debian/), built once per
# file into the file's temporary directory (nothing in the tree), then a
# second time as a higher version from the same compiled tree for the
# upgrade; checked with lintian and installed, upgraded, removed and purged
# with the real dpkg of the debootstrapped Debian 12 root (debroot.sh), its
# missing libraries from tests/fixtures/debdeps.sh.

load helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-300}

# A missing tool of the package build: a skip here, a failure under
# GPUPROV_REQUIRE_REAL (the CI runs, where make deps installed them).
need_tool() {
	command -v "$1" > /dev/null 2>&1 && return 0
	if [ -n "${GPUPROV_REQUIRE_REAL:-}" ] && [ "$GPUPROV_REQUIRE_REAL" != 0 ]; then
		fail "$1 is not installed (make deps-deb) and GPUPROV_REQUIRE_REAL is set"
	fi
	skip "$1 is not installed (make deps-deb)"
}

setup_file() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg runs chrooted into a Debian root)"
	local t
	for t in dpkg-buildpackage dh lintian; do need_tool "$t"; done
	VERSION=$(sed -n 's/^VERSION := //p' "$REPO_ROOT/Makefile")
	local out=$BATS_FILE_TMPDIR/deb rc=0
	sh "$REPO_ROOT/dist/mkdeb.sh" "$out" "$VERSION" > "$BATS_FILE_TMPDIR/build1.log" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] || fail "make deb failed ($rc):" "$(tail -30 "$BATS_FILE_TMPDIR/build1.log")"
	DEB1=$(tail -1 "$BATS_FILE_TMPDIR/build1.log")
	# The upgrade's package: a changelog entry of a higher version.
	V2=$VERSION+test2
	sh "$REPO_ROOT/dist/mkdeb.sh" "$out" "$VERSION" "$V2" > "$BATS_FILE_TMPDIR/build2.log" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] || fail "the second build failed ($rc):" "$(tail -30 "$BATS_FILE_TMPDIR/build2.log")"
	DEB2=$(tail -1 "$BATS_FILE_TMPDIR/build2.log")
	[ -s "$DEB1" ] && [ -s "$DEB2" ] || fail "no packages: $DEB1 $DEB2"
	BUILD_TREE=$out/gpuprov-$VERSION
	export VERSION V2 DEB1 DEB2 BUILD_TREE
}

# R: a fresh Debian root with the package's missing dependencies in
# $R/tmp/deps and both packages in $R/tmp.
setup_deb_root() {
	R=$BATS_TEST_TMPDIR/root
	debroot "$R"
	local rc=0 deps
	deps=$(sh "$REPO_ROOT/tests/fixtures/debdeps.sh" "$R" "$DEB1" 2> "$BATS_TEST_TMPDIR/debdeps.err") || rc=$?
	[ "$rc" -eq 77 ] && skip "$(tail -1 "$BATS_TEST_TMPDIR/debdeps.err")"
	[ "$rc" -eq 0 ] || fail "debdeps.sh failed ($rc):" "$(cat "$BATS_TEST_TMPDIR/debdeps.err")"
	mkdir -p "$R/tmp/deps"
	cp "$deps"/*.deb "$R/tmp/deps/"
	cp "$DEB1" "$R/tmp/gpuprov-1.deb"
	cp "$DEB2" "$R/tmp/gpuprov-2.deb"
}

# in_root CMD...: CMD chrooted into $R, with bats' run.
in_root() {
	run --separate-stderr chroot "$R" "$@"
}

install_deb() {
	in_root sh -c 'dpkg -i /tmp/deps/*.deb "$1"' _ "$1"
	assert_status 0
}

@test "deb: lintian reports no errors, and each of its warnings is accepted in the README" {
	run lintian "$DEB1"
	[[ $output != *"E: "* ]] || { show_run; fail "lintian reports errors"; }
	local tag
	for tag in $(grep -oE '^W: gpuprov: [a-z0-9-]+' <<<"$output" | cut -d' ' -f3 | sort -u); do
		grep -q -- "\`$tag\`" "$REPO_ROOT/README.md" ||
			fail "lintian warns $tag, which README.md does not list with its reason" "$output"
	done
}

@test "deb: the package holds the binary in /usr/sbin, the catalogue, the site directory, man pages, completion; hardened" {
	run dpkg-deb -f "$DEB1" Version Architecture Depends
	assert_stdout_has "Version: $VERSION"
	assert_stdout_has "libcurl4"
	run dpkg-deb -c "$DEB1"
	local f
	for f in ./usr/sbin/gpuprov ./usr/share/gpuprov/profiles/a100-ubuntu2204.json \
		./usr/share/gpuprov/profiles/distro/debian12.json ./etc/gpuprov/profiles/README \
		./usr/share/man/man8/gpuprov.8.gz ./usr/share/man/man5/gpuprov-profile.5.gz \
		./usr/share/bash-completion/completions/gpuprov ./usr/share/doc/gpuprov/copyright; do
		assert_stdout_has " $f"
	done
	[[ $output != *" ./usr/bin/"* ]] || fail "a file in /usr/bin:" "$output"
	local x=$BATS_TEST_TMPDIR/x
	dpkg-deb -R "$DEB1" "$x"
	grep -qx /etc/gpuprov/profiles/README "$x/DEBIAN/conffiles"
	# dpkg-buildflags' hardening=+all: full RELRO, PIE, fortified calls.
	readelf -d "$x/usr/sbin/gpuprov" | grep -q 'FLAGS.*BIND_NOW' || fail "not linked with -z now"
	readelf -l "$x/usr/sbin/gpuprov" | grep -q GNU_RELRO || fail "no RELRO"
	readelf -h "$x/usr/sbin/gpuprov" | grep -q 'Type:.*DYN' || fail "not PIE"
	readelf -W --dyn-syms "$x/usr/sbin/gpuprov" | grep -q '__[a-z]*_chk' || fail "no _FORTIFY_SOURCE"
	# The build tree is not in the profile search path (SRCDIR=).
	! grep -aq "$BUILD_TREE/profiles" "$x/usr/sbin/gpuprov" ||
		fail "the binary searches the build tree's profiles/"
	# Units, when make install ships them: the verify timer enabled by the
	# package, any other (the resume unit) never enabled nor started.
	for f in "$x"/lib/systemd/system/* "$x"/usr/lib/systemd/system/*; do
		[ -e "$f" ] || continue
		[[ $f == "$x/lib/systemd/system/"* ]] ||
			fail "$f: dh_installsystemd of Debian 12 handles /lib/systemd/system only"
		local unit=${f##*/} exe
		# The gpuprov a unit runs is the package's (in /usr/sbin).
		for exe in $(sed -n 's/^Exec[A-Za-z]*=[-+!@:]*\([^ ]*\).*/\1/p' "$f"); do
			[[ $exe != */gpuprov || -x $x$exe ]] ||
				fail "$unit runs $exe, which is not in the package (/usr/sbin/gpuprov)"
		done
		if [ "$unit" = gpuprov-verify.timer ]; then
			grep -qF "deb-systemd-helper enable '$unit'" "$x/DEBIAN/postinst" &&
				grep -qF "deb-systemd-invoke \$_dh_action '$unit'" "$x/DEBIAN/postinst" ||
				fail "$unit is not enabled and started" "$(cat "$x/DEBIAN/postinst")"
		else
			# (dh_installsystemd re-enables a --no-enable unit only where
			# the administrator had enabled it; the root test below
			# checks that a fresh install enables nothing else.)
			! grep -F "'$unit'" "$x/DEBIAN/postinst" | grep -q 'deb-systemd-invoke' ||
				fail "$unit is started by the package" "$(cat "$x/DEBIAN/postinst")"
		fi
	done
}

@test "deb: dpkg installs it into a Debian root, where gpuprov finds its catalogue and site profiles, and its man page renders" {
	require_root
	setup_deb_root
	install_deb /tmp/gpuprov-1.deb
	in_root gpuprov --version
	assert_status 0
	assert_stdout_has "gpuprov $VERSION"
	in_root gpuprov profiles list --names
	assert_status 0
	grep -qx a100-ubuntu2204 <<<"$output" || fail "no catalogue: $output"
	grep -qx distro/debian12 <<<"$output"
	# A site profile in /etc/gpuprov/profiles hides the catalogue's.
	printf '{ "name": "a100-ubuntu2204", "description": "site copy" }\n' \
		> "$R/etc/gpuprov/profiles/a100-ubuntu2204.json"
	in_root gpuprov --json profiles list
	assert_status 0
	"$PYTHON" -c '
import json, sys
paths = {p["name"]: p["path"] for p in json.load(sys.stdin)}
assert paths["a100-ubuntu2204"] == "/etc/gpuprov/profiles/a100-ubuntu2204.json", paths
assert paths["h100-ubuntu2204"] == "/usr/share/gpuprov/profiles/h100-ubuntu2204.json", paths
' <<<"$output" || fail "profiles list: not the site profile, then the catalogue"
	in_root gpuprov profiles show nosuch
	assert_status 65
	assert_stderr_has "searched /etc/gpuprov/profiles, /usr/share/gpuprov/profiles;"
	[ -f "$R/usr/share/bash-completion/completions/gpuprov" ]
	if chroot "$R" sh -c 'command -v man' > /dev/null; then
		in_root man -P cat gpuprov
	else
		# minbase has no man-db: the installed page, rendered on the host.
		run --separate-stderr env MANWIDTH=80 man -P cat -l "$R/usr/share/man/man8/gpuprov.8.gz"
	fi
	assert_status 0
	assert_stdout_has "profiles list"
	[ -z "$stderr" ] || { show_run; fail "man warns"; }
	# Units shipped: the timer enabled, nothing else.
	if [ -e "$R/lib/systemd/system/gpuprov-verify.timer" ]; then
		ls "$R"/etc/systemd/system/*.wants/gpuprov-verify.timer > /dev/null ||
			fail "gpuprov-verify.timer is not enabled"
	fi
	run find "$R/etc/systemd/system" -name 'gpuprov*' ! -name gpuprov-verify.timer
	[ -z "$output" ] || fail "enabled by the package:" "$output"
}

@test "deb: an upgrade from the previous build keeps site profiles; purge then leaves only them" {
	require_root
	setup_deb_root
	install_deb /tmp/gpuprov-1.deb
	printf '{ "name": "site-x", "extends": "distro/debian12" }\n' > "$R/etc/gpuprov/profiles/site-x.json"
	in_root dpkg -i /tmp/gpuprov-2.deb
	assert_status 0
	[ "$(dpkg_status "$R" gpuprov)" = "install ok installed $V2" ] ||
		fail "after the upgrade: $(dpkg_status "$R" gpuprov)"
	# Every file of the new version is there; the site profile is kept.
	in_root sh -c 'dpkg -L gpuprov | while read -r f; do [ -e "$f" ] || echo "missing $f"; done'
	assert_status 0
	[ -z "$output" ] || fail "$output"
	in_root gpuprov profiles list --names
	grep -qx site-x <<<"$output" || fail "no site-x after the upgrade: $output"
	grep -qx a100-ubuntu2204 <<<"$output"
	in_root dpkg --purge gpuprov
	assert_status 0
	# dpkg keeps what it did not install, and says so.
	assert_stderr_has "/etc/gpuprov/profiles"
	run --separate-stderr find "$R/etc/gpuprov" "$R/usr/share/gpuprov" "$R/usr/sbin/gpuprov"
	[ "$output" = "$R/etc/gpuprov
$R/etc/gpuprov/profiles
$R/etc/gpuprov/profiles/site-x.json" ] || fail "left after purge:" "$output"
}

@test "deb: remove keeps the conffile, purge removes /etc/gpuprov and the download cache, not the journal" {
	require_root
	setup_deb_root
	install_deb /tmp/gpuprov-1.deb
	mkdir -p "$R/var/cache/gpuprov" "$R/var/lib/gpuprov"
	echo x > "$R/var/cache/gpuprov/artifact"
	echo '{}' > "$R/var/lib/gpuprov/state.json"
	in_root dpkg --remove gpuprov
	assert_status 0
	[ ! -e "$R/usr/sbin/gpuprov" ] && [ ! -e "$R/usr/share/gpuprov" ] || fail "files left after remove"
	[ -f "$R/etc/gpuprov/profiles/README" ] || fail "remove took the conffile"
	[ "$(dpkg_status "$R" gpuprov)" = "deinstall ok config-files $VERSION" ]
	in_root dpkg --purge gpuprov
	assert_status 0
	[ ! -e "$R/etc/gpuprov" ] || fail "/etc/gpuprov left after purge: $(find "$R/etc/gpuprov")"
	[ ! -e "$R/var/cache/gpuprov" ] || fail "the download cache is left after purge"
	[ -f "$R/var/lib/gpuprov/state.json" ] || fail "purge took the journal"
	run chroot "$R" dpkg-query -W gpuprov
	[ "$status" -ne 0 ] || fail "still known to dpkg: $output"
	run find "$R/usr/share/doc/gpuprov" "$R/usr/share/man/man8/gpuprov.8.gz" \
		"$R/usr/share/bash-completion/completions/gpuprov"
	[ "$status" -ne 0 ] && [ -z "$(find "$R/usr" -name 'gpuprov*' 2> /dev/null)" ] ||
		fail "files left: $(find "$R/usr" -name 'gpuprov*')"
}
