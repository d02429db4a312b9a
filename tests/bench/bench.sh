#!/bin/sh
# gpuprov download+install benchmark (issue 4, "Benchmark"); run by `make bench`,
# never by `make check`. Needs root (gpuprov chroots into the fixture root),
# python3, openssl, curl, xz, tar, sha256sum.
#
#   sh tests/bench/bench.sh [GPUPROV]        (default: ./build/gpuprov)
#
# A cuDNN-shaped .tar.xz (>= 330 MB uncompressed: six ~55 MB "libraries" cut
# from real shared libraries in /usr/lib/x86_64-linux-gnu, topped up with
# generated random+repetitive data if the machine has too few) is built once
# with `xz -T0 -6 --block-size=24MiB` (multi-block) and cached under
# ${GPUPROV_TEST_CACHE:-$HOME/.cache/gpuprov-tests}/bench/; it is rebuilt only
# when missing. The first run spends ~1-2 minutes (2 cores) compressing it.
#
# The tarball is served by tests/fixtures/httpd.py on 127.0.0.1 over HTTPS
# (its test CA), unthrottled and throttled (httpd.py's rate= query: 100 MB/s,
# a 1 Gbit/s link, and 25 MB/s). In one run we time, each with its peak RSS
# (ru_maxrss of the largest process in the measured tree, from
# getrusage(RUSAGE_CHILDREN)):
#   reference floors: curl to /dev/null (per rate); sha256sum; xz -d -T1;
#   xz -d -T0
#   (a) gpuprov install --only cudnn into a fresh fixture root, empty cache
#   (b) curl --cacert CA -o F URL && sha256sum -c && tar -xJf F -C DIR
# BENCH_PAIRS pairs per rate, alternating which of a and b goes first, and
# print the median of the per-pair ratios a/b per rate, a judgement of
# what bounds gpuprov, and the CPU time (user + sys of the whole tree) of
# (a), (b) and the xz floors: (a)'s CPU against its wall time x CPUs says
# whether anything but the CPUs is left to wait for. Then
# tests/bench/noop.sh (no-op install/plan/verify on a fully provisioned
# root, with a strace profile), tests/bench/overlap.sh
# (a fresh full install on one throttled link: wall time against the
# download and apply totals) and tests/bench/scale.sh.
# Targets (issues 4, 18): a/b <= 0.50 unthrottled and <= 0.45 at 100 MB/s;
# gpuprov's peak RSS within its stated bound: streamed, a multi-block xz is
# decoded block by block on every CPU (src/sys/xzpar.c), holding at most
# CPUs + 2 blocks (compressed and uncompressed) plus one decoder per CPU, on
# top of the single-threaded path's 26 MB (the report prints the figures).
#
# Environment (all optional):
#   BENCH_QUICK=1     smoke run: 4 MB per library (~25 MB archive), 1 pair,
#                     small scale figures (a minute or two)
#   BENCH_PART_MB=N   size of each of the six libraries (default 55; the
#                     archive is cached per size)
#   BENCH_PAIRS=N     pairs per rate (default 3; 1 with BENCH_QUICK)
#   BENCH_RATES="..." rates in bytes/s, 0 = unthrottled
#                     (default "0 100000000 25000000")
#   BENCH_CUDNN_ONLY=1 the cuDNN install figures only (no noop.sh,
#                     overlap.sh, scale.sh)
#   BENCH_OVERLAP=0   skip overlap.sh (its own knobs, OVERLAP_RATE,
#                     OVERLAP_MB, OVERLAP_SCALE, OVERLAP_RUNS: its header)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=bench
# shellcheck source=tests/bench/common.sh
. "$here/common.sh"

VER=8.9.7.29
V3=8.9.7
TOP=cudnn-linux-x86_64-${VER}_cuda11-archive
LIBS="cudnn_ops_infer cudnn_ops_train cudnn_cnn_infer cudnn_cnn_train cudnn_adv_infer cudnn_adv_train"
QUICK=${BENCH_QUICK:-0}
[ "$QUICK" = 1 ] || QUICK=0
if [ "$QUICK" = 1 ]; then q_part=4 q_pairs=1; else q_part=55 q_pairs=3; fi
PART_MB=${BENCH_PART_MB:-$q_part} # per library; 6 x 55 MB + headers = ~330 MB uncompressed
PAIRS=${BENCH_PAIRS:-$q_pairs}
RATES=${BENCH_RATES:-0 100000000 25000000}
case "$PART_MB$PAIRS" in *[!0-9]*) echo "bench: BENCH_PART_MB and BENCH_PAIRS are numbers" >&2; exit 2 ;; esac
if [ "$PART_MB" -lt 1 ] || [ "$PAIRS" -lt 1 ]; then echo "bench: BENCH_PART_MB and BENCH_PAIRS are >= 1" >&2; exit 2; fi
CACHE=${GPUPROV_TEST_CACHE:-$HOME/.cache/gpuprov-tests}/bench
TARBALL=$CACHE/cudnn-bench-v1.tar.xz
[ "$PART_MB" -eq 55 ] || TARBALL=$CACHE/cudnn-bench-v1-${PART_MB}mb.tar.xz

W=$(mktemp -d "${TMPDIR:-/tmp}/gpuprov-bench.XXXXXX")
HTTPD_PID=
cleanup() {
	exec 8<&- 9>&- 2>/dev/null || true
	[ -n "$HTTPD_PID" ] && kill "$HTTPD_PID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the tarball (cached) ------------------------------------------------
make_tarball() {
	echo "bench: building $TARBALL (first run only; xz -6 of $((PART_MB * 6)) MB)"
	mkdir -p "$CACHE"
	src=$W/src
	need=$((PART_MB * 6 * 1048576 + 1048576))
	mkdir -p "$src/$TOP/include" "$src/$TOP/lib"
	# Pool of real shared-library bytes, in a stable order.
	find /usr/lib/x86_64-linux-gnu -type f -name '*.so*' -size +64k 2>/dev/null |
		LC_ALL=C sort | while IFS= read -r f; do cat "$f"; done |
		head -c "$need" > "$W/pool" || true
	have=$(wc -c < "$W/pool")
	if [ "$have" -lt "$need" ]; then
		echo "bench: only $have bytes of real libraries; topping up with generated data"
		"$PY" - "$W/pool" "$((need - have))" <<'PYEOF'
import os, sys
# Library-like compressibility: per 64 KiB, 24 KiB random, the rest a
# repeated 4 KiB pattern varied per chunk (xz gets ~2.5-3x, like .so files).
path, n = sys.argv[1], int(sys.argv[2])
with open(path, "ab") as f:
    i = 0
    while n > 0:
        pat = (b"%08x" % i) * 512
        chunk = os.urandom(24576) + pat * 10
        f.write(chunk[:n]); n -= len(chunk); i += 1
PYEOF
	fi
	bench_cudnn_headers "$src/$TOP"
	dd if="$W/pool" of="$src/$TOP/lib/libcudnn.so.$V3" bs=1M count=1 2>/dev/null
	ln -s "libcudnn.so.$V3" "$src/$TOP/lib/libcudnn.so.8"
	ln -s libcudnn.so.8 "$src/$TOP/lib/libcudnn.so"
	i=0
	for l in $LIBS; do
		dd if="$W/pool" of="$src/$TOP/lib/lib$l.so.$V3" bs=1M \
			skip=$((1 + i * PART_MB)) count="$PART_MB" 2>/dev/null
		ln -s "lib$l.so.$V3" "$src/$TOP/lib/lib$l.so.8"
		ln -s "lib$l.so.8" "$src/$TOP/lib/lib$l.so"
		i=$((i + 1))
	done
	rm -f "$W/pool"
	t0=$(date +%s)
	tar -C "$src" --owner=0 --group=0 -cf - "$TOP" |
		xz -T0 -6 --block-size=24MiB > "$TARBALL.tmp"
	mv "$TARBALL.tmp" "$TARBALL"
	rm -rf "$src"
	echo "bench: built in $(($(date +%s) - t0)) s"
}
[ -s "$TARBALL" ] || make_tarball
SHA=$(sha256sum < "$TARBALL" | cut -d' ' -f1)
XZSIZE=$(wc -c < "$TARBALL")
RAWSIZE=$(xz --robot --list "$TARBALL" | awk '$1 == "totals" { print $5 }')
BLOCKS=$(xz --robot --list "$TARBALL" | awk '$1 == "totals" { print $3 }')
# The largest block, compressed + uncompressed bytes, and the decoder's memory.
MAXBLOCK=$(xz --robot -lvv "$TARBALL" | awk '$1 == "block" { s = $7 + $8; if (s > m) m = s } END { printf "%d\n", m }')
DECMEM=$(xz --robot -lvv "$TARBALL" | awk '$1 == "summary" { printf "%d\n", $2 }')

# ---- the server ------------------------------------------------------------
WWW=$W/www
mkdir -p "$WWW"
ln "$TARBALL" "$WWW/cudnn.tar.xz" 2>/dev/null || cp "$TARBALL" "$WWW/cudnn.tar.xz"
bench_httpd "$WWW" 900
URL=https://127.0.0.1:$PORT/cudnn.tar.xz

# ---- timing ----------------------------------------------------------------
cat > "$W/timeit.py" <<'PYEOF'
import resource, subprocess, sys, time
t = time.monotonic()
rc = subprocess.call(sys.argv[2:])
wall = time.monotonic() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
rss = ru.ru_maxrss  # KiB on Linux
with open(sys.argv[1], "w") as f:
    f.write("%.3f %d %d %.3f\n" % (wall, rss, rc, ru.ru_utime + ru.ru_stime))
sys.exit(rc)
PYEOF
# timeit NAME CMD...: sets T_NAME (s), R_NAME (MiB) and C_NAME (CPU s, user +
# sys of the whole tree); fails on rc != 0.
timeit() {
	name=$1
	shift
	if ! "$PY" "$W/timeit.py" "$W/t.$name" "$@" > "$W/log.$name" 2>&1; then
		echo "bench: $name failed:" >&2
		tail -n 30 "$W/log.$name" >&2
		exit 1
	fi
	# shellcheck disable=SC2034 # t is read by the eval below
	read -r t r _ cpu < "$W/t.$name"
	eval "T_$name=\$t; C_$name=\$cpu; R_$name=\$(awk -v k=$r 'BEGIN { printf \"%.1f\", k / 1024 }')"
}

# profile RATE: the profile for (a), fetching at RATE bytes/s (0: unthrottled).
profile() {
	u=$URL
	[ "$1" = 0 ] || u="$URL?rate=$1"
	cat > "$W/cudnn-bench-$1.json" <<JSON
{
  "name": "cudnn-bench",
  "extends": "a100-ubuntu2204",
  "stages": {
    "cudnn": { "method": "tarball", "version": "$VER", "cuda": "11",
               "url": "$u", "sha256": "$SHA" }
  }
}
JSON
}
printf '%s  %s\n' "$SHA" "$W/b/cudnn.tar.xz" > "$W/b.sha256"
# One fixture root, copied fresh for every (a).
sh "$repo/tests/fixtures/mkroot.sh" "$W/root0" --cuda --ldconfig-cache

echo "bench: $(nproc) CPUs (load average $(cut -d' ' -f1-3 /proc/loadavg)); tarball $XZSIZE bytes xz ($BLOCKS blocks), $RAWSIZE bytes uncompressed; $PAIRS pair(s) per rate, rates (B/s): $RATES"

# Floors, measured in this run (the first curl also warms the server's page cache).
timeit dl curl -sS --fail --cacert "$CA" -o /dev/null "$URL"
timeit sha sha256sum "$TARBALL"
# shellcheck disable=SC2016 # $1... expand in the sh -c child, not here
timeit xz1 sh -c 'xz -d -T1 -c "$1" > /dev/null' sh "$TARBALL"
# shellcheck disable=SC2016 # $1... expand in the sh -c child, not here
timeit xz0 sh -c 'xz -d -T0 -c "$1" > /dev/null' sh "$TARBALL"
mkdir -p "$W/p"
# shellcheck disable=SC2016 # $1... expand in the sh -c child, not here
timeit pipe sh -c 'xz -d -T0 -c "$1" | tar -x -C "$2"' sh "$TARBALL" "$W/p"
rm -rf "$W/p"

# run_a RATE: (a) gpuprov, fresh root, empty cache.
run_a() {
	rm -rf "$W/root"
	cp -a "$W/root0" "$W/root"
	sync
	timeit a "$GPUPROV" --root "$W/root" --ca-file "$CA" install \
		--profile "$W/cudnn-bench-$1.json" --only cudnn --cache-dir /var/cache/gpuprov-bench
	[ -f "$W/root/usr/local/cuda-11.8/cudnn-$VER/lib/libcudnn_cnn_infer.so.$V3" ] ||
		{ echo "bench: gpuprov did not install the libraries" >&2; cat "$W/log.a" >&2; exit 1; }
}
# run_b RATE: (b) curl + sha256sum -c + tar -xJf.
run_b() {
	u=$URL
	[ "$1" = 0 ] || u="$URL?rate=$1"
	rm -rf "$W/b"
	mkdir -p "$W/b/out"
	sync
	# shellcheck disable=SC2016 # $1... expand in the sh -c child, not here
	timeit b sh -c 'curl -sS --fail --cacert "$1" -o "$2/cudnn.tar.xz" "$3" &&
		sha256sum -c --quiet "$4" && tar -xJf "$2/cudnn.tar.xz" -C "$2/out"' \
		sh "$CA" "$W/b" "$u" "$W/b.sha256"
}

# "RATE DL A RA B RB CA CB" lines, one per pair; odd pairs run a first, even b.
: > "$W/pairs"
for rate in $RATES; do
	u=$URL
	[ "$rate" = 0 ] || u="$URL?rate=$rate"
	timeit dlr curl -sS --fail --cacert "$CA" -o /dev/null "$u"
	profile "$rate"
	n=1
	while [ "$n" -le "$PAIRS" ]; do
		if [ $((n % 2)) = 1 ]; then run_a "$rate"; run_b "$rate"; else run_b "$rate"; run_a "$rate"; fi
		# shellcheck disable=SC2154 # timeit sets T_<name> and R_<name> with eval
		echo "$rate $T_dlr $T_a $R_a $T_b $R_b $C_a $C_b" >> "$W/pairs"
		n=$((n + 1))
	done
done
rm -rf "$W/root" "$W/b"

# ---- report ----------------------------------------------------------------
# shellcheck disable=SC2154 # timeit sets T_<name> and R_<name> with eval
"$PY" - "$W/pairs" "$(nproc)" "$XZSIZE" "$BLOCKS" "$MAXBLOCK" "$DECMEM" "$T_dl" "$R_dl" "$T_sha" "$T_xz1" "$R_xz1" "$T_xz0" "$R_xz0" "$T_pipe" "$C_xz1" "$C_xz0" "$C_pipe" <<'PYEOF'
import statistics, sys
pairs_file, ncpu, xzsize = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
blocks, maxblock, decmem = map(int, sys.argv[4:7])
dl, rdl, sha, xz1, rxz1, xz0, rxz0, pipe, cxz1, cxz0, cpipe = map(float, sys.argv[7:])
print("floors:  download (curl -o /dev/null) %.2f s (%.1f MB)  sha256sum %.2f s  "
      "xz -d -T1 %.2f s (%.1f MB)  xz -d -T0 %.2f s (%.1f MB)  xz -d -T0 | tar -x %.2f s"
      % (dl, rdl, sha, xz1, rxz1, xz0, rxz0, pipe))
print("CPU time (user + sys): xz -d -T1 %.2f s, xz -d -T0 %.2f s, xz -d -T0 | tar -x %.2f s; "
      "%d CPUs give %.2f s per wall second" % (cxz1, cxz0, cpipe, ncpu, ncpu))
by_rate = {}
for line in open(pairs_file):
    r, d, a, ra, b, rb, ca, cb = line.split()
    by_rate.setdefault(int(r), []).append(tuple(map(float, (d, a, ra, b, rb, ca, cb))))
peak = max(p[2] for ps in by_rate.values() for p in ps)
target = {0: 0.50, 100000000: 0.45}
for rate, ps in by_rate.items():
    label = "unthrottled" if rate == 0 else "%g MB/s" % (rate / 1e6)
    ratios = [p[1] / p[3] for p in ps]
    med = statistics.median(ratios)
    d = statistics.median(p[0] for p in ps)
    a = statistics.median(p[1] for p in ps)
    b = statistics.median(p[3] for p in ps)
    # The bound at this rate: the slowest floor gpuprov does not beat (within 5%).
    floors = [("network (download, %.0f MB/s achieved)" % (xzsize / d / 1e6), d),
              ("hashing (sha256)", sha), ("decoding, multi-threaded (xz -d -T0)", xz0),
              ("decoding + disk writes, all cores (xz -d -T0 | tar -x)", pipe),
              ("decoding, single-threaded (xz -d -T1)", xz1)]
    cands = [f for f in floors if f[1] <= 1.05 * a]
    name, fl = max(cands, key=lambda f: f[1]) if cands else ("nothing measured", 0.0)
    note = ""
    if "single-threaded" in name and pipe < a:
        note = "; idle cores unused: xz -d -T0 | tar -x does the same work in %.2f s" % pipe
    t = target.get(rate)
    verdict = "" if t is None else " (issue 18 target <= %.2f: %s)" % (t, "met" if med <= t else "MISSED")
    print("%-12s %d pair(s): download floor %.2f s; (a) gpuprov %.2f s, (b) curl + sha256sum -c + tar %.2f s "
          "(medians); median ratio a/b = %.3f [%s]%s on %d CPUs"
          % (label, len(ps), d, a, b, med, " ".join("%.3f" % x for x in ratios), verdict, ncpu))
    print("%-12s judgement: gpuprov (%.2f s) is bound by %s at %.2f s (%.2fx), %.2f s beyond it%s"
          % ("", a, name, fl, a / fl if fl else 0, a - fl, note))
    ca = statistics.median(p[5] for p in ps)
    cb = statistics.median(p[6] for p in ps)
    print("%-12s CPU time: gpuprov %.2f s (%.0f%% of %d CPUs over its wall time), (b) %.2f s"
          % ("", ca, 100 * ca / (a * ncpu), ncpu, cb))
# The stated bound (src/sys/xzpar.h): the single-threaded path's 26 MB, and
# with several blocks up to CPUs + 2 of them held (within (CPUs + 1) x 64 MiB)
# plus one decoder per CPU; a single block decodes on one thread.
threads = min(ncpu, 16)
held = min((threads + 2) * maxblock, (threads + 1) * (64 << 20)) if blocks > 1 and threads > 1 else 0
bound = 26.0 + (held + (threads * decmem if held else 0)) / 1048576
print("gpuprov peak RSS %.1f MB over all runs; stated bound %.1f MB = 26 MB + %d x %.1f MB "
      "(CPUs + 2 blocks, in + out) + %d x %.1f MB (decoders): %s; (b) peak RSS %.1f MB"
      % (peak, bound, threads + 2 if held else 0, maxblock / 1048576, threads if held else 0,
         decmem / 1048576, "within" if peak <= bound else "EXCEEDED",
         max(p[4] for ps in by_rate.values() for p in ps)))
PYEOF

[ "${BENCH_CUDNN_ONLY:-0}" = 1 ] && exit 0

# ---- no-op on a provisioned root (issue 18, target 4) ----------------------
sh "$here/noop.sh" "$GPUPROV"

# ---- a fresh full install: downloads overlap applies (issue 18, target 3) --
[ "${BENCH_OVERLAP:-1}" = 0 ] || sh "$here/overlap.sh" "$GPUPROV"

# ---- scale (issue 10): a 100,000-file journal and a 10 MB profile ----------
if [ "$QUICK" = 1 ]; then
	sh "$here/scale.sh" "$GPUPROV" 10000 1
else
	sh "$here/scale.sh" "$GPUPROV"
fi
