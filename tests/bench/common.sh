# Sourced by the bench scripts, after `set -eu`, `here` (the script's
# directory) and BENCH_NAME (its name in messages). Sets repo, GPUPROV (the
# script's $1, else $GPUPROV, else build/gpuprov) and PY; refuses to go on
# without root (gpuprov chroots into the fixture roots) or a gpuprov binary.
# shellcheck shell=sh disable=SC2154,SC2034 # here and BENCH_NAME are the caller's; HTTPD_PID, PORT, CA are for it
repo=$(cd "$here/../.." && pwd)
GPUPROV=${1:-${GPUPROV:-$repo/build/gpuprov}}
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
[ "$(id -u)" -eq 0 ] || { echo "$BENCH_NAME: needs root (gpuprov chroots into the fixture root)" >&2; exit 2; }
[ -x "$GPUPROV" ] || { echo "$BENCH_NAME: no gpuprov at $GPUPROV (run make)" >&2; exit 2; }

# bench_httpd DIR MAX_SECONDS: tests/fixtures/httpd.py serving DIR over HTTPS
# on 127.0.0.1, its fifos and log in $W. Sets HTTPD_PID, PORT and CA; holds
# fds 8 and 9 (closing 9 ends the server).
bench_httpd() {
	mkfifo "$W/httpd.in" "$W/httpd.out"
	"$PY" "$repo/tests/fixtures/httpd.py" --dir "$1" --log "$W/httpd.log" \
		--tls gpuprov-bench --max-seconds "$2" < "$W/httpd.in" > "$W/httpd.out" &
	HTTPD_PID=$!
	exec 9> "$W/httpd.in"
	exec 8< "$W/httpd.out"
	read -r PORT CA <&8 || { echo "$BENCH_NAME: httpd.py did not start" >&2; exit 1; }
}

# bench_cudnn_headers DIR: the headers and LICENSE of a cuDNN 8.9.7 tree
# (what the cudnn stage reads its version from) under DIR.
bench_cudnn_headers() {
	mkdir -p "$1/include"
	printf '#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 7\n' \
		> "$1/include/cudnn_version.h"
	printf '#include "cudnn_version.h"\n' > "$1/include/cudnn.h"
	echo LICENSE > "$1/LICENSE"
}
