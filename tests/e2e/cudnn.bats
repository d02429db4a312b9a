#!/usr/bin/env bats
# Stage cudnn end to end: a cuDNN-shaped .tar.xz built here, served over HTTPS
# by tests/fixtures/httpd.py on 127.0.0.1 (its CA passed with --ca-file), into
# a fixture root whose ldconfig stub writes a binary /etc/ld.so.cache and
# answers `ldconfig -p`.

load helpers

BASE=usr/local/cuda-11.8
# The cuDNN version the tarball and profile helpers use (helpers.bash).
VER=8.9.7.29

setup() {
	setup_cudnn_root
}

teardown() {
	stop_https_server
}

requests() {
	grep -c '^GET' "$BATS_TEST_TMPDIR/httpd.log" || true
}


# The profile now asks for cuDNN 8.9.8.15, served as cudnn-new.tar.xz.
profile_for_new_version() {
	VER=8.9.8.15
	make_tarball "$WWW/cudnn-new.tar.xz"
	sha=$(sha256sum < "$WWW/cudnn-new.tar.xz" | cut -d' ' -f1)
	write_profile "$sha" "https://127.0.0.1:$PORT/cudnn-new.tar.xz"
}
@test "cudnn: dry-run lists download and destination, changes nothing, downloads nothing" {
	snapshot "$R" before
	gp --root "$R" --ca-file "$CA" plan --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "cudnn: needed"
	assert_stdout_has "download https://127.0.0.1:$PORT/cudnn.tar.xz"
	assert_stdout_has "sha256 $SHA"
	assert_stdout_has "into the cache at /var/cache/gpuprov/$SHA"
	assert_stdout_has "extract /var/cache/gpuprov/$SHA into /$BASE/cudnn-8.9.7.29 (new directory)"
	assert_stdout_has "run ldconfig"
	assert_unchanged "$R" before
	assert_untouched_by_gpuprov "$R"
	[ ! -e "$R/var/cache/gpuprov" ] || fail "the cache directory was created"
	[ "$(requests)" = 0 ] || fail "the dry run used the network"
	gp --root "$R" --ca-file "$CA" --json plan --profile "$P" --only cudnn
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/plan.json"
	JSON=$BATS_TEST_TMPDIR/plan.json
	jeq 'd["stages"][5]["effects"][0]["type"]' download
	jeq 'd["stages"][5]["effects"][0]["cached"]' false
	jeq 'd["stages"][5]["effects"][0]["sha256"]' "$SHA"
}

@test "cudnn: the plan's effects are the run's, the links as one rule (their names are in the archive), also for a version change" {
	gp --root "$R" --ca-file "$CA" plan --profile "$P" --only cudnn
	assert_stdout_has "symlink, by rule: each cudnn*.h of /$BASE/cudnn-8.9.7.29/include as /$BASE/include/NAME -> ../cudnn-8.9.7.29/include/NAME, and each libcudnn* of /$BASE/cudnn-8.9.7.29/lib as /$BASE/lib64/NAME -> ../cudnn-8.9.7.29/lib/NAME (the names the archive holds)"
	assert_plan_matches_run "$R" --ca-file "$CA" --profile "$P" --only cudnn
	assert_status 0
	[ "$(readlink "$R/$BASE/lib64/libcudnn.so.8")" = ../cudnn-8.9.7.29/lib/libcudnn.so.8 ] ||
		fail "lib64 link missing"
	JSON=$BATS_TEST_TMPDIR/plan-vs-run/run.json
	jeq '[e["makes"] for e in d["stages"][5]["effects"] if e["type"] == "rule"]' '["symlink"]'
	# A version change: every link into the old version goes first (the
	# plan lists each), then the new version's are made.
	profile_for_new_version
	assert_plan_matches_run "$R" --ca-file "$CA" --profile "$P" --only cudnn
	assert_status 0
	[ "$(readlink "$R/$BASE/lib64/libcudnn.so.8")" = ../cudnn-8.9.8.15/lib/libcudnn.so.8 ] ||
		fail "libcudnn.so.8 not re-pointed"
}

@test "cudnn: install downloads, extracts, links, runs ldconfig; rerun satisfied; verify passes" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	[ "$(requests)" = 1 ] || fail "expected one request, got $(requests)"
	d=$R/$BASE/cudnn-8.9.7.29
	[ -f "$d/include/cudnn_version.h" ] && [ -f "$d/lib/libcudnn.so.8.9.7" ] &&
		[ "$(readlink "$d/lib/libcudnn.so.8")" = libcudnn.so.8.9.7 ] ||
		fail "not extracted: $(find "$d")"
	[ "$(readlink "$R/$BASE/lib64/libcudnn.so.8")" = ../cudnn-8.9.7.29/lib/libcudnn.so.8 ] ||
		fail "lib64 link missing"
	[ -f "$R/$BASE/include/cudnn_version.h" ] || fail "include link missing"
	[ "$(stub_log "$R")" = "/sbin/ldconfig " ] || fail "commands: $(stub_log "$R")"
	assert_journal_true "$R"
	journal_files "$R/var/lib/gpuprov/state.json" | grep -q "cudnn-8.9.7.29/lib/libcudnn.so.8.9.7" ||
		fail "files not journaled"
	snapshot "$R" after var/log/gpuprov.log var/lib/gpuprov/state.json
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "cudnn: satisfied"
	[ "$(requests)" = 1 ] || fail "the second install downloaded again"
	[ "$(stub_log "$R")" = "/sbin/ldconfig " ] || fail "commands: $(stub_log "$R")"
	assert_unchanged "$R" after var/log/gpuprov.log var/lib/gpuprov/state.json
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "libcudnn.so.8 => /$BASE/lib64/libcudnn.so.8"
}

@test "cudnn: wrong sha256 fails naming both hashes, installs nothing" {
	bad=0000000000000000000000000000000000000000000000000000000000000000
	write_profile "$bad"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 1
	assert_stderr_has "$bad"
	assert_stderr_has "$SHA"
	[ ! -e "$R/$BASE/cudnn-8.9.7.29" ] || fail "destination created"
	[ -z "$(ls -A "$R/$BASE/lib64")" ] || fail "lib64 changed"
	[ -z "$(stub_log "$R")" ] || fail "a command ran"
}

@test "cudnn: --offline fails at once with an empty cache, works once cached" {
	gp --root "$R" --ca-file "$CA" --offline install --profile "$P" --only cudnn
	assert_status 1
	assert_stderr_has "cudnn 8.9.7.29"
	[ "$(requests)" = 0 ] || fail "offline used the network"
	[ ! -e "$R/$BASE/cudnn-8.9.7.29" ] || fail "destination created"
	# Fill the cache, then reinstall from it alone.
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	rm -rf "$R/$BASE/cudnn-8.9.7.29"
	gp --root "$R" --offline install --profile "$P" --only cudnn
	assert_status 0
	[ "$(requests)" = 1 ] || fail "offline used the network"
	[ -f "$R/$BASE/cudnn-8.9.7.29/include/cudnn_version.h" ] || fail "not reinstalled"
}

@test "cudnn: a symlink leaving the destination is refused, nothing installed" {
	make_tarball "$WWW/evil.tar.xz" evil
	sha=$(sha256sum < "$WWW/evil.tar.xz" | cut -d' ' -f1)
	write_profile "$sha" "https://127.0.0.1:$PORT/evil.tar.xz"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 1
	assert_stderr_has "libevil.so"
	[ ! -e "$R/$BASE/cudnn-8.9.7.29" ] || fail "destination created"
	[ -z "$(ls -A "$R/$BASE/lib64")" ] || fail "lib64 changed"
	[ -z "$(stub_log "$R")" ] || fail "a command ran"
}

@test "cudnn: no sha256 in the profile blocks (no manifest fallback), apt blocks cuDNN 8" {
	P=$BATS_TEST_TMPDIR/cudnn-nosha.json
	cat > "$P" <<-JSON
	{ "name": "cudnn-nosha", "extends": "distro/ubuntu2204",
	  "stages": { "cuda": { "method": "repo", "version": "11.8", "path": "/$BASE" },
	              "cudnn": { "method": "tarball", "version": "8.9.7.29", "cuda": "11" } } }
	JSON
	gp --root "$R" plan --profile "$P" --only cudnn
	assert_status 4
	assert_stdout_has "cudnn: blocked - stages.cudnn.sha256 is not set"
	sed -i 's/"tarball"/"apt"/' "$P"
	gp --root "$R" plan --profile "$P" --only cudnn
	assert_status 4
	assert_stdout_has "use method tarball for cuDNN 8"
}

@test "cudnn: an http:// URL without allow_insecure_http is refused at profile load" {
	write_profile "$SHA" "http://127.0.0.1:$PORT/cudnn.tar.xz"
	gp --root "$R" plan --profile "$P" --only cudnn
	assert_status 65
	assert_stderr_has "allow_insecure_http"
}

@test "cudnn: a version change re-points the links, removes the old ones and the old directory, plans it" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	old=$R/$BASE/cudnn-8.9.7.29
	profile_for_new_version
	snapshot "$R" before
	gp --root "$R" --ca-file "$CA" plan --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "says cuDNN 8.9.7; the profile wants 8.9.8.15"
	assert_stdout_has "the old /$BASE/cudnn-8.9.7.29 goes"
	assert_stdout_has "remove directory /$BASE/cudnn-8.9.7.29 (6 entries, installed by gpuprov)"
	assert_stdout_has "removes /$BASE/cudnn-8.9.7.29/lib/libcudnn.so.8.9.7"
	assert_stdout_has "$sha into /$BASE/cudnn-8.9.8.15 (new directory)"
	assert_stdout_has "remove link /$BASE/lib64/libcudnn.so.8.9.7 (-> ../cudnn-8.9.7.29/"
	assert_unchanged "$R" before
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	l=$R/$BASE/lib64 n=../cudnn-8.9.8.15/lib
	[ "$(readlink "$l/libcudnn.so.8")" = $n/libcudnn.so.8 ] ||
		fail "libcudnn.so.8 not re-pointed"
	[ "$(readlink "$l/libcudnn.so.8.9.8")" = $n/libcudnn.so.8.9.8 ] ||
		fail "libcudnn.so.8.9.8 not linked"
	[ ! -e "$l/libcudnn.so.8.9.7" ] && [ ! -L "$l/libcudnn.so.8.9.7" ] ||
		fail "the old library's link is still there"
	into_old=$(find "$R/$BASE/include" "$R/$BASE/lib64" -lname '*cudnn-8.9.7.29*')
	[ -z "$into_old" ] || fail "links into the old version: $into_old"
	dangling=$(find "$R/$BASE/include" "$R/$BASE/lib64" -xtype l)
	[ -z "$dangling" ] || fail "dangling links: $dangling"
	assert_journal_true "$R"
	# The journal keeps no live entry for a removed link (a removal record,
	# sha256 null; the links made again point at the new version) and no
	# record of the old directory, which is gone. A link is removed as a
	# link: nothing behind it is copied into the backup tree.
	[ ! -e "$R/var/lib/gpuprov/backup/$BASE/lib64" ] ||
		fail "a removed link's target was backed up:" "$(find "$R/var/lib/gpuprov/backup")"
	live=$(journal_files "$R/var/lib/gpuprov/state.json" | grep -v ' null$' |
		grep -v ' link:\.\./cudnn-8\.9\.8\.15/' | grep -E "^/$BASE/(include|lib64)/" || true)
	[ -z "$live" ] || fail "the journal still records old links: $live"
	journal_files "$R/var/lib/gpuprov/state.json" |
		grep -q "cudnn-8.9.8.15/lib/libcudnn.so.8.9.8 [0-9a-f]" ||
		fail "new files not journaled"
	[ ! -e "$old" ] || fail "the old directory is still there: $(find "$old")"
	! journal_files "$R/var/lib/gpuprov/state.json" | grep -q "cudnn-8.9.7.29" ||
		fail "the journal still records the old directory"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "cudnn: satisfied"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "libcudnn.so.8 => /$BASE/lib64/libcudnn.so.8"
	assert_stdout_has "says 8.9.8"
}

@test "cudnn: verify fails on a missing soname link; install repairs it" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	rm "$R/$BASE/lib64/libcudnn.so.8"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 3
	assert_stdout_has "/$BASE/lib64/libcudnn.so.8 is missing or a broken link"
	assert_stdout_has "'gpuprov install --profile $P --only cudnn --root "
	gp --root "$R" plan --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "the link /$BASE/lib64/libcudnn.so.8 is missing or wrong"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
}

@test "cudnn: verify fails on a missing library; install repairs it" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	rm "$R/$BASE/cudnn-8.9.7.29/lib/libcudnn.so.8.9.7"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 3
	assert_stdout_has "/$BASE/lib64/libcudnn.so.8 is missing or a broken link"
	gp --root "$R" plan --profile "$P" --only cudnn
	assert_stdout_has \
		"libcudnn.so.8.9.7 is missing or changed since gpuprov installed it"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	[ "$(requests)" = 1 ] || fail "the repair downloaded again"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
}

@test "cudnn: verify fails on a header of another version; install repairs it" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	h=$R/$BASE/include/cudnn_version.h
	sed -i --follow-symlinks 's/CUDNN_PATCHLEVEL 7/CUDNN_PATCHLEVEL 6/' "$h"
	[ -L "$h" ] || fail "the edit replaced the link"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 3
	assert_stdout_has "cudnn_version.h says 8.9.6; the profile wants 8.9.7"
	assert_stdout_has "'gpuprov install --profile $P --only cudnn --root "
	gp --root "$R" plan --profile "$P" --only cudnn
	assert_stdout_has "says cuDNN 8.9.6; the profile wants 8.9.7.29"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	grep -q 'CUDNN_PATCHLEVEL 7' "$h" || fail "header not repaired"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
	gp --root "$R" plan --profile "$P" --only cudnn
	assert_stdout_has "cudnn: satisfied"
}

@test "cudnn: a version change refuses to remove an old directory holding a file gpuprov did not install" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	old=$R/$BASE/cudnn-8.9.7.29
	echo "operator notes" > "$old/NOTES"
	profile_for_new_version
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 1
	assert_stderr_has "cudnn: will not remove /$BASE/cudnn-8.9.7.29: it holds a file gpuprov did not install: /$BASE/cudnn-8.9.7.29/NOTES; move that file away"
	[ "$(cat "$old/NOTES")" = "operator notes" ] || fail "the operator's file was touched"
	[ -f "$old/lib/libcudnn.so.8.9.7" ] || fail "the old directory was partly removed"
	assert_journal_true "$R"
	rm "$old/NOTES"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	[ ! -e "$old" ] || fail "the old directory is still there"
}

# files ROOT: ROOT's manifest without what a run leaves besides its effects
# (gpuprov's journal and backups, the logs, the download cache) and the
# stub ldconfig's cache.
files() {
	manifest "$1" | awk '{
		p = (length($1) == 64 && $1 ~ /^[0-9a-f]+$/) ? $2 : $1
		if (p ~ /^\.\/(var\/lib\/gpuprov|var\/log|var\/cache|etc\/ld\.so\.cache)(\/|$)/) next
		print
	}'
}

@test "cudnn: uninstall after a version change removes the new tree and its links as planned: the tree is as before the first install" {
	files "$R" > "$BATS_TEST_TMPDIR/before.files"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	profile_for_new_version
	assert_plan_matches_run "$R" --ca-file "$CA" --profile "$P" --only cudnn
	assert_status 0
	[ ! -e "$R/$BASE/cudnn-8.9.7.29" ] || fail "the old directory is still there"
	[ "$(readlink "$R/$BASE/lib64/libcudnn.so.8")" = ../cudnn-8.9.8.15/lib/libcudnn.so.8 ]
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R" --only cudnn
	assert_status 0
	files "$R" > "$BATS_TEST_TMPDIR/after.files"
	diff -u "$BATS_TEST_TMPDIR/before.files" "$BATS_TEST_TMPDIR/after.files" ||
		fail "the root differs from before the install (diff above: - before, + after)"
	gp --root "$R" uninstall --only cudnn
	assert_status 0
	assert_stdout_has "cudnn: satisfied - gpuprov recorded nothing of it"
}

# --- Extracting while downloading --------------------------------------------
# The server cuts the first answer after 4096 bytes (drop=4096), so the
# download is still running (waiting 1 s to resume) when the stage extracts:
# the stream path is taken without any sleep in the test.

staging_left() {
	find "$R/$BASE" -name '.*gpuprov-staging*' -o -name '.*gpuprov-old*'
}

@test "cudnn: extracts while downloading; resumes under it; the cache keeps the verified file" {
	LIB_BYTES=300000 make_tarball "$WWW/big.tar.xz"
	sha=$(sha256sum < "$WWW/big.tar.xz" | cut -d' ' -f1)
	write_profile "$sha" "https://127.0.0.1:$PORT/big.tar.xz?drop=4096"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	grep -q "cudnn: extract https://127.0.0.1:$PORT/big.tar.xz?drop=4096 into /$BASE/cudnn-8.9.7.29 while it downloads" \
		"$R/var/log/gpuprov.log" || fail "not streamed:" "$(cat "$R/var/log/gpuprov.log")"
	! grep -q "extracting the verified download instead" "$R/var/log/gpuprov.log" ||
		fail "the stream broke:" "$(cat "$R/var/log/gpuprov.log")"
	[ "$(grep -c '^GET' "$BATS_TEST_TMPDIR/httpd.log")" = 2 ] &&
		grep -q "range=bytes=4096-" "$BATS_TEST_TMPDIR/httpd.log" ||
		fail "expected one cut request and one resume:" "$(cat "$BATS_TEST_TMPDIR/httpd.log")"
	cmp "$WWW/big.tar.xz" "$R/var/cache/gpuprov/$sha" || fail "the cache lacks the file"
	[ "$(cat "$R/$BASE/cudnn-8.9.7.29/lib/libcudnn.so.8.9.7" | wc -c)" = 300000 ] ||
		fail "the library is not whole"
	[ -z "$(staging_left)" ] || fail "left behind: $(staging_left)"
	assert_journal_true "$R"
	rm -rf "$R/$BASE/cudnn-8.9.7.29"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	[ "$(grep -c '^GET' "$BATS_TEST_TMPDIR/httpd.log")" = 2 ] || fail "the rerun used the network"
}

@test "cudnn: a checksum mismatch while extracting during the download leaves no trace" {
	LIB_BYTES=300000 make_tarball "$WWW/big.tar.xz"
	bad=0000000000000000000000000000000000000000000000000000000000000000
	write_profile "$bad" "https://127.0.0.1:$PORT/big.tar.xz?drop=4096"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 1
	assert_stderr_has "sha256 mismatch: expected $bad, got $(sha256sum < "$WWW/big.tar.xz" | cut -d' ' -f1), twice"
	grep -q "while it downloads" "$R/var/log/gpuprov.log" || fail "not streamed"
	[ ! -e "$R/$BASE/cudnn-8.9.7.29" ] || fail "destination created"
	[ -z "$(staging_left)" ] || fail "left behind: $(staging_left)"
	[ -z "$(ls -A "$R/var/cache/gpuprov")" ] || fail "cache: $(ls -A "$R/var/cache/gpuprov")"
	[ -z "$(stub_log "$R")" ] || fail "a command ran"
}

@test "cudnn: a truncated xz stream fails while downloading and again from the cache; no trace" {
	LIB_BYTES=300000 make_tarball "$WWW/big.tar.xz"
	head -c 200000 "$WWW/big.tar.xz" > "$WWW/cut.tar.xz"
	sha=$(sha256sum < "$WWW/cut.tar.xz" | cut -d' ' -f1)
	write_profile "$sha" "https://127.0.0.1:$PORT/cut.tar.xz?drop=4096"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 1
	assert_stderr_has "cannot extract /var/cache/gpuprov/$sha into /$BASE/cudnn-8.9.7.29: truncated or corrupt archive"
	grep -q "while it downloads" "$R/var/log/gpuprov.log" || fail "not streamed"
	grep -q "extracting the verified download instead" "$R/var/log/gpuprov.log" ||
		fail "no second try from the cache"
	[ ! -e "$R/$BASE/cudnn-8.9.7.29" ] || fail "destination created"
	[ -z "$(staging_left)" ] || fail "left behind: $(staging_left)"
	[ -z "$(stub_log "$R")" ] || fail "a command ran"
}

@test "cudnn: check hashes only files whose size, times or inode changed; verify hashes all" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	lib=$R/$BASE/cudnn-8.9.7.29/lib/libcudnn.so.8.9.7
	touch -r "$lib" "$BATS_TEST_TMPDIR/mtime"
	gp -v --root "$R" plan --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "cudnn: satisfied"
	assert_stderr_has "cudnn: 0 of 4 recorded files hashed"
	# Same bytes, new mtime: hashed, still intact.
	touch "$lib"
	gp -v --root "$R" plan --profile "$P" --only cudnn
	assert_stdout_has "cudnn: satisfied"
	assert_stderr_has "cudnn: 1 of 4 recorded files hashed"
	# Other bytes in place (same inode and size), the mtime put back: the
	# ctime still tells, so it is hashed and found changed.
	ino=$(stat -c %i "$lib")
	printf NOT | dd of="$lib" conv=notrunc status=none
	touch -r "$BATS_TEST_TMPDIR/mtime" "$lib"
	[ "$(stat -c %i "$lib")" = "$ino" ] || fail "the edit replaced the file"
	gp -v --root "$R" plan --profile "$P" --only cudnn
	assert_stdout_has "libcudnn.so.8.9.7 is missing or changed since gpuprov installed it"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 3
	assert_stdout_has "/$BASE/cudnn-8.9.7.29/lib/libcudnn.so.8.9.7 is missing or changed since gpuprov installed it"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "4 files in /$BASE/cudnn-8.9.7.29 have the sha256 gpuprov recorded"
}

# shadow_tarball OUT FILE...: the cuDNN tarball of version $VER with FILEs
# (paths under its top directory, e.g. include/cuda.h) added.
shadow_tarball() {
	local out=$1 top=cudnn-linux-x86_64-${VER}_cuda11-archive
	shift
	make_tarball "$out"
	for f in "$@"; do
		mkdir -p "$(dirname "$BATS_TEST_TMPDIR/src/$top/$f")"
		echo "cuDNN's copy of $f" > "$BATS_TEST_TMPDIR/src/$top/$f"
	done
	tar -C "$BATS_TEST_TMPDIR/src" --owner=0 --group=0 -cJf "$out" "$top"
	sha=$(sha256sum < "$out" | cut -d' ' -f1)
	write_profile "$sha" "https://127.0.0.1:$PORT/$(basename "$out")"
}

@test "cudnn: only cuDNN's own names are linked; the toolkit's cuda.h and libcudart stay" {
	mkdir -p "$R/$BASE/include"
	echo "the toolkit's cuda.h" > "$R/$BASE/include/cuda.h"
	echo "the toolkit's libcudart" > "$R/$BASE/lib64/libcudart.so.13"
	shadow_tarball "$WWW/shadow.tar.xz" include/cuda.h lib/libcudart.so.13
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	[ ! -L "$R/$BASE/include/cuda.h" ] && [ ! -L "$R/$BASE/lib64/libcudart.so.13" ] ||
		fail "a toolkit file was replaced by a link into cuDNN"
	[ "$(cat "$R/$BASE/include/cuda.h")" = "the toolkit's cuda.h" ] || fail "cuda.h changed"
	[ "$(cat "$R/$BASE/lib64/libcudart.so.13")" = "the toolkit's libcudart" ] ||
		fail "libcudart.so.13 changed"
	[ ! -e "$R/var/lib/gpuprov/backup/$BASE" ] ||
		fail "toolkit files were backed up:" "$(find "$R/var/lib/gpuprov/backup")"
	# The archive's other files stay inside its own tree.
	[ -f "$R/$BASE/cudnn-$VER/include/cuda.h" ] || fail "the archive's cuda.h was not extracted"
	[ "$(readlink "$R/$BASE/lib64/libcudnn.so.8")" = "../cudnn-$VER/lib/libcudnn.so.8" ] ||
		fail "cuDNN's own library is not linked"
	[ -L "$R/$BASE/include/cudnn.h" ] || fail "cuDNN's own header is not linked"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "cudnn: satisfied"
}

@test "cudnn: a cuDNN name that would replace a file gpuprov did not link is refused, naming it" {
	mkdir -p "$R/$BASE/include"
	echo "someone else's cudnn.h" > "$R/$BASE/include/cudnn.h"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 4
	assert_stderr_has "/$BASE/include/cudnn.h"
	[ "$(cat "$R/$BASE/include/cudnn.h")" = "someone else's cudnn.h" ] ||
		fail "the foreign cudnn.h was replaced"
	[ -z "$(ls -A "$R/$BASE/lib64")" ] || fail "lib64 changed: $(ls -A "$R/$BASE/lib64")"
	[ -z "$(stub_log "$R")" ] || fail "a command ran: $(stub_log "$R")"
}

@test "cudnn: its ld.so.conf.d file removed and ldconfig run: check sees it, install rewrites it and reruns ldconfig" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	conf=$R/etc/ld.so.conf.d/gpuprov-cudnn.conf
	cp "$conf" "$BATS_TEST_TMPDIR/conf.before"
	rm "$conf"
	chroot "$R" /sbin/ldconfig
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 3
	assert_stdout_has "not in the linker cache"
	gp --root "$R" plan --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "cudnn: needed - /etc/ld.so.conf.d/gpuprov-cudnn.conf is missing or changed"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	cmp -s "$conf" "$BATS_TEST_TMPDIR/conf.before" || fail "the ld.so.conf.d file was not rewritten"
	[ "$(stub_log "$R" | grep -c ldconfig)" = 3 ] || fail "ldconfig did not rerun: $(stub_log "$R")"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
}

@test "cudnn: libraries missing from the linker cache: check sees it, install reruns ldconfig" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	: > "$R/etc/ld.so.cache"
	gp --root "$R" plan --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "cudnn: needed - libcudnn.so.8 is not in the linker cache (/etc/ld.so.cache)"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	[ "$(stub_log "$R" | grep -c ldconfig)" = 2 ] || fail "ldconfig did not rerun: $(stub_log "$R")"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
}

@test "cudnn: a no-op install and verify read /etc/ld.so.cache and spawn no 'ldconfig -p'; a cache the parser refuses falls back to it, same result" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	gp -v --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "cudnn: satisfied"
	refute_stderr_has "ldconfig -p"
	gp -v --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "libcudnn.so.8 => /$BASE/lib64/libcudnn.so.8"
	refute_stderr_has "ldconfig -p"
	# Its header spoilt: gpuprov's parser refuses the file; the stub's
	# `ldconfig -p` still lists the paths in it.
	printf 'XXXXX' | dd of="$R/etc/ld.so.cache" conv=notrunc status=none
	gp -v --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "cudnn: satisfied"
	assert_stderr_has "cudnn: /etc/ld.so.cache: not a glibc linker cache; asking 'ldconfig -p'"
	assert_stderr_has "cudnn: run ldconfig -p"
	gp -v --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "libcudnn.so.8 => /$BASE/lib64/libcudnn.so.8"
	assert_stderr_has "/etc/ld.so.cache: not a glibc linker cache; asking 'ldconfig -p'"
	assert_stderr_has "run ldconfig -p"
}

@test "cudnn verify: neither /etc/ld.so.cache nor 'ldconfig -p' readable fails the linker cache check, naming both" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	rm "$R/etc/ld.so.cache"
	printf '#!/bin/sh\necho "ldconfig: cannot read the cache" >&2\nexit 1\n' > "$R/sbin/ldconfig"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 3
	assert_stdout_has "fail  linker cache: cannot read the linker cache: /etc/ld.so.cache in root $R: No such file or directory, and 'ldconfig -p' failed: exited with status 1"
}

@test "cudnn verify: the CUDA major does not pass while cuDNN is absent" {
	echo '{ "cuda": { "version": "11.8.0" } }' > "$R/$BASE/version.json"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 3
	refute_stdout_has "pass  CUDA major"
	assert_stdout_has "skip  CUDA major: cuDNN is not installed"
}

@test "cudnn: the run's download says cached:false as its plan did, though its own background download filled the cache first" {
	# GPUPROV_TEST_PREFETCH_FIRST (src/download.c) holds the real pass's
	# plan of the download until the background download has finished:
	# the order that made the run say cached:true (fixed in cc94819).
	GPUPROV_TEST_PREFETCH_FIRST=1 gp --root "$R" --ca-file "$CA" --json install \
		--profile "$P" --only cudnn
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/run.json"
	JSON=$BATS_TEST_TMPDIR/run.json
	jeq 'd["stages"][5]["effects"][0]["type"]' download
	jeq 'd["stages"][5]["effects"][0]["cached"]' false
	[ -s "$R/var/cache/gpuprov/$SHA" ] || fail "the download is not in the cache"
	[ "$(requests)" = 1 ] || fail "downloaded $(requests) times"
}
