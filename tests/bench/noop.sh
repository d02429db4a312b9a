#!/bin/sh
# gpuprov no-op on a provisioned host (issue 18, target 4): median wall time,
# CPU time (user+sys: what a loaded machine does not inflate by the time a
# command waits for a CPU) and peak RSS of `install`, `plan` and
# `verify --only` on a fixture root
# where every stage but pytorch is satisfied, against the issue's targets
# (<= 20 ms, <= 8 MB), then a syscall profile of one no-op install
# (strace -c -f) and, where the kernel lets it, `perf stat`.
# Called by bench.sh; runs alone too (needs root: gpuprov chroots):
#
#   sh tests/bench/noop.sh [GPUPROV] [RUNS]          (default 21 runs)
#
# The reference, measured in the same run where ansible-playbook is
# installed: an Ansible playbook checking the same files and packages
# (NOOP_ANSIBLE_RUNS runs, default 3), and each command's ratio to it.
#
# The root (tests/fixtures/mkroot.sh --pkg-stubs): nouveau blacklisted and
# not loaded; the driver installed by gpuprov through the apt stubs (its
# packages in dpkg's status file, held) and "loaded" (/proc/driver/nvidia);
# cuda-toolkit-11-8 in dpkg's status with a version.json; a cuDNN tarball of
# FILES (default 271) files installed by gpuprov from a loopback HTTPS
# server; the env stage's files. Not covered: the pytorch stage (its check
# runs the environment's Python, which a busybox root lacks) and verify's GPU
# probes (the driver's NVML query), so verify runs --only the other four.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=noop
# shellcheck source=tests/bench/common.sh
. "$here/common.sh"
RUNS=${2:-21}
FILES=${NOOP_FILES:-271}
VER=8.9.7.29
TOP=cudnn-linux-x86_64-${VER}_cuda11-archive

W=$(mktemp -d "${TMPDIR:-/tmp}/gpuprov-noop.XXXXXX")
HTTPD_PID=
cleanup() {
	exec 8<&- 9>&-
	# The server has gone already when its stdin was closed.
	if [ -n "$HTTPD_PID" ]; then kill "$HTTPD_PID" 2> /dev/null || true; fi
	# NOOP_KEEP=DIR keeps the provisioned root for profiling: moved, not
	# copied, so the cuDNN files keep the inodes and ctimes the journal
	# recorded (a copy would have every one of them hashed).
	if [ -n "${NOOP_KEEP-}" ]; then
		rm -rf "$NOOP_KEEP"
		mv "$W" "$NOOP_KEEP"
	fi
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

R=$W/root
sh "$repo/tests/fixtures/mkroot.sh" "$R" --cuda --nouveau unloaded --pkg-stubs --ldconfig-cache

# The cuDNN tarball: FILES files (headers and small "libraries").
src=$W/src/$TOP
mkdir -p "$src/include" "$src/lib"
bench_cudnn_headers "$src"
printf 'not really a library\n' > "$src/lib/libcudnn.so.8.9.7"
ln -s libcudnn.so.8.9.7 "$src/lib/libcudnn.so.8"
ln -s libcudnn.so.8 "$src/lib/libcudnn.so"
i=6
while [ "$i" -lt "$FILES" ]; do
	printf '/* part %d */\n' "$i" > "$src/include/cudnn_part_$i.h"
	i=$((i + 1))
done
mkdir -p "$W/www"
tar -C "$W/src" --owner=0 --group=0 -cJf "$W/www/cudnn.tar.xz" "$TOP"
SHA=$(sha256sum < "$W/www/cudnn.tar.xz" | cut -d' ' -f1)

bench_httpd "$W/www" 600

P=$W/noop.json
cat > "$P" <<JSON
{
  "name": "noop-bench",
  "extends": "a100-ubuntu2204",
  "stages": {
    "cudnn": { "method": "tarball", "version": "$VER", "cuda": "11",
               "url": "https://127.0.0.1:$PORT/cudnn.tar.xz", "sha256": "$SHA" }
  }
}
JSON

# provision ARGS...: a gpuprov install that must succeed (5: it did, and
# asks for a reboot).
provision() {
	rc=0
	"$GPUPROV" --root "$R" --ca-file "$CA" install --profile "$P" "$@" > "$W/prov.log" 2>&1 || rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 5 ] ||
		{ echo "noop: provisioning ($*) failed ($rc):" >&2; tail -n 30 "$W/prov.log" >&2; exit 1; }
}
provision --only nouveau,driver
# The reboot: a new boot id, the module loaded.
echo 22222222-3333-4444-8555-666666666666 > "$R/proc/sys/kernel/random/boot_id"
mkdir -p "$R/proc/driver/nvidia" "$R/sys/bus/pci/drivers/nvidia"
printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Release Build\n' \
	> "$R/proc/driver/nvidia/version"
chroot "$R" /usr/bin/apt-get install cuda-toolkit-11-8 > /dev/null
printf '{"cuda": {"name": "CUDA SDK", "version": "11.8.0"}}\n' > "$R/usr/local/cuda-11.8/version.json"
mkdir -p "$R/usr/local/cuda-11.8/bin"
printf '#!/bin/sh\necho "Cuda compilation tools, release 11.8, V11.8.89"\n' > "$R/usr/local/cuda-11.8/bin/nvcc"
chmod 755 "$R/usr/local/cuda-11.8/bin/nvcc"
provision --only cuda,cudnn,env
# After the "reboot" a first full run settles the journal (the pending
# reboot is cleared); the measured runs then change nothing.
provision --skip pytorch
exec 9>&-
"$GPUPROV" --root "$R" plan --profile "$P" --skip pytorch > "$W/plan.log" 2>&1 ||
	{ echo "noop: the provisioned root is not satisfied:" >&2; cat "$W/plan.log" >&2; exit 1; }
installed=$(find "$R/usr/local/cuda-11.8/cudnn-$VER" | wc -l)

# The reference: an Ansible playbook (Debian's ansible-playbook, local
# connection, no facts gathered) that checks what the no-op install checks,
# and changes nothing: nouveau's blacklist and /proc/modules, the driver's
# and CUDA's packages installed and held (dpkg-query on the root's
# database), CUDA's version.json, every file of the cuDNN tree hashed
# (find with checksums: one module, not one per file), its links in
# include/ and lib64/, the ld.so.conf.d files and the env stage's files.
PLAYBOOK=
if command -v ansible-playbook > /dev/null 2>&1; then
	PLAYBOOK=$W/noop-playbook.yml
	pkgs=$(sed -n 's/^Package: //p' "$R/var/lib/dpkg/status" | tr '\n' ' ')
	cat > "$PLAYBOOK" <<YAML
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    root: "$R"
  tasks:
    - name: nouveau blacklisted
      ansible.builtin.stat: { path: "{{ root }}/etc/modprobe.d/blacklist-nouveau.conf", get_checksum: true }
      register: bl
      failed_when: not bl.stat.exists
    - name: nouveau not loaded
      ansible.builtin.slurp: { src: "{{ root }}/proc/modules" }
      register: mods
      failed_when: "'nouveau ' in (mods.content | b64decode)"
    - name: packages installed and held
      ansible.builtin.command: dpkg-query --admindir={{ root }}/var/lib/dpkg -W -f='\${Package} \${db:Status-Abbrev}\n' $pkgs
      register: q
      changed_when: false
      failed_when: q.rc != 0 or q.stdout_lines | reject('search', ' [hi]i ') | list | length > 0
    - name: driver loaded
      ansible.builtin.stat: { path: "{{ root }}/proc/driver/nvidia/version" }
      register: drv
      failed_when: not drv.stat.exists
    - name: CUDA version
      ansible.builtin.slurp: { src: "{{ root }}/usr/local/cuda-11.8/version.json" }
      register: cv
      failed_when: "'11.8' not in (cv.content | b64decode)"
    - name: cuDNN files hashed
      ansible.builtin.find: { paths: "{{ root }}/usr/local/cuda-11.8/cudnn-$VER", recurse: true, file_type: any, get_checksum: true }
      register: tree
      failed_when: tree.matched < $((installed - 3))
    - name: cuDNN links
      ansible.builtin.find: { paths: ["{{ root }}/usr/local/cuda-11.8/include", "{{ root }}/usr/local/cuda-11.8/lib64"], file_type: link, patterns: ["cudnn*", "libcudnn*"] }
      register: links
      failed_when: links.matched == 0
    - name: linker and environment files
      ansible.builtin.stat: { path: "{{ root }}/{{ item }}", get_checksum: true }
      loop: [etc/ld.so.conf.d/gpuprov-cudnn.conf, etc/ld.so.conf.d/gpuprov-cuda.conf, etc/profile.d/gpuprov-cuda.sh]
      register: envf
      failed_when: not envf.stat.exists
YAML
	export ANSIBLE_HOME="$W/ansible" ANSIBLE_LOCAL_TEMP="$W/ansible/tmp" \
		ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3 ANSIBLE_LOCALHOST_WARNING=false \
		ANSIBLE_INVENTORY_UNPARSED_WARNING=false ANSIBLE_NOCOLOR=1
	ansible-playbook "$PLAYBOOK" > "$W/ansible.log" 2>&1 ||
		{ echo "noop: the Ansible reference playbook failed:" >&2; tail -n 30 "$W/ansible.log" >&2; exit 1; }
	grep -q 'changed=0' "$W/ansible.log" ||
		{ echo "noop: the Ansible reference playbook changed something:" >&2; tail -n 5 "$W/ansible.log" >&2; exit 1; }
fi

# Median wall time and peak RSS of RUNS runs of each command, against the
# spawn of busybox `true` in the same run. The RSS is /usr/bin/time's %M: a
# child of python would be charged python's own RSS (Linux credits the
# memory held before exec to ru_maxrss), time's child starts small.
"$PY" - "$RUNS" "$installed" "$(nproc)" "$R/bin/busybox" true -- \
	"$GPUPROV" --root "$R" install --profile "$P" --skip pytorch -- \
	"$GPUPROV" --root "$R" plan --profile "$P" --skip pytorch -- \
	"$GPUPROV" --root "$R" verify --profile "$P" --only nouveau,cuda,cudnn,env \
	${PLAYBOOK:+-- ansible-playbook "$PLAYBOOK"} <<'PYEOF'
import os, statistics, subprocess, sys, tempfile, time
runs, files, ncpu = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
ansible_runs = int(os.environ.get("NOOP_ANSIBLE_RUNS", "3"))
cmds, cur = [], []
for a in sys.argv[4:] + ["--"]:
    if a == "--":
        cmds.append(cur)
        cur = []
    else:
        cur.append(a)
names = ["spawn floor (busybox true)", "install (no-op)", "plan", "verify --only nouveau,cuda,cudnn,env"]
res = []
timer = "/usr/bin/time"
if not os.access(timer, os.X_OK):
    sys.exit("noop: needs GNU time as /usr/bin/time (Debian: apt-get install time)")
fd, rssfile = tempfile.mkstemp(prefix="gpuprov-noop-rss.")
os.close(fd)
for cmd in cmds:
    walls, cpus, rss = [], [], 0
    for _ in range(ansible_runs if cmd[0] == "ansible-playbook" else runs):
        t = time.monotonic()
        p = subprocess.Popen([timer, "-f", "%M", "-o", rssfile] + cmd,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        walls.append(time.monotonic() - t)
        # user+sys of time and what it waited for (the command and its
        # children): on a loaded machine the figure that does not count
        # the time spent waiting for a CPU.
        cpus.append(ru.ru_utime + ru.ru_stime)
        if rc != 0:
            sys.exit("noop: %s exited %d" % (cmd, rc))
        with open(rssfile) as f:
            rss = max(rss, int(f.read().split()[-1]))
    res.append((statistics.median(walls), min(walls), rss / 1024, statistics.median(cpus)))
os.unlink(rssfile)
floor = res[0][0]
print("noop: %d CPUs (load average %s); root with every stage but pytorch satisfied, cuDNN tree of %d entries; %d runs each"
      % (ncpu, " ".join(open("/proc/loadavg").read().split()[:3]), files, runs))
ansible = res[4] if len(res) > 4 else None
if ansible:
    names.append("reference: ansible-playbook (same checks)")
for name, (med, best, rss, cpu) in zip(names, res):
    extra = ""
    if ansible and name != names[0] and name != names[-1]:
        extra = "; Ansible takes %.0fx as long (target >= 200x: %s)" % (
            ansible[0] / med, "met" if ansible[0] / med >= 200 else "MISSED")
    if name != names[0] and (not ansible or name != names[-1]):
        extra = " (%.1fx the spawn floor); targets <= 20 ms: %s, <= 8 MB: %s%s" % (
            med / floor, "met" if med <= 0.020 else "MISSED", "met" if rss <= 8 else "MISSED",
            extra)
    print("noop: %-40s median %6.1f ms (best %6.1f ms), CPU (user+sys) %6.1f ms, peak RSS %5.1f MB%s"
          % (name, med * 1000, best * 1000, cpu * 1000, rss, extra))
if not ansible:
    print("noop: no ansible-playbook here (Debian: apt-get install ansible): no reference")
PYEOF

# Where the time goes: syscalls of one no-op install, children included.
INSTALL="$GPUPROV --root $R install --profile $P --skip pytorch"
if command -v strace > /dev/null 2>&1; then
	# shellcheck disable=SC2086 # INSTALL is split into argv on purpose (no spaces in W)
	strace -f -c -o "$W/strace.c" $INSTALL > /dev/null 2>&1 || true
	# shellcheck disable=SC2086
	strace -f -e trace=execve,openat,openat2,clone,clone3,vfork -o "$W/strace.t" $INSTALL > /dev/null 2>&1 || true
	echo "noop: strace -c -f of one no-op install (top 8 by time):"
	awk '/^------/ { n++; next } n == 1 && NF >= 5 { print }' "$W/strace.c" |
		sort -k2,2nr | head -8 | awk '{ printf "noop:   %-14s %6s%% %7s us/call %7s calls\n", $NF, $1, $3, $4 }'
	tot=$(awk '$NF == "total" { print $4 }' "$W/strace.c")
	spawns=$(grep -cE 'execve\(' "$W/strace.t" || true)
	opens=$(grep -cE 'openat2?\(' "$W/strace.t" || true)
	dpkg=$(grep -cE 'openat2?\(.*var/lib/dpkg/status' "$W/strace.t" || true)
	modfiles=$(grep -cE 'openat2?\(.*(lib/modules|modprobe\.d|sys/module)' "$W/strace.t" || true)
	cudnnf=$(grep -cE "openat2?\\(.*usr/local/cuda-11.8/(cudnn-$VER|include|lib64)" "$W/strace.t" || true)
	echo "noop:   $tot syscalls in all; $spawns execve (gpuprov itself included), $opens openat:" \
		"$dpkg of var/lib/dpkg/status, $modfiles of modules/modprobe.d, $cudnnf in the cuDNN tree and its links"
	grep -E 'execve\(' "$W/strace.t" | sed 's/.*execve("\([^"]*\)".*/\1/' | sort | uniq -c |
		sort -rn | head -5 | sed 's/^/noop:   spawned: /'
else
	echo "noop: no strace here: no syscall profile"
fi
# shellcheck disable=SC2086 # INSTALL is split into argv on purpose
if command -v perf > /dev/null 2>&1 &&
	perf stat -r 5 -e task-clock,user_time,system_time -x, -o "$W/perf.stat" -- $INSTALL > /dev/null 2>&1; then
	echo "noop: perf stat of a no-op install (mean of 5): $(awk -F, '
		$3 == "task-clock" { t = $1 } $3 == "user_time" { u = $1 / 1e6 } $3 == "system_time" { s = $1 / 1e6 }
		END { printf "%.1f ms task-clock, %.1f ms user, %.1f ms system", t, u, s }' "$W/perf.stat")"
	# shellcheck disable=SC2086
	if perf record -q -e cpu-clock -F 5000 -o "$W/perf.data" -- $INSTALL > /dev/null 2>&1; then
		echo "noop: perf record (cpu-clock) of one no-op install, CPU time by object:"
		perf report -i "$W/perf.data" --stdio --sort dso 2> /dev/null | grep -v '^#' | grep . |
			head -6 | sed 's/^ */noop:   /'
		echo "noop: ... and by function (self time, top 10):"
		perf report -i "$W/perf.data" --stdio --no-children --sort sym 2> /dev/null |
			grep -v '^#' | grep . | head -10 | sed 's/^ */noop:   /'
	fi
	# Where the time goes (perf record -g of 60 no-op installs, 2026-12-04,
	# 2 idle cores, 11 ms each): the kernel about 40% (lstat, readlinkat
	# and getdents of the cuDNN tree, opens, page faults); the journal's
	# load 9% (cJSON, the duplicate-key check, the file index); cudnn's
	# check 10% (one fstatat per recorded file, and the drift check's
	# second walk 4%; one readlinkat per link); strcmp 5% (cJSON's lookups
	# by key over every file record, per stage); nouveau's libkmod copy 2%;
	# the profile's load 2%. Gone since 2026-12-02: the `ldconfig -p` child
	# (the cache is read from /etc/ld.so.cache), OpenSSL's provider load.
	echo "noop: where the time goes (perf, 2026-12-04): the kernel about 40%; journal load 9%;" \
		"cudnn's check 10% (fstatat per file, the drift check's second walk 4%, readlinkat" \
		"per link); strcmp 5% (journal lookups by key); nouveau's libkmod copy 2%; profile 2%"
else
	echo "noop: perf stat does not work here (perf_event_open refused in this container, or no perf)"
fi
