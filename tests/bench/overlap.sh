#!/bin/sh
# gpuprov fresh full install: do downloads overlap applies? (issue 18,
# target 3: wall time <= 1.1 x max(total download time, total apply time)).
# Called by bench.sh; runs alone too (needs root: gpuprov chroots):
#
#   sh tests/bench/overlap.sh [GPUPROV]
#
# A whole profile on a busybox fixture root (tests/fixtures/mkroot.sh
# --pkg-stubs): nouveau (update-initramfs), the driver by its runfile, cuDNN
# by its tarball, PyTorch by conda (the Miniforge installer, then conda
# create and conda install), the env stage; CUDA is on the root already (its
# package in dpkg's status, as noop.sh does). The three downloads, a
# stand-in driver runfile, a cuDNN-shaped .tar.xz and a stand-in Miniforge
# installer padded to their sizes, come from tests/fixtures/httpd.py over
# HTTPS on 127.0.0.1, throttled to one shared link (rate=RATE&link=1: the
# downloads share it however many run at once). The commands are stand-ins
# that sleep for a realistic share of the real ones' time (the sleeps stand
# in for work; nothing waits on them).
#
# Measured, OVERLAP_RUNS times (medians reported):
#   download total: each file alone on the link (curl -o /dev/null), summed
#   apply total:    the install on a fresh root with the three files in its
#                   download cache already
#   wall:           the install on a fresh root with an empty cache
# and the ratio wall / max(download total, apply total) against the target,
# the best a run applying the stages one after another can do on that link
# (so a miss says whether the engine or the stage order is to blame), and
# where the time went (the --json events of the last two installs).
#
# Environment (all optional):
#   BENCH_QUICK=1        small files and short stand-in times (seconds)
#   OVERLAP_RATE=B       the link in bytes/s (default 8 MB/s, quick 16 MB/s)
#   OVERLAP_MB="D C M"   sizes of the driver runfile, the cuDNN tarball, the
#                        Miniforge installer in MB (default "24 40 8",
#                        quick "6 10 2")
#   OVERLAP_SCALE=F      stand-in command times x F (default 1, quick 0.25)
#   OVERLAP_RUNS=N       runs (default 3, quick 1)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=overlap
# shellcheck source=tests/bench/common.sh
. "$here/common.sh"


if [ "${BENCH_QUICK:-0}" = 1 ]; then
	q_rate=16000000 q_mb="6 10 2" q_scale=0.25 q_runs=1
else
	q_rate=8000000 q_mb="24 40 8" q_scale=1 q_runs=3
fi
RATE=${OVERLAP_RATE:-$q_rate}
MB=${OVERLAP_MB:-$q_mb}
SCALE=${OVERLAP_SCALE:-$q_scale}
RUNS=${OVERLAP_RUNS:-$q_runs}
# shellcheck disable=SC2086 # three numbers
set -- $MB
[ $# = 3 ] || { echo "overlap: OVERLAP_MB is three sizes in MB" >&2; exit 2; }
DRV_MB=$1 CUDNN_MB=$2 CONDA_MB=$3
case "$RATE$DRV_MB$CUDNN_MB$CONDA_MB$RUNS" in
*[!0-9]*) echo "overlap: OVERLAP_RATE, OVERLAP_MB and OVERLAP_RUNS are whole numbers" >&2; exit 2 ;;
esac
if [ "$RATE" -lt 1 ] || [ "$RUNS" -lt 1 ]; then
	echo "overlap: OVERLAP_RATE and OVERLAP_RUNS are > 0" >&2
	exit 2
fi

# Stand-in times in seconds at scale 1, from a real install of the kind the
# profiles describe, shrunk about tenfold (as the files are): the initramfs
# rebuild, apt-get installing the driver's DKMS and headers, the driver runfile building its modules (DKMS), the Miniforge
# installer unpacking, conda create solving and linking Python, conda
# install of torch, torchvision and torchaudio.
secs() { awk -v s="$1" -v f="$SCALE" 'BEGIN { printf "%.2f", s * f }'; }
T_INITRAMFS=$(secs 1.5)
T_APT=$(secs 1.5)
T_RUNFILE=$(secs 3)
T_MINIFORGE=$(secs 1.5)
T_CREATE=$(secs 1)
T_INSTALL=$(secs 2)

DRV_VER=580.95.05
VER=8.9.7.29
TOP=cudnn-linux-x86_64-${VER}_cuda11-archive
LIB=usr/lib/x86_64-linux-gnu

W=$(mktemp -d "${TMPDIR:-/tmp}/gpuprov-overlap.XXXXXX")
HTTPD_PID=
cleanup() {
	exec 8<&- 9>&- 2> /dev/null || true
	if [ -n "$HTTPD_PID" ]; then kill "$HTTPD_PID" 2> /dev/null || true; fi
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# pad FILE MB: appends random bytes up to MB MiB (the stand-ins stop
# reading before them; random bytes do not compress).
pad() {
	have=$(wc -c < "$1")
	head -c $(($2 * 1048576 - have)) /dev/urandom >> "$1"
}

WWW=$W/www
mkdir -p "$WWW"
# The driver runfile: run as /bin/sh FILE --silent --dkms ...; it "builds"
# and installs the library the stage checks for, then exits before the
# padding.
cat > "$WWW/NVIDIA-Linux-x86_64-$DRV_VER.run" <<EOF
#!/bin/sh
echo "runfile \$*" >> /var/log/stub-commands.log
sleep $T_RUNFILE
mkdir -p /$LIB
echo stand-in > /$LIB/libnvidia-ml.so.$DRV_VER
exit 0
EOF
pad "$WWW/NVIDIA-Linux-x86_64-$DRV_VER.run" "$DRV_MB"

# The Miniforge installer (bash FILE -b -p PREFIX) and the conda it lays
# out: create makes the environment with its Python's conda-meta record,
# install records each package.
cat > "$W/conda" <<EOF
#!/bin/sh
echo "conda \$*" >> /var/log/stub-commands.log
prefix=\${0%/bin/conda}
cmd=\$1
shift
env= specs=
while [ \$# -gt 0 ]; do
	case \$1 in
	-n) env=\$2; shift ;;
	-c) shift ;;
	-*) ;;
	*) specs="\$specs \$1" ;;
	esac
	shift
done
d=\$prefix/envs/\$env
case \$cmd in
create) sleep $T_CREATE; mkdir -p "\$d/bin" "\$d/conda-meta"; printf '#!/bin/sh\n' > "\$d/bin/python"; chmod 755 "\$d/bin/python" ;;
install) sleep $T_INSTALL ;;
*) exit 0 ;;
esac
for s in \$specs; do
	name=\${s%%=*} ver=\${s##*=}
	[ "\$name" = python ] && ver=\$ver.14
	printf '{"name": "%s", "version": "%s"}\n' "\$name" "\$ver" > "\$d/conda-meta/\$name-\$ver-stub_0.json"
done
EOF
{
	cat <<EOF
#!/bin/sh
echo "installer \$*" >> /var/log/stub-commands.log
prefix=
while [ \$# -gt 0 ]; do
	case \$1 in
	-p) prefix=\$2; shift ;;
	esac
	shift
done
sleep $T_MINIFORGE
mkdir -p "\$prefix/bin" "\$prefix/etc/profile.d" "\$prefix/envs"
printf 'channels:\n  - conda-forge\n' > "\$prefix/.condarc"
echo "conda() { :; }" > "\$prefix/etc/profile.d/conda.sh"
cat > "\$prefix/bin/conda" <<'CONDA'
EOF
	cat "$W/conda"
	# shellcheck disable=SC2016 # $prefix is the installer's, not ours
	printf 'CONDA\nchmod 755 "$prefix/bin/conda"\nexit 0\n'
} > "$WWW/Miniforge3.sh"
pad "$WWW/Miniforge3.sh" "$CONDA_MB"

# The cuDNN tarball: headers and one "library" of random bytes (so xz
# stores it, and decoding costs little: the link is what the bench is about).
src=$W/src/$TOP
mkdir -p "$src/include" "$src/lib"
bench_cudnn_headers "$src"
head -c $((CUDNN_MB * 1048576)) /dev/urandom > "$src/lib/libcudnn.so.8.9.7"
ln -s libcudnn.so.8.9.7 "$src/lib/libcudnn.so.8"
ln -s libcudnn.so.8 "$src/lib/libcudnn.so"
tar -C "$W/src" --owner=0 --group=0 -cf - "$TOP" | xz -0 -T1 > "$WWW/cudnn.tar.xz"
rm -rf "$W/src"

sha() { sha256sum < "$1" | cut -d' ' -f1; }
DRV_SHA=$(sha "$WWW/NVIDIA-Linux-x86_64-$DRV_VER.run")
CUDNN_SHA=$(sha "$WWW/cudnn.tar.xz")
CONDA_SHA=$(sha "$WWW/Miniforge3.sh")

bench_httpd "$WWW" 1800
Q="rate=$RATE&link=1"
U=https://127.0.0.1:$PORT

P=$W/overlap.json
cat > "$P" <<JSON
{
  "name": "overlap-bench",
  "extends": "distro/ubuntu2204",
  "stages": {
    "nouveau": {},
    "driver": { "method": "runfile", "version": "$DRV_VER", "modules": "open",
                "url": "$U/NVIDIA-Linux-x86_64-$DRV_VER.run?$Q", "sha256": "$DRV_SHA" },
    "cuda": { "method": "repo", "version": "11.8", "path": "/usr/local/cuda-11.8" },
    "cudnn": { "method": "tarball", "version": "$VER", "cuda": "11",
               "url": "$U/cudnn.tar.xz?$Q", "sha256": "$CUDNN_SHA" },
    "pytorch": { "method": "conda", "installer": "conda", "prefix": "/opt/conda", "env": "torch",
                 "python": "3.10", "installer_url": "$U/Miniforge3.sh?$Q",
                 "installer_sha256": "$CONDA_SHA", "channels": ["conda-forge"],
                 "packages": ["torch==2.7.1", "torchvision==0.22.1", "torchaudio==2.7.1"] },
    "env": { "cuda_home": "/usr/local/cuda-11.8" }
  }
}
JSON

# The root, copied fresh for every install: nouveau not loaded, CUDA 11.8
# installed, the stand-in commands slowed, bash for the installer.
R0=$W/root0
sh "$repo/tests/fixtures/mkroot.sh" "$R0" --nouveau unloaded --pkg-stubs --cuda --ldconfig-cache
chroot "$R0" /usr/bin/apt-get install cuda-toolkit-11-8 > /dev/null
printf '{"cuda": {"name": "CUDA SDK", "version": "11.8.0"}}\n' > "$R0/usr/local/cuda-11.8/version.json"
mkdir -p "$R0/usr/local/cuda-11.8/bin"
printf '#!/bin/sh\necho "Cuda compilation tools, release 11.8, V11.8.89"\n' > "$R0/usr/local/cuda-11.8/bin/nvcc"
chmod 755 "$R0/usr/local/cuda-11.8/bin/nvcc"
ln -sf busybox "$R0/bin/sleep"
printf '#!/bin/sh\nexec /bin/sh "$@"\n' > "$R0/bin/bash"
chmod 755 "$R0/bin/bash"
stub=$R0/usr/sbin/update-initramfs
{ head -n 1 "$stub"; echo "sleep $T_INITRAMFS"; tail -n +2 "$stub"; } > "$W/stub"
cat "$W/stub" > "$stub"
# apt-get install (the driver's DKMS and kernel headers).
stub=$R0/usr/bin/apt-get
{ head -n 1 "$stub"; echo "case \" \$* \" in *\" install \"*) sleep $T_APT ;; esac"; tail -n +2 "$stub"; } > "$W/stub"
cat "$W/stub" > "$stub"

# The plan must have every stage but the (unused) others needed, or the
# bench measures less than it says.
"$GPUPROV" --root "$R0" --ca-file "$CA" plan --profile "$P" > "$W/plan0.log" 2>&1 || true
for s in nouveau driver cudnn pytorch env; do
	grep -Eq "^\[[0-9]+/[0-9]+\] $s: needed" "$W/plan0.log" ||
		{ echo "overlap: the fresh root's plan does not need $s:" >&2; cat "$W/plan0.log" >&2; exit 1; }
done

# The timer: CMD's wall time and exit status, its stdout to LOG, each line
# of its stderr (--json: one event per line) to LOG.ev after the seconds
# since the start.
cat > "$W/timeit.py" <<'PYEOF'
import subprocess, sys, time
t = time.monotonic()
p = subprocess.Popen(sys.argv[3:], stdout=open(sys.argv[2], "w"), stderr=subprocess.PIPE)
with open(sys.argv[2] + ".ev", "w") as ev:
    for line in p.stderr:
        ev.write("%.3f %s" % (time.monotonic() - t, line.decode(errors="replace")))
rc = p.wait()
with open(sys.argv[1], "w") as f:
    f.write("%.3f %d\n" % (time.monotonic() - t, rc))
PYEOF
# timed NAME OKCODES CMD...: the seconds CMD took, in $T; fails unless its
# exit status is one of OKCODES ("0 5").
timed() {
	name=$1 ok=$2
	shift 2
	"$PY" "$W/timeit.py" "$W/t.$name" "$W/log.$name" "$@"
	read -r T rc < "$W/t.$name"
	case " $ok " in
	*" $rc "*) ;;
	*) echo "overlap: $name exited $rc:" >&2; tail -n 30 "$W/log.$name" >&2; exit 1 ;;
	esac
}

# install NAME [cached]: gpuprov install of the profile on a fresh root
# (the driver leaves a reboot pending: exit 5); with cached, the three
# files are in the root's download cache first.
install() {
	R=$W/root
	rm -rf "$R"
	cp -a "$R0" "$R"
	if [ "${2-}" = cached ]; then
		mkdir -p "$R/var/cache/gpuprov"
		cp "$WWW/NVIDIA-Linux-x86_64-$DRV_VER.run" "$R/var/cache/gpuprov/$DRV_SHA"
		cp "$WWW/cudnn.tar.xz" "$R/var/cache/gpuprov/$CUDNN_SHA"
		cp "$WWW/Miniforge3.sh" "$R/var/cache/gpuprov/$CONDA_SHA"
	fi
	sync
	timed "$1" "0 5" "$GPUPROV" --root "$R" --ca-file "$CA" --json install --profile "$P"
	if [ ! -f "$R/usr/local/cuda-11.8/cudnn-$VER/lib/libcudnn.so.8.9.7" ] ||
		[ ! -f "$R/opt/conda/envs/torch/conda-meta/torch-2.7.1-stub_0.json" ] ||
		! grep -q '^runfile ' "$R/var/log/stub-commands.log"; then
		echo "overlap: $1 did not install everything:" >&2
		cat "$W/log.$1.ev" >&2
		exit 1
	fi
}

echo "overlap: $(nproc) CPUs (load average $(cut -d' ' -f1-3 /proc/loadavg)); link $RATE B/s shared;" \
	"driver runfile $DRV_MB MB, cuDNN $(($(wc -c < "$WWW/cudnn.tar.xz") / 1048576)) MB, Miniforge $CONDA_MB MB;" \
	"stand-in times (s): update-initramfs $T_INITRAMFS, apt-get install $T_APT, runfile $T_RUNFILE, Miniforge $T_MINIFORGE," \
	"conda create $T_CREATE, conda install $T_INSTALL; $RUNS run(s)"
: > "$W/runs"
n=1
while [ "$n" -le "$RUNS" ]; do
	each=
	for f in "NVIDIA-Linux-x86_64-$DRV_VER.run" cudnn.tar.xz Miniforge3.sh; do
		timed dl 0 curl -sS --fail --cacert "$CA" -o /dev/null "$U/$f?$Q"
		each="$each $T"
	done
	# Alternate which install goes first.
	if [ $((n % 2)) = 1 ]; then
		install apply cached
		a=$T
		install wall
		w=$T
	else
		install wall
		w=$T
		install apply cached
		a=$T
	fi
	echo "$a $w$each" >> "$W/runs"
	n=$((n + 1))
done

# Where the time went: the stages and downloads of the last runs, from
# their --json events (seconds since the start).
timeline() {
	echo "overlap: $1, events (s since the start; +N: the seconds it took):"
	"$PY" - "$W/log.$2.ev" <<'PYEOF'
import json, sys
began = {}
for line in open(sys.argv[1]):
    t, _, rest = line.partition(" ")
    try:
        e = json.loads(rest)
    except ValueError:
        continue
    kind = e.get("event", "")
    what = e.get("stage") or e.get("name") or ""
    if kind in ("stage_start", "download_start", "command_start"):
        began[(kind.split("_")[0], what, e.get("command"))] = float(t)
    if kind in ("stage_done", "download_done", "command_done"):
        b = began.get((kind.split("_")[0], what, e.get("command")))
        took = " +%.2f" % (float(t) - b) if b is not None else ""
        extra = e.get("command", "")[:60] if kind == "command_done" else e.get("state", "")
        print("overlap:   %6.2f..%6.2f%-7s %-14s %s %s" % (b if b is not None else float(t), float(t), took,
              kind.split("_")[0], what, extra))
PYEOF
}
timeline "the last fresh install" wall
timeline "the last install from a filled cache" apply

# The report. Besides the target, the best a run can do that applies the
# stages one after another while one link brings the files in the order
# they are needed: a stage that needs a file cannot end before the files up
# to its own have crossed the link (each file's time alone) plus what it
# does with the file (from its first command that names the cached file to
# its end, in the cache-filled run) plus the stages after it.
"$PY" - "$W/runs" "$(nproc)" "$W/log.apply.ev" "driver $DRV_SHA" "cudnn $CUDNN_SHA" "pytorch $CONDA_SHA" <<'PYEOF'
import json, statistics, sys
runs = [list(map(float, l.split())) for l in open(sys.argv[1])]
ap = statistics.median(r[0] for r in runs)
wall = statistics.median(r[1] for r in runs)
each = [statistics.median(r[2 + i] for r in runs) for i in range(3)]
dl = sum(each)
ratios = [r[1] / max(sum(r[2:5]), r[0]) for r in runs]
ratio = statistics.median(ratios)
needs = [a.split() for a in sys.argv[4:7]]
start, done, first_use = {}, {}, {}
for line in open(sys.argv[3]):
    t, _, rest = line.partition(" ")
    try:
        e = json.loads(rest)
    except ValueError:
        continue
    st, kind = e.get("stage"), e.get("event")
    if kind == "stage_start":
        start[st] = float(t)
    elif kind == "stage_done":
        done[st] = float(t)
    elif kind == "command_start":
        for stage, sha in needs:
            if stage == st and sha in e.get("command", "") and st not in first_use:
                first_use[st] = float(t)
order = sorted(done, key=lambda s: done[s])
bound, arrived, why = ap, 0.0, "the applies alone"
for (stage, _), took in zip(needs, each):
    arrived += took
    use = first_use.get(stage, done[stage])  # cudnn: extracts as it arrives
    rest = done[order[-1]] - done[stage]
    b = arrived + (done[stage] - use) + rest
    if b > bound:
        bound, why = b, "%s's file at %.2f s, then %.2f s of its own work and %.2f s of later stages" % (
            stage, arrived, done[stage] - use, rest)
print("overlap: download total %.2f s (each file alone on the link: %s), apply total %.2f s "
      "(cache filled), fresh install wall %.2f s (medians of %d)"
      % (dl, " + ".join("%.2f" % x for x in each), ap, wall, len(runs)))
print("overlap: wall / max(download, apply) = %.3f [%s] (issue 18 target <= 1.10: %s) on %s CPUs "
      "(load average %s); no overlap at all would give %.3f"
      % (ratio, " ".join("%.3f" % x for x in ratios), "met" if ratio <= 1.10 else "MISSED",
         sys.argv[2], " ".join(open("/proc/loadavg").read().split()[:3]), (dl + ap) / max(dl, ap)))
print("overlap: stages applied one after another on one link can do no better than %.2f s "
      "(%.3f x max(download, apply); bound by %s): wall is %.3f x that"
      % (bound, bound / max(dl, ap), why, wall / bound))
PYEOF
