#!/usr/bin/env bats
# Download progress end to end: the cudnn stage fetches a small cuDNN-shaped
# .tar.xz over loopback HTTPS (tests/fixtures/httpd.py, as cudnn.bats does);
# stderr is captured, so not a terminal: plain lines, none with -q, JSON
# event lines with --json while stdout stays one JSON document.

load helpers

# Some incompressible bytes in the library, so there is something to count.
LIB_BYTES=300000

setup() {
	setup_cudnn_root
}

teardown() {
	stop_https_server
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
