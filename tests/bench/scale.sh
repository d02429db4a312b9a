#!/bin/sh
# gpuprov at scale (issue 10, item 17; issue 18, target 5): times, in
# seconds, and peak RSS of
#   `status` and a no-op `install --only env` on a root whose journal
#   records FILES files, and `profiles lint` of a profile of about MB
#   megabytes (its env stage sets that many bytes of vars).
# Both must be linear: well under a second each at the defaults.
# Called by bench.sh; runs alone too (needs root: gpuprov chroots):
#
#   sh tests/bench/scale.sh [GPUPROV] [FILES] [MB]   (100000 files, 10 MB)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=scale
# shellcheck source=tests/bench/common.sh
. "$here/common.sh"
FILES=${2:-100000}
MB=${3:-10}

W=$(mktemp -d "${TMPDIR:-/tmp}/gpuprov-scale.XXXXXX")
trap 'rm -rf "$W"' EXIT
trap 'exit 130' INT TERM

# seconds CMD...: runs CMD (it must succeed) and prints its wall time, as
# the machine may be busy the CPU time it used, and its peak RSS (GNU
# time's %M: a child of python would be charged python's own RSS).
seconds() {
	"$PY" - "$W/rss" "$@" <<'PYEOF'
import os, resource, subprocess, sys, time
rssfile, cmd = sys.argv[1], sys.argv[2:]
timed = os.access("/usr/bin/time", os.X_OK)
if timed:
    cmd = ["/usr/bin/time", "-f", "%M", "-o", rssfile] + cmd
t = time.monotonic()
p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.monotonic() - t
if p.returncode != 0:
    sys.exit("scale: %s exited %d: %s" % (cmd, p.returncode, p.stderr.decode()))
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
rss = "peak RSS %.1f MB" % (int(open(rssfile).read().split()[-1]) / 1024) if timed else "no GNU time: RSS not measured"
print("%.3f s (cpu %.3f s, %s)" % (wall, ru.ru_utime + ru.ru_stime, rss))
PYEOF
}

# A root with a finished env install, then FILES more records in its journal.
R=$W/root
sh "$repo/tests/fixtures/mkroot.sh" "$R" --cuda --nouveau unloaded
"$GPUPROV" --root "$R" install --profile a100-ubuntu2204 --only env > "$W/first.log" 2>&1 ||
	{ echo "scale: the first install failed:" >&2; cat "$W/first.log" >&2; exit 1; }
"$PY" - "$R/var/lib/gpuprov/state.json" "$FILES" <<'PYEOF'
import hashlib, json, sys
path, n = sys.argv[1], int(sys.argv[2])
with open(path) as f:
    d = json.load(f)
files = d.setdefault("files", {})
for i in range(n):
    files["/opt/scale/lib/file%07d.so" % i] = {
        "sha256": hashlib.sha256(b"%d" % i).hexdigest(), "stage": "cudnn"}
with open(path, "w") as f:
    json.dump(d, f, indent="\t")
    f.write("\n")
PYEOF
t_status=$(seconds "$GPUPROV" --root "$R" status)
t_install=$(seconds "$GPUPROV" --root "$R" install --profile a100-ubuntu2204 --only env)

# A profile of MB megabytes: the catalogue profile with that many vars.
P=$W/scale.json
"$PY" - "$P" "$MB" <<'PYEOF'
import json, sys
path, mb = sys.argv[1], int(sys.argv[2])
target, size, i, vars = mb * 1000000, 0, 0, {}
while size < target:
    k, v = "SCALE_VAR_%07d" % i, "/opt/scale/value/%07d" % i
    vars[k] = v
    size += len(k) + len(v) + 10
    i += 1
doc = {"name": "scale", "extends": "a100-ubuntu2204",
       "stages": {"env": {"cuda_home": "/usr/local/cuda-11.8", "vars": vars}}}
with open(path, "w") as f:
    json.dump(doc, f, indent=2)
PYEOF
t_lint=$(seconds "$GPUPROV" profiles lint "$P")
bytes=$(wc -c < "$P")
echo "scale: $(nproc) CPUs; journal of $FILES files: status $t_status; no-op install --only env $t_install"
echo "scale: profile of $bytes bytes: profiles lint $t_lint"
