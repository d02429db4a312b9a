#!/usr/bin/env bats
# The cuda stage and the package layer against real apt and dpkg: a
# debootstrapped Debian 12 root and a signed local repository of stand-in
# packages with NVIDIA's names (tests/fixtures/aptrepo.sh).

load helpers

setup() {
	setup_apt_root
	P=$BATS_TEST_TMPDIR/p.json
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "12.4", "link": true } }'
}

teardown() {
	stop_https_server
}

# install_cuda_11_8 [SETTINGS]: the 11.8 toolkit installed and linked, where
# the version changes below start (SETTINGS: more of stages.cuda, e.g.
# ', "replace_previous": true').
install_cuda_11_8() {
	write_apt_profile "$P" "{ \"cuda\": { \"method\": \"repo\", \"version\": \"11.8\", \"link\": true${1:-} } }"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(readlink "$R/usr/local/cuda")" = cuda-11.8 ]
}

@test "cuda repo: the keyring, the source list, cuda-toolkit-12-4 (never cuda), the link, as planned; verify passes; a rerun changes nothing" {
	# The keyring is taken out of the cuda-keyring package and written by
	# gpuprov: dpkg -i would also install the package's own source list,
	# which the plan cannot see and gpuprov then replaces.
	assert_plan_matches_run "$R" --profile "$P" --ca-file "$CA"
	assert_status 0
	local runs
	runs=$(jq -r '.stages[].effects[] | select(.type == "run") | .argv | join(" ")' <<< "$output")
	printf '%s\n' "$runs" | grep -Fxq "apt-get -q -y update" || fail "no apt-get update: $runs"
	[[ "$runs" == *"install --no-install-recommends --allow-downgrades --no-remove cuda-toolkit-12-4"* ]] || fail "$runs"
	[[ "$runs" != *dpkg* ]] || fail "dpkg was run: $runs"
	[ "$(dpkg_status "$R" cuda-toolkit-12-4)" = "install ok installed 12.4.1-1" ]
	[ "$(dpkg_status "$R" cuda-keyring)" = "not-installed" ]
	cmp "$AR/key.gpg" "$R/usr/share/keyrings/cuda-archive-keyring.gpg"
	[ "$(dpkg_status "$R" cuda)" = "not-installed" ] || fail "the cuda meta package was installed"
	[ "$(readlink "$R/usr/local/cuda")" = cuda-12.4 ]
	grep -q "signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg\] file:///srv/repo/ /" \
		"$R/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
	gp --root "$R" verify --profile "$P"
	assert_status 0
	assert_stdout_has "nvcc --version in /usr/local/cuda-12.4 says 12.4.131"
	assert_stdout_has "version.json in /usr/local/cuda-12.4 says 12.4.1"
	snapshot "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	assert_stdout_has "cuda: satisfied"
	refute_stdout_has "apt-get"
	assert_unchanged "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json
}

@test "cuda repo: an install that apt would resolve by removing an installed package (a conflict) stops instead, naming why; the operator's package stays" {
	# An operator's package that conflicts with the toolkit: apt-get
	# install -y alone would remove it, a change no plan lists.
	local d=$R/tmp/site
	mkdir -p "$d/DEBIAN"
	printf 'Package: site-cuda-tools\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@gpuprov.invalid>\nConflicts: cuda-toolkit-12-4\nDescription: stand-in\n' \
		> "$d/DEBIAN/control"
	chroot "$R" dpkg-deb --build /tmp/site /tmp/site.deb > /dev/null
	chroot "$R" dpkg -i /tmp/site.deb > /dev/null
	rm -rf "$d" "$d.deb"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 1
	assert_stderr_has "apt would have removed installed packages that the plan does not list, and gpuprov never lets it (apt-get install --no-remove)"
	assert_stderr_has "remove is disabled"
	[ "$(dpkg_status "$R" site-cuda-tools)" = "install ok installed 1.0" ] ||
		fail "site-cuda-tools: $(dpkg_status "$R" site-cuda-tools)"
	[[ "$(dpkg_status "$R" cuda-toolkit-12-4)" != *" installed "* ]] ||
		fail "cuda-toolkit-12-4: $(dpkg_status "$R" cuda-toolkit-12-4)"
}

@test "cuda repo: the dry run lists the repository, its key and the package and changes nothing" {
	snapshot "$R" before
	gp --root "$R" plan --profile "$P"
	assert_status 0
	local pretty
	pretty=$(echo "$FPR" | sed -E 's/(....)/\1 /g; s/ $//; s/^((.... ){4}....) /\1  /')
	assert_stdout_has "signed by key $pretty"
	assert_stdout_has "create /usr/share/keyrings/cuda-archive-keyring.gpg (new file, mode 0644)"
	assert_stdout_has "content of /usr/share/keyrings/cuda-archive-keyring.gpg in https://127.0.0.1:$PORT/cuda-keyring_1.1-1_all.deb"
	refute_stdout_has "run dpkg"
	assert_stdout_has "install --no-install-recommends --allow-downgrades --no-remove cuda-toolkit-12-4"
	assert_stdout_has "symlink /usr/local/cuda -> cuda-12.4"
	assert_unchanged "$R" before
}

# plain_key_install KEY: the profile's keyring is $AR/KEY (key.gpg or
# key.asc), not in the cache yet; the plan's effects equal the install's.
plain_key_install() {
	cp "$AR/$1" "$WWW/"
	KSHA=$(sha256sum < "$AR/$1" | cut -d' ' -f1)
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "12.4" } }'
	sed -i "s|cuda-keyring_1.1-1_all.deb|$1|" "$P"
	assert_plan_matches_run "$R" --profile "$P" --ca-file "$CA"
	assert_status 0
	local kr=/usr/share/keyrings/cuda-debian12-x86_64-keyring.${1#key.}
	cmp "$AR/$1" "$R$kr"
	grep -q "signed-by=$kr\] file:///srv/repo/ /" "$R/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
	[ "$(jq -r --arg p "$kr" '.stages[].effects[] | select(.path == $p) | .sha256' <<< "$output")" = "$KSHA" ]
	[ "$(dpkg_status "$R" cuda-toolkit-12-4)" = "install ok installed 12.4.1-1" ]
}

@test "cuda repo: a binary key file not downloaded yet: the plan lists its keyring write as the run makes it" {
	plain_key_install key.gpg
}

@test "cuda repo: an armored key file not downloaded yet: the plan lists its keyring write as the run makes it" {
	plain_key_install key.asc
}

@test "cuda repo: a keyring without the pinned fingerprint is refused before anything is written" {
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "12.4" } }' "$(cat "$AR/other.fpr")"
	# gpuprov's own files (the download cache, journal, lock, log) may change.
	local GP_FILES=(var/cache/gpuprov "var/cache/gpuprov/$KSHA" var/lib/gpuprov
		var/lib/gpuprov/lock var/lib/gpuprov/state.json var/log/gpuprov.log)
	snapshot "$R" before "${GP_FILES[@]}"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 1
	assert_stderr_has "holds key $FPR, not the pinned"
	assert_stderr_has "nothing was written"
	assert_unchanged "$R" before "${GP_FILES[@]}"
	[ ! -e "$R/etc/apt/sources.list.d/cuda-debian12-x86_64.list" ]
}

@test "cuda repo: a first apt-get update that fails (Release signed by another key) removes the repository again" {
	# The archive is re-signed with the other key; the pinned keyring is right.
	local g=$BATS_TEST_TMPDIR/gnupg
	mkdir -m 0700 "$g"
	GNUPGHOME=$g gpg -q --batch --import \
		"${GPUPROV_TEST_CACHE:-${HOME:-/root}/.cache/gpuprov-tests}/aptrepo-keys/other.sec" 2>/dev/null
	local other
	other=$(cat "$AR/other.fpr")
	GNUPGHOME=$g gpg -q --batch --yes --local-user "$other" --clearsign \
		-o "$R/srv/repo/InRelease" "$R/srv/repo/Release"
	GNUPGHOME=$g gpg -q --batch --yes --local-user "$other" -abs \
		-o "$R/srv/repo/Release.gpg" "$R/srv/repo/Release"
	GNUPGHOME=$g gpgconf --kill all >/dev/null 2>&1 || true
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 1
	assert_stderr_has "the first apt refresh after adding the repository cuda-debian12-x86_64 failed, so gpuprov removed what it had added for it (/etc/apt/sources.list.d/cuda-debian12-x86_64.list, /usr/share/keyrings/cuda-archive-keyring.gpg)"
	# apt's own words are quoted.
	assert_stderr_has "NO_PUBKEY"
	[ ! -e "$R/etc/apt/sources.list.d/cuda-debian12-x86_64.list" ] ||
		fail "the source list stayed: $(cat "$R/etc/apt/sources.list.d/cuda-debian12-x86_64.list")"
	[ ! -e "$R/usr/share/keyrings/cuda-archive-keyring.gpg" ] || fail "the keyring stayed"
	# The removal is journaled, and later updates on the host work again.
	journal_files "$R/var/lib/gpuprov/state.json" |
		grep -Fxq "/etc/apt/sources.list.d/cuda-debian12-x86_64.list null" ||
		fail "the removal is not in the journal:" "$(journal_files "$R/var/lib/gpuprov/state.json")"
	assert_journal_true "$R"
	run chroot "$R" apt-get -q -y update
	[ "$status" -eq 0 ] || fail "apt-get update after the failed run: $output"
}

@test "cuda repo: a keyring that holds no OpenPGP key is refused before anything is written" {
	printf 'not a key\n\0\1\2' > "$WWW/junk.gpg"
	KSHA=$(sha256sum < "$WWW/junk.gpg" | cut -d' ' -f1)
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "12.4" } }'
	sed -i "s|cuda-keyring_1.1-1_all.deb|junk.gpg|" "$P"
	local GP_FILES=(var/cache/gpuprov "var/cache/gpuprov/$KSHA" var/lib/gpuprov
		var/lib/gpuprov/lock var/lib/gpuprov/state.json var/log/gpuprov.log)
	snapshot "$R" before "${GP_FILES[@]}"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 1
	assert_stderr_has "junk.gpg holds no readable OpenPGP public key; nothing was written"
	assert_unchanged "$R" before "${GP_FILES[@]}"
}

@test "cuda repo: a held dpkg lock is waited for with a message, then exit 1 naming the holder; never broken" {
	mkfifo "$BATS_TEST_TMPDIR/hold.in" "$BATS_TEST_TMPDIR/hold.out"
	"$PYTHON" -c '
import fcntl, sys
f = open(sys.argv[1], "a")
fcntl.lockf(f, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
' "$R/var/lib/dpkg/lock-frontend" < "$BATS_TEST_TMPDIR/hold.in" > "$BATS_TEST_TMPDIR/hold.out" &
	local holder=$!
	exec {HOLD_IN}> "$BATS_TEST_TMPDIR/hold.in"
	[ "$(read_fifo_line "$BATS_TEST_TMPDIR/hold.out" "$holder" 20)" = locked ]
	GPUPROV_LOCK_WAIT=1 gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 1
	assert_stderr_has "waiting for /var/lib/dpkg/lock-frontend, held by pid $holder"
	assert_stderr_has "is still held by pid $holder"
	assert_stderr_has "gpuprov never breaks the lock"
	proc_running "$holder" || fail "the lock holder was killed"
	[ "$(dpkg_status "$R" cuda-toolkit-12-4)" = "not-installed" ]
	exec {HOLD_IN}>&-
	wait "$holder"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(dpkg_status "$R" cuda-toolkit-12-4)" = "install ok installed 12.4.1-1" ]
}

@test "cuda repo: a version change installs the other toolkit beside the first and re-points /usr/local/cuda" {
	install_cuda_11_8
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "12.4", "link": true } }'
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "cuda: needed - cuda-toolkit-12-4 is not installed; cuda-toolkit-11-8 11.8.0-1 stays (side by side: stages.cuda.replace_previous is not true)"
	refute_stdout_has "run dpkg"
	refute_stdout_has " remove "
	assert_plan_matches_run "$R" --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(readlink "$R/usr/local/cuda")" = cuda-12.4 ]
	[ -x "$R/usr/local/cuda-11.8/bin/nvcc" ]
	[ "$(dpkg_status "$R" cuda-toolkit-11-8)" = "install ok installed 11.8.0-1" ]
}

@test "cuda repo: replace_previous: 11.8 -> 12.4 removes the 11.8 toolkit gpuprov installed (its hold passes on), as planned; uninstall gives the root back" {
	state "$R" > "$BATS_TEST_TMPDIR/before.state"
	install_cuda_11_8 ', "replace_previous": true'
	chroot "$R" apt-mark hold cuda-toolkit-11-8 > /dev/null
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "12.4", "link": true, "replace_previous": true } }'
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "cuda: needed - cuda-toolkit-12-4 is not installed; cuda-toolkit-11-8 11.8.0-1 -> removed"
	assert_plan_matches_run "$R" --profile "$P" --ca-file "$CA"
	assert_status 0
	local runs
	runs=$(jq -r '.stages[].effects[] | select(.type == "run") | .argv | join(" ")' <<< "$output")
	[[ "$runs" == *"apt-mark unhold cuda-toolkit-11-8"*"remove --purge"*"cuda-toolkit-11-8"*"apt-mark hold cuda-toolkit-12-4"* ]] ||
		fail "not released, removed, held in that order:" "$runs"
	[ "$(dpkg_status "$R" cuda-toolkit-11-8)" = "not-installed" ] ||
		fail "cuda-toolkit-11-8: $(dpkg_status "$R" cuda-toolkit-11-8)"
	[ "$(dpkg_status "$R" cuda-toolkit-12-4)" = "hold ok installed 12.4.1-1" ]
	[ ! -e "$R/usr/local/cuda-11.8/bin/nvcc" ] || fail "the 11.8 toolkit's files are left"
	[ "$(readlink "$R/usr/local/cuda")" = cuda-12.4 ]
	[ "$(chroot "$R" apt-mark showhold)" = cuda-toolkit-12-4 ]
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	assert_stdout_has "cuda: satisfied"
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R"
	assert_status 0
	state "$R" > "$BATS_TEST_TMPDIR/after.state"
	diff -u "$BATS_TEST_TMPDIR/before.state" "$BATS_TEST_TMPDIR/after.state" ||
		fail "the root differs from before the install (diff above: - before, + after)"
}

@test "cuda repo: replace_previous without link: gpuprov's /usr/local/cuda to the toolkit that goes goes with it, as planned, never left dangling" {
	install_cuda_11_8 ', "replace_previous": true'
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "12.4", "replace_previous": true } }'
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "cuda-toolkit-11-8 11.8.0-1 -> removed, /usr/local/cuda -> cuda-11.8 goes with it (gpuprov's link; stages.cuda.link is not true)"
	assert_stdout_line "      remove link /usr/local/cuda (-> cuda-11.8)"
	assert_plan_matches_run "$R" --profile "$P" --ca-file "$CA"
	assert_status 0
	[ ! -e "$R/usr/local/cuda" ] && [ ! -L "$R/usr/local/cuda" ] ||
		fail "/usr/local/cuda is left: -> $(readlink "$R/usr/local/cuda")"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	assert_stdout_has "cuda: satisfied"
}

@test "cuda repo: replace_previous keeps a toolkit that was there before gpuprov, and says so" {
	cp "$R"/srv/repo/cuda-toolkit-11-8_*.deb "$R/tmp/old.deb"
	chroot "$R" dpkg -i /tmp/old.deb > /dev/null
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "12.4", "link": true, "replace_previous": true } }'
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "cuda: needed - cuda-toolkit-12-4 is not installed; cuda-toolkit-11-8 11.8.0-1 stays (not installed by gpuprov)"
	assert_plan_matches_run "$R" --profile "$P" --ca-file "$CA"
	assert_status 0
	refute_stdout_has " remove "
	[ "$(dpkg_status "$R" cuda-toolkit-11-8)" = "install ok installed 11.8.0-1" ]
	[ "$(dpkg_status "$R" cuda-toolkit-12-4)" = "install ok installed 12.4.1-1" ]
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	assert_stdout_has "cuda: satisfied"
}

@test "cuda verify: nvcc on the env stage's PATH from another toolkit is named precisely" {
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "11.8" }, "env": { "cuda_home": "/usr/local/cuda-12.4" } }'
	gp --root "$R" install --profile "$P" --ca-file "$CA" --only cuda
	assert_status 0
	mkdir -p "$R/usr/local/cuda-12.4/bin"
	cp "$R/srv/repo/cuda-toolkit-12-4_12.4.1-1_amd64.deb" "$BATS_TEST_TMPDIR/"
	dpkg-deb -x "$BATS_TEST_TMPDIR/cuda-toolkit-12-4_12.4.1-1_amd64.deb" "$R"
	gp --root "$R" verify --profile "$P" --only cuda
	assert_status 3
	assert_stdout_has "nvcc on the PATH is /usr/local/cuda-12.4/bin/nvcc and says CUDA 12.4.131"
	assert_stdout_has "the profile's toolkit is CUDA 11.8 at /usr/local/cuda-11.8/bin/nvcc"
}

@test "cuda verify: the nvcc on the PATH that is the toolkit's own (through the link) runs once, not twice" {
	write_apt_profile "$P" '{ "cuda": { "method": "repo", "version": "12.4", "link": true }, "env": { "cuda_home": "/usr/local/cuda" } }'
	gp --root "$R" install --profile "$P" --ca-file "$CA" --only cuda
	assert_status 0
	gp -v --root "$R" verify --profile "$P" --only cuda
	assert_status 0
	assert_stdout_has "pass  version (nvcc --version): nvcc --version in /usr/local/cuda-12.4 says 12.4.131"
	assert_stdout_has "pass  nvcc on PATH: nvcc on the PATH is /usr/local/cuda/bin/nvcc, CUDA 12.4.131 (the toolkit)"
	runs=$(grep -c "run .*nvcc --version" <<< "$stderr" || true)
	[ "$runs" = 1 ] || fail "nvcc ran $runs times:" "$(grep "nvcc" <<< "$stderr")"
}
