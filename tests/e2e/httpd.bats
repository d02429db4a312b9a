#!/usr/bin/env bats
# The loopback HTTPS server's throttle (tests/fixtures/httpd.py --rate and
# rate=), which `make bench` uses to stand in for real links: a body never
# arrives faster than the rate, whole and unchanged. Only lower bounds on
# time are checked (a loaded machine can only make it slower).

load helpers

setup_file() {
	head -c 1000000 /dev/urandom > "$BATS_FILE_TMPDIR/blob"
}

# fetch QUERY: downloads blob?QUERY into $BATS_TEST_TMPDIR/got and prints
# the seconds it took.
fetch() {
	"$PYTHON" - "https://127.0.0.1:$PORT/blob$1" "$CA" "$BATS_TEST_TMPDIR/got" <<'PY'
import ssl, sys, time, urllib.request
url, ca, out = sys.argv[1:]
ctx = ssl.create_default_context(cafile=ca)
t = time.monotonic()
with urllib.request.urlopen(url, context=ctx, timeout=60) as r:
    data = r.read()
print("%.3f" % (time.monotonic() - t))
open(out, "wb").write(data)
PY
}

@test "httpd: --rate paces every body; rate= overrides it per request, rate=0 lifts it" {
	HTTPD_ARGS="--rate 400000" start_https_server
	cp "$BATS_FILE_TMPDIR/blob" "$WWW/blob"

	# 1,000,000 bytes at 400,000 B/s: 2.5 s, less one 16 KiB burst.
	s=$(fetch "")
	cmp "$BATS_FILE_TMPDIR/blob" "$BATS_TEST_TMPDIR/got"
	awk -v s="$s" 'BEGIN { exit !(s >= 2.3) }' || fail "--rate 400000: 1 MB in $s s"

	# At 800,000 B/s: 1.25 s.
	s=$(fetch "?rate=800000")
	cmp "$BATS_FILE_TMPDIR/blob" "$BATS_TEST_TMPDIR/got"
	awk -v s="$s" 'BEGIN { exit !(s >= 1.15) }' || fail "rate=800000: 1 MB in $s s"

	# rate=0: unthrottled, the same bytes.
	fetch "?rate=0" > /dev/null
	cmp "$BATS_FILE_TMPDIR/blob" "$BATS_TEST_TMPDIR/got"
	stop_https_server
}

@test "httpd: link=1 requests share their rate, however many connections" {
	start_https_server
	cp "$BATS_FILE_TMPDIR/blob" "$WWW/blob"
	cp "$BATS_FILE_TMPDIR/blob" "$WWW/blob2"
	# Two 1,000,000-byte bodies at once on one 800,000 B/s link: 2.5 s for
	# both, less one 16 KiB burst (each alone on its own link: 1.25 s).
	s=$("$PYTHON" - "https://127.0.0.1:$PORT" "$CA" "$BATS_TEST_TMPDIR" <<'PY'
import ssl, sys, threading, time, urllib.request
base, ca, out = sys.argv[1:]
ctx = ssl.create_default_context(cafile=ca)
def get(name):
    with urllib.request.urlopen(base + "/" + name + "?rate=800000&link=1", context=ctx, timeout=60) as r:
        open(out + "/" + name, "wb").write(r.read())
t = time.monotonic()
threads = [threading.Thread(target=get, args=(n,)) for n in ("blob", "blob2")]
for th in threads:
    th.start()
for th in threads:
    th.join()
print("%.3f" % (time.monotonic() - t))
PY
)
	cmp "$BATS_FILE_TMPDIR/blob" "$BATS_TEST_TMPDIR/blob"
	cmp "$BATS_FILE_TMPDIR/blob" "$BATS_TEST_TMPDIR/blob2"
	awk -v s="$s" 'BEGIN { exit !(s >= 2.3) }' || fail "two bodies on one link in $s s"
	stop_https_server
}
