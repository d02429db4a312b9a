#!/usr/bin/env bats
# Download progress end to end: the cudnn stage fetches a small cuDNN-shaped
# .tar.xz over loopback HTTPS (tests/fixtures/httpd.py, as cudnn.bats does);
# stderr is captured, so not a terminal: plain lines, none with -q, JSON
# event lines with --json while stdout stays one JSON document.

load helpers

TOP=cudnn-linux-x86_64-8.9.7.29_cuda11-archive

make_tarball() {
	local src=$BATS_TEST_TMPDIR/src
	rm -rf "$src"
	mkdir -p "$src/$TOP/include" "$src/$TOP/lib"
	printf '#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 7\n' \
		> "$src/$TOP/include/cudnn_version.h"
	printf '#include "cudnn_version.h"\n' > "$src/$TOP/include/cudnn.h"
	# Some incompressible bytes, so there is something to count.
	head -c 300000 /dev/urandom > "$src/$TOP/lib/libcudnn.so.8.9.7"
	ln -s libcudnn.so.8.9.7 "$src/$TOP/lib/libcudnn.so.8"
	ln -s libcudnn.so.8 "$src/$TOP/lib/libcudnn.so"
	echo "LICENSE" > "$src/$TOP/LICENSE"
	tar -C "$src" --owner=0 --group=0 -cJf "$1" "$TOP"
}

start_server() {
	WWW=$BATS_TEST_TMPDIR/www
	mkdir -p "$WWW"
	mkfifo "$BATS_TEST_TMPDIR/httpd.in"
	"$PYTHON" "$REPO_ROOT/tests/fixtures/httpd.py" --dir "$WWW" \
		--log "$BATS_TEST_TMPDIR/httpd.log" --tls cudnn-test --max-seconds 60 \
		< "$BATS_TEST_TMPDIR/httpd.in" > "$BATS_TEST_TMPDIR/httpd.out" 3>&- &
	exec {HTTPD_FD}> "$BATS_TEST_TMPDIR/httpd.in"
	local i
	for ((i = 0; i < 100; i++)); do
		[ -s "$BATS_TEST_TMPDIR/httpd.out" ] && break
		sleep 0.05
	done
	read -r PORT CA < "$BATS_TEST_TMPDIR/httpd.out" || fail "httpd.py did not start"
}

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --cuda --ldconfig-cache
	start_server
	make_tarball "$WWW/cudnn.tar.xz"
	SHA=$(sha256sum < "$WWW/cudnn.tar.xz" | cut -d' ' -f1)
	P=$BATS_TEST_TMPDIR/cudnn-test.json
	cat > "$P" <<JSON
{
  "name": "cudnn-test",
  "extends": "a100-ubuntu2204",
  "stages": {
    "cudnn": { "method": "tarball", "version": "8.9.7.29", "cuda": "11",
               "url": "https://127.0.0.1:$PORT/cudnn.tar.xz", "sha256": "$SHA" }
  }
}
JSON
}

teardown() {
	[ -n "${HTTPD_FD-}" ] && exec {HTTPD_FD}>&-
	return 0
}

@test "progress: not a terminal: a final plain line with 100%, no control characters" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	assert_stderr_matches "gpuprov: download [^:]+: [0-9.]+ KiB of [0-9.]+ KiB \(100%\), [0-9.]+ [KMG]?i?B/s$"
	[[ "$stderr" != *$'\r'* && "$stderr" != *$'\e'* ]] ||
		{ show_run; fail "terminal control characters on a non-terminal"; }
	# A cache hit transfers nothing and shows no progress.
	rm -rf "$R/usr/local/cuda-11.8/cudnn-8.9.7.29"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only cudnn
	assert_status 0
	refute_stderr_has "(100%)"
}

@test "progress: -q shows none" {
	gp --root "$R" --ca-file "$CA" -q install --profile "$P" --only cudnn
	assert_status 0
	refute_stderr_has "download"
	refute_stderr_has "%"
}

@test "progress: --json puts event lines on stderr, stdout stays one JSON document" {
	gp --root "$R" --ca-file "$CA" --json install --profile "$P" --only cudnn
	assert_status 0
	printf '%s\n' "$output" | "$PYTHON" -c 'import json, sys; json.load(sys.stdin)' ||
		{ show_run; fail "stdout is not one JSON document"; }
	printf '%s\n' "$stderr" | "$PYTHON" -c '
import json, sys
events = [json.loads(l) for l in sys.stdin if l.startswith("{\"event\"")]
kinds = [e["event"] for e in events]
assert "download_start" in kinds, kinds
done = [e for e in events if e["event"] == "download_done"]
assert len(done) == 1, kinds
d = done[0]
assert d["status"] == 0 and d["done"] == d["total"] and d["total"] > 0, d
assert d["url"].endswith("/cudnn.tar.xz"), d
' || { show_run; fail "no download_done event line on stderr"; }
}
