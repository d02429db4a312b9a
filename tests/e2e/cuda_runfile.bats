#!/usr/bin/env bats
# The cuda stage's method runfile in a busybox fixture root: a stand-in
# cuda_X.Y.Z_<driver>_linux.run served over loopback HTTPS that logs its
# argv and installs a toolkit (version.json, include/cuda.h, bin/nvcc) under
# --toolkitpath, and its driver only when asked to (it must never be).

load helpers

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R"
	start_https_server
	RUN=cuda_12.4.1_550.54.15_linux.run
	cat > "$WWW/$RUN" <<'EOF'
#!/bin/sh
# Stand-in for NVIDIA's CUDA runfile.
echo "runfile $*" >> /var/log/stub-commands.log
tk=
for a in "$@"; do
	case $a in
	--toolkitpath=*) tk=${a#--toolkitpath=} ;;
	--driver) mkdir -p /usr/lib/x86_64-linux-gnu && echo driver > /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15 ;;
	esac
done
[ -n "$tk" ] || { echo "no --toolkitpath" >&2; exit 1; }
mkdir -p "$tk/bin" "$tk/include"
printf '{ "cuda" : { "name" : "CUDA SDK", "version" : "12.4.1" } }\n' > "$tk/version.json"
printf '#define CUDA_VERSION 12040\n' > "$tk/include/cuda.h"
printf '#!/bin/sh\necho "Cuda compilation tools, release 12.4, V12.4.131"\n' > "$tk/bin/nvcc"
chmod 0755 "$tk/bin/nvcc"
EOF
	SHA=$(sha256sum < "$WWW/$RUN" | cut -d' ' -f1)
	URL=https://127.0.0.1:$PORT/$RUN
	P=$BATS_TEST_TMPDIR/p.json
	runfile_profile "\"url\": \"$URL\", \"sha256\": \"$SHA\""
}

teardown() {
	stop_https_server
}

# runfile_profile JSON-MEMBERS: $P, CUDA 12.4.1 by the runfile, linked.
runfile_profile() {
	cat > "$P" <<JSON
{ "name": "cuda-runfile", "extends": "distro/ubuntu2204",
  "stages": { "cuda": { "method": "runfile", "version": "12.4.1", "link": true, $1 } } }
JSON
}

runfile_runs() {
	cat "$R/var/log/stub-commands.log" 2>/dev/null | grep -c '^runfile ' || true
}

@test "cuda runfile: the plan lists the download and the installer's argv, and changes nothing" {
	snapshot "$R" before
	gp --root "$R" --ca-file "$CA" plan --profile "$P" --only cuda
	assert_status 0
	assert_stdout_has "cuda: needed - no CUDA toolkit in /usr/local/cuda-12.4"
	assert_stdout_has "download $URL"
	assert_stdout_has "sha256 $SHA"
	assert_stdout_has "run /bin/sh /var/cache/gpuprov/$SHA --silent --toolkit --toolkitpath=/usr/local/cuda-12.4"
	assert_stdout_has "symlink /usr/local/cuda -> cuda-12.4"
	assert_unchanged "$R" before
}

@test "cuda runfile: installs the toolkit only (no driver), chrooted; the probes agree; a rerun does not run it again" {
	assert_plan_matches_run "$R" --ca-file "$CA" --profile "$P" --only cuda
	assert_status 0
	line=$(grep '^runfile ' "$R/var/log/stub-commands.log") || fail "the runfile did not run"
	[ "$line" = "runfile --silent --toolkit --toolkitpath=/usr/local/cuda-12.4" ] ||
		fail "runfile argv: $line"
	case $line in *--driver* | *--kernel* | *--dkms*) fail "a driver flag was passed: $line" ;; esac
	[ ! -e "$R/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15" ] || fail "the bundled driver was installed"
	[ "$(readlink "$R/usr/local/cuda")" = cuda-12.4 ]
	gp --root "$R" verify --profile "$P" --only cuda
	assert_status 0
	assert_stdout_has "version.json in /usr/local/cuda-12.4 says 12.4.1"
	assert_stdout_has "include/cuda.h in /usr/local/cuda-12.4 says 12.4"
	assert_stdout_has "nvcc --version in /usr/local/cuda-12.4 says 12.4.131"
	assert_stdout_has "/usr/local/cuda -> cuda-12.4"
	snapshot "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cuda
	assert_status 0
	assert_stdout_has "cuda: satisfied - CUDA 12.4.1 in /usr/local/cuda-12.4"
	[ "$(runfile_runs)" = 1 ] || fail "the runfile ran again"
	assert_unchanged "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json
}

@test "cuda runfile: a sha256 mismatch is refused with both hashes, nothing installed, the runfile never run" {
	local bad=0000000000000000000000000000000000000000000000000000000000000000
	runfile_profile "\"url\": \"$URL\", \"sha256\": \"$bad\""
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cuda
	assert_status 1
	assert_stderr_has "expected $bad, got $SHA"
	[ "$(runfile_runs)" = 0 ] || fail "the runfile ran"
	[ ! -e "$R/usr/local/cuda-12.4" ] || fail "a toolkit was installed"
	[ ! -e "$R/usr/local/cuda" ] || fail "the link was made"
	[ ! -e "$R/var/cache/gpuprov/$bad" ] && [ ! -e "$R/var/cache/gpuprov/$SHA" ] ||
		fail "the download was kept in the cache"
}

@test "cuda runfile: no sha256 or no url blocks before anything is downloaded" {
	runfile_profile "\"url\": \"$URL\""
	snapshot "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cuda
	assert_status 4
	assert_stdout_has "cuda: blocked - stages.cuda.sha256 is not set: gpuprov downloads nothing without a pinned sha256"
	assert_unchanged "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	[ ! -s "$BATS_TEST_TMPDIR/httpd.log" ] || fail "the server was asked: $(cat "$BATS_TEST_TMPDIR/httpd.log")"
	runfile_profile "\"sha256\": \"$SHA\""
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cuda
	assert_status 4
	assert_stdout_has "cuda: blocked - stages.cuda.url (the runfile) is not set"
}

@test "cuda runfile: /usr/local/cuda re-pointed after the install is drift (cuda.drift_cuda_link); install points it back, as a corrective change" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cuda
	assert_status 0
	gp --root "$R" --json verify --profile "$P" --only cuda
	assert_status 0
	[[ $output != *drift_* ]] || fail "drift right after the install:" "$output"
	mkdir -p "$R/opt/other-cuda"
	ln -sfn /opt/other-cuda "$R/usr/local/cuda"
	gp --root "$R" --json verify --profile "$P" --only cuda
	assert_status 3
	JSON=$BATS_TEST_TMPDIR/verify.json
	printf '%s\n' "$output" > "$JSON"
	jeq '[f["evidence"] for f in d["findings"] if f["id"] == "cuda.drift_cuda_link"]' \
		'["/usr/local/cuda -> /opt/other-cuda since gpuprov made it -> cuda-12.4"]'
	jeq '[f["hint"] for f in d["findings"] if f["id"] == "cuda.drift_cuda_link"]' \
		"[\"'gpuprov install --profile $P --only cuda --root $R' points it back\"]"
	gp --root "$R" --ca-file "$CA" --json plan --profile "$P" --only cuda
	assert_status 0
	JSON=$BATS_TEST_TMPDIR/plan.json
	printf '%s\n' "$output" > "$JSON"
	jeq '[(e["type"], e["change"]) for s in d["stages"] for e in s["effects"]]' '[["symlink", "corrective"]]'
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cuda
	assert_status 0
	[ "$(readlink "$R/usr/local/cuda")" = cuda-12.4 ]
}

@test "cuda runfile: its download starts in the background at the start of the run (prefetch), once, and only while the toolkit is missing" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only nouveau,cuda
	assert_status 0
	grep -q "downloading in the background: CUDA 12.4.1 runfile" "$R/var/log/gpuprov.log" ||
		fail "no background download: $(grep -i background "$R/var/log/gpuprov.log")"
	[ "$(grep -c "^GET /$RUN" "$BATS_TEST_TMPDIR/httpd.log")" = 1 ] ||
		fail "requests: $(cat "$BATS_TEST_TMPDIR/httpd.log")"
	[ "$(runfile_runs)" = 1 ] || fail "the runfile ran $(runfile_runs) times"
	# Installed, only the link wrong: the stage is needed, the runfile is not.
	ln -sfn cuda-11.8 "$R/usr/local/cuda"
	: > "$R/var/log/gpuprov.log"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cuda
	assert_status 0
	if grep "downloading in the background" "$R/var/log/gpuprov.log"; then
		fail "the runfile was fetched though the toolkit is there"
	fi
	[ "$(readlink "$R/usr/local/cuda")" = cuda-12.4 ] || fail "link not repaired"
}
