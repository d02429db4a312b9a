# Shared helpers for the end-to-end tests: `load helpers` from a .bats file.
#
# The binary under test is $GPUPROV (tests/run.sh sets it; default: the
# repository's ./gpuprov). Every root is built with tests/fixtures/mkroot.sh
# under $BATS_TEST_TMPDIR; nothing outside it is touched. Commands inside the
# roots run chrooted, so these tests need root.

bats_require_minimum_version 1.5.0

REPO_ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
: "${GPUPROV:=$REPO_ROOT/gpuprov}"
MKROOT=$REPO_ROOT/tests/fixtures/mkroot.sh
FIXTURE_PROFILES=$REPO_ROOT/tests/fixtures/profiles
EXPECTED=$BATS_TEST_DIRNAME/expected
PROFILE=a100-ubuntu2204
ONLY=nouveau,env
GPU_DEV=sys/bus/pci/devices/0000:17:00.0
# The day branch end of life is judged on (src/nv/branches.c): fixed, so
# that outputs do not change with the calendar (R535 ended in June 2026).
export GPUPROV_TODAY=2026-12-01
# The system python (a version-manager shim costs ~0.1 s a call).
if [ -z "${PYTHON:-}" ]; then
	PYTHON=python3
	[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
fi

# Prints its arguments (one per line) on stderr and fails.
fail() {
	printf '%s\n' "$@" >&2
	return 1
}

require_root() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (commands run chrooted into the fixture root)"
	[ -x "$GPUPROV" ] || fail "no gpuprov binary at $GPUPROV (run make, or set GPUPROV)"
}

# mkroot DIR [mkroot.sh options]: a fixture root.
mkroot() {
	sh "$MKROOT" "$@" || fail "mkroot.sh $* failed"
}

# gp ARGS...: runs gpuprov with bats' run; stdout in $output, stderr in
# $stderr, exit status in $status.
gp() {
	run --separate-stderr "$GPUPROV" "$@"
}

show_run() {
	printf '%s\n' "exit status: $status" "--- stdout:" "$output" "--- stderr:" "${stderr-}" >&2
}

assert_status() {
	[ "$status" -eq "$1" ] && return 0
	show_run
	fail "expected exit status $1, got $status"
}

# A status that is a documented exit code, not a crash or a signal.
assert_documented_status() {
	case $status in
	0 | 1 | 2 | 3 | 4 | 5 | 6 | 65) return 0 ;;
	esac
	show_run
	fail "exit status $status is not one of gpuprov's exit codes (a crash?)"
}

_has() {
	case $1 in
	*"$2"*) return 0 ;;
	esac
	return 1
}

assert_stdout_has() {
	_has "$output" "$1" && return 0
	show_run
	fail "stdout lacks: $1"
}

assert_stderr_has() {
	_has "${stderr-}" "$1" && return 0
	show_run
	fail "stderr lacks: $1"
}

refute_stdout_has() {
	_has "$output" "$1" || return 0
	show_run
	fail "stdout should not contain: $1"
}

refute_stderr_has() {
	_has "${stderr-}" "$1" || return 0
	show_run
	fail "stderr should not contain: $1"
}

assert_stderr_matches() {
	printf '%s\n' "${stderr-}" | grep -Eq -- "$1" && return 0
	show_run
	fail "stderr does not match the regex: $1"
}

assert_stdout_empty() {
	[ -z "$output" ] && return 0
	show_run
	fail "stdout should be empty"
}

assert_stderr_empty() {
	[ -z "${stderr-}" ] && return 0
	show_run
	fail "stderr should be empty"
}

# Exactly one line on stderr.
# (Not counting the progress lines of a real run: stage and command starts.)
assert_one_stderr_line() {
	local l n=0
	for l in "${stderr_lines[@]}"; do
		[[ "$l" =~ ^gpuprov:\ (stage\ [a-z]+:\ starting|running:\ |still\ running\ ) ]] || n=$((n + 1))
	done
	[ "$n" -eq 1 ] && return 0
	show_run
	fail "expected exactly one line on stderr, got $n"
}

# The usage text: on stderr for errors.
assert_usage_on_stderr() {
	assert_stderr_has "usage: gpuprov"
}

# manifest ROOT [EXCLUDE...]: every entry's path, type, mode, owner, size and
# link target, then the sha256 of every regular file; mtimes are left out.
# EXCLUDE entries are paths relative to ROOT ("var/log/gpuprov.log").
manifest() {
	local root=$1
	shift
	local ex=" "
	for p in "$@"; do
		ex="$ex./$p "
	done
	(
		cd "$root" || exit 1
		find . -printf '%p %y %m %U:%G %s %l\n' | LC_ALL=C sort
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
	) | awk -v ex="$ex" '{
		p = (length($1) == 64 && $1 ~ /^[0-9a-f]+$/) ? $2 : $1
		if (index(ex, " " p " ")) next
		print
	}'
}

# snapshot ROOT NAME [EXCLUDE...]: saves ROOT's manifest as NAME.
snapshot() {
	local root=$1 name=$2
	shift 2
	manifest "$root" "$@" > "$BATS_TEST_TMPDIR/$name.manifest"
}

# assert_unchanged ROOT NAME [EXCLUDE...]: ROOT still matches snapshot NAME.
assert_unchanged() {
	local root=$1 name=$2
	shift 2
	manifest "$root" "$@" > "$BATS_TEST_TMPDIR/$name.now"
	diff -u "$BATS_TEST_TMPDIR/$name.manifest" "$BATS_TEST_TMPDIR/$name.now" >&2 && return 0
	fail "the tree under $root changed (diff above: - before, + after)"
}

# No trace of a real run: no stub command ran, no journal, no run log.
assert_untouched_by_gpuprov() {
	local root=$1
	[ ! -e "$root/var/log/stub-commands.log" ] ||
		fail "a stub command ran:" "$(cat "$root/var/log/stub-commands.log")"
	[ ! -e "$root/var/lib/gpuprov" ] || fail "$root/var/lib/gpuprov was created"
	[ ! -e "$root/var/log/gpuprov.log" ] || fail "$root/var/log/gpuprov.log was created"
}

# assert_same_file EXPECTED ACTUAL
assert_same_file() {
	[ -f "$2" ] || fail "missing: $2"
	cmp -s "$1" "$2" && return 0
	diff -u "$1" "$2" >&2
	fail "$2 differs from $1"
}

# The stub command log of ROOT (empty when none ran).
stub_log() {
	cat "$1/var/log/stub-commands.log" 2>/dev/null || true
}

# stage_names [SEP]: the stage names in run order, joined by SEP (default
# " "), from the binary's stage table (`gpuprov --json stages`): no test
# keeps its own list. stage_names_json: the same as a JSON array.
stage_names() {
	"$GPUPROV" --json stages | "$PYTHON" -c 'import json, sys
print(sys.argv[1].join(s["name"] for s in json.load(sys.stdin)["stages"]))' "${1- }"
}

stage_names_json() {
	"$GPUPROV" --json stages | "$PYTHON" -c 'import json, sys
print(json.dumps([s["name"] for s in json.load(sys.stdin)["stages"]]))'
}

# json_get FILE PYTHON-EXPR: prints the expression evaluated with the parsed
# document as `d` (strings as is, everything else as JSON).
json_get() {
	"$PYTHON" - "$1" "$2" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    d = json.load(f)
v = eval(sys.argv[2], {"d": d})
print(v if isinstance(v, str) else json.dumps(v))
PY
}

# What a reboot does to the fixture: nouveau is gone (the blacklist worked)
# and the kernel has a new boot id.
simulate_reboot() {
	local root=$1
	sed -i '/^nouveau /d' "$root/proc/modules"
	rm -rf "$root/sys/module/nouveau" "$root/sys/bus/pci/drivers/nouveau"
	rm -f "$root/$GPU_DEV/driver"
	# A boot empties /run (tmpfs), reboot-required and its .pkgs with it.
	rm -f "$root/run/reboot-required" "$root/run/reboot-required.pkgs" \
		"$root/var/run/reboot-required" "$root/var/run/reboot-required.pkgs"
	new_boot_id "$root"
}

# A reboot after which nouveau is loaded again: only the boot id changes.
new_boot_id() {
	echo 99999999-aaaa-4bbb-8ccc-dddddddddddd > "$1/proc/sys/kernel/random/boot_id"
}

# --- Processes, fifos and journals (kill.bats) ---

# _proc_stat_field PID N: field N (3 = state, 4 = ppid, 5 = pgrp) of
# /proc/PID/stat, read past the command name (which may hold spaces).
_proc_stat_field() {
	local line rest
	local -a f
	read -r line 2>/dev/null < "/proc/$1/stat" || return 1
	rest=${line##*) }
	f=($rest)
	[ -n "${f[$2 - 3]:-}" ] || return 1
	printf '%s\n' "${f[$2 - 3]}"
}

# proc_running PID: the process exists and has not ended (a zombie has).
proc_running() {
	local st
	[ -n "$1" ] || return 1
	st=$(_proc_stat_field "$1" 3) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# proc_pgid PID: the process group of PID.
proc_pgid() {
	_proc_stat_field "$1" 5
}

# procs_in_root ROOT: the pids (one a line) of running processes chrooted
# into ROOT, such as a stub command gpuprov started there.
procs_in_root() {
	local root p
	[ -d "$1" ] || return 0
	root=$(cd "$1" && pwd -P) || return 1
	for p in /proc/[0-9]*; do
		[ "$p/root" -ef "$root" ] || continue
		proc_running "${p#/proc/}" && printf '%s\n' "${p#/proc/}"
	done
	return 0
}

# open_fifo_reader FIFO VAR: creates FIFO (unless it exists) and opens its
# read end without blocking (through a read-write open held for a moment);
# the fd goes into the variable VAR. A read on it then sees end-of-file once
# no process holds the write end: with a process holding it, that tells the
# moment the process has ended.
open_fifo_reader() {
	local fifo=$1 rw
	[ -p "$fifo" ] || mkfifo "$fifo" || fail "mkfifo $fifo failed"
	exec {rw}<> "$fifo"
	eval "exec {$2}< \"\$fifo\""
	exec {rw}>&-
}

# await_eof FD SECONDS: waits until nothing holds the write end of the fifo
# open on FD (lines that arrive are skipped); fails after SECONDS.
await_eof() {
	local fd=$1 secs=$2 rc _line
	while :; do
		rc=0
		read -r -t "$secs" -u "$fd" _line || rc=$?
		[ "$rc" -eq 0 ] && continue
		[ "$rc" -gt 128 ] && return 1
		return 0
	done
}

# read_fifo_line FIFO PID SECONDS: prints one line written to FIFO. The fifo
# is opened read-write (never blocks on Linux) and read in one-second slices;
# fails at once when process PID has ended, or after SECONDS.
read_fifo_line() {
	local fifo=$1 pid=$2 secs=$3 fd line i
	exec {fd}<> "$fifo"
	for ((i = 0; i < secs; i++)); do
		if read -r -t 1 -u "$fd" line; then
			exec {fd}<&-
			printf '%s\n' "$line"
			return 0
		fi
		proc_running "$pid" || break
	done
	exec {fd}<&-
	fail "nothing arrived on $fifo (pid $pid ended, or $secs s passed)"
}

# temp_files ROOT: gpuprov's temporary files (".#NAME...") anywhere in ROOT.
temp_files() {
	find "$1" -name '.#*'
}

# journal_view FILE: the journal with every "time" and "stat" (a file's
# inode and times) left out, keys sorted: what two runs that did the same
# work must agree on.
journal_view() {
	"$PYTHON" - "$1" <<'PY'
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in ("time", "stat", "started", "ended")}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
with open(sys.argv[1]) as f:
    print(json.dumps(strip(json.load(f)), indent=1, sort_keys=True))
PY
}

# journal_files FILE: "PATH SHA256" for every file the journal records
# (SHA256 "null" for a removal, "link:TARGET" for a symlink gpuprov made;
# the directories it made left out), sorted.
journal_files() {
	"$PYTHON" - "$1" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    d = json.load(f)
for p, rec in sorted(d.get("files", {}).items()):
    if rec.get("dir") is not True:
        print(p, rec.get("sha256") or ("link:" + rec["link"] if rec.get("link") else "null"))
PY
}

# assert_journal_true ROOT: every file the journal of ROOT records is on disk
# with the recorded sha256 (a removed one is absent, a link points where it
# says): it claims nothing that did not happen.
assert_journal_true() {
	local root=$1 path sha have
	while read -r path sha; do
		if [ "$sha" = null ]; then
			[ ! -e "$root$path" ] ||
				{ fail "journal: $path removed, but it exists"; return; }
			continue
		fi
		if [ "${sha#link:}" != "$sha" ]; then
			[ "$(readlink "$root$path")" = "${sha#link:}" ] ||
				{ fail "journal: $path links to ${sha#link:}, but it is $(readlink "$root$path" || echo 'no link')"; return; }
			continue
		fi
		[ -f "$root$path" ] ||
			{ fail "journal: $path written (sha256 $sha), but it is missing"; return; }
		have=$(sha256sum < "$root$path")
		have=${have%% *}
		[ "$have" = "$sha" ] || {
			fail "journal: $path has sha256 $sha, but the file on disk has $have"
			return
		}
	done < <(journal_files "$root/var/lib/gpuprov/state.json")
}

# jeq EXPR VALUE: EXPR (python, the document as d) on $JSON gives VALUE.
jeq() {
	local got
	got=$(json_get "$JSON" "$1") || fail "cannot evaluate $1 on:" "$(cat "$JSON")"
	[ "$got" = "$2" ] && return 0
	fail "JSON $1: expected '$2', got '$got'"
}

# The Ubuntu 22.04 + A100 root with CUDA dirs in $R, and the install of the
# implemented stages on it.
setup_ubuntu_root() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --cuda
}

install_ubuntu() {
	gp --root "$R" install --profile "$PROFILE" --only "$ONLY"
}

# --- cuDNN over loopback HTTPS (cudnn.bats, progress.bats) ------------------

# make_tarball OUT [evil]: a cuDNN-shaped .tar.xz of version $VER (default
# 8.9.7.29); "evil" adds a symlink that leaves the destination. LIB_BYTES
# random bytes make the library incompressible (for progress output).
make_tarball() {
	local ver=${VER:-8.9.7.29}
	local src=$BATS_TEST_TMPDIR/src TOP=cudnn-linux-x86_64-${ver}_cuda11-archive
	local v3=${ver%.*} patch
	patch=${v3##*.}
	rm -rf "$src"
	mkdir -p "$src/$TOP/include" "$src/$TOP/lib"
	printf '#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n' \
		> "$src/$TOP/include/cudnn_version.h"
	printf '#define CUDNN_PATCHLEVEL %s\n' "$patch" \
		>> "$src/$TOP/include/cudnn_version.h"
	printf '#include "cudnn_version.h"\n' > "$src/$TOP/include/cudnn.h"
	if [ -n "${LIB_BYTES-}" ]; then
		head -c "$LIB_BYTES" /dev/urandom > "$src/$TOP/lib/libcudnn.so.$v3"
	else
		printf 'not really a library, version %s\n' "$ver" \
			> "$src/$TOP/lib/libcudnn.so.$v3"
	fi
	ln -s "libcudnn.so.$v3" "$src/$TOP/lib/libcudnn.so.8"
	ln -s libcudnn.so.8 "$src/$TOP/lib/libcudnn.so"
	echo "LICENSE" > "$src/$TOP/LICENSE"
	[ "${2-}" = evil ] && ln -s ../../../../../etc/passwd "$src/$TOP/lib/libevil.so"
	tar -C "$src" --owner=0 --group=0 -cJf "$1" "$TOP"
}

# start_https_server: serves $WWW (created) over HTTPS from
# tests/fixtures/httpd.py on 127.0.0.1; sets PORT and CA. The server's
# stdin and stdout are fifos: its first line is read (bounded wait, no
# polling), and it exits when HTTPD_FD closes (stop_https_server) or after
# 20 minutes, a backstop for a server whose fd a child kept open: a setup
# that installs twice with pip under ASan on a loaded machine outlived the
# 60 s this used to be, and the server was gone for its second install.
# HTTPD_ARGS, when set, adds options (split on spaces: --tree,
# --notify FIFO, --release FIFO); HTTPD_TLS= (empty) serves plain HTTP.
start_https_server() {
	WWW=$BATS_TEST_TMPDIR/www
	mkdir -p "$WWW"
	mkfifo "$BATS_TEST_TMPDIR/httpd.in" "$BATS_TEST_TMPDIR/httpd.out"
	"$PYTHON" "$REPO_ROOT/tests/fixtures/httpd.py" --dir "$WWW" \
		--log "$BATS_TEST_TMPDIR/httpd.log" --tls "${HTTPD_TLS-cudnn-test}" --max-seconds 1200 ${HTTPD_ARGS-} \
		< "$BATS_TEST_TMPDIR/httpd.in" > "$BATS_TEST_TMPDIR/httpd.out" 3>&- &
	exec {HTTPD_FD}> "$BATS_TEST_TMPDIR/httpd.in"
	exec {HTTPD_OUT}< "$BATS_TEST_TMPDIR/httpd.out"
	read -r -t 20 PORT CA <&"$HTTPD_OUT" || fail "httpd.py did not start"
}

# setup_cudnn_root: the fixture root ($R, with CUDA dirs and an ldconfig
# stub that answers -p), the loopback server, cudnn.tar.xz of version $VER
# ($SHA) and the profile $P that installs it.
setup_cudnn_root() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --cuda --ldconfig-cache
	start_https_server
	make_tarball "$WWW/cudnn.tar.xz"
	SHA=$(sha256sum < "$WWW/cudnn.tar.xz" | cut -d' ' -f1)
	write_profile "$SHA"
}

stop_https_server() {
	[ -n "${HTTPD_FD-}" ] && exec {HTTPD_FD}>&-
	[ -n "${HTTPD_OUT-}" ] && exec {HTTPD_OUT}<&-
	return 0
}

# write_profile SHA256 [URL]: $P, a profile extending a100-ubuntu2204 whose
# cudnn stage fetches version $VER from URL (default: cudnn.tar.xz on the
# loopback server).
write_profile() {
	local url=${2:-https://127.0.0.1:$PORT/cudnn.tar.xz}
	P=$BATS_TEST_TMPDIR/cudnn-test.json
	cat > "$P" <<JSON
{
  "name": "cudnn-test",
  "extends": "a100-ubuntu2204",
  "stages": {
    "cudnn": { "method": "tarball", "version": "${VER:-8.9.7.29}", "cuda": "11",
               "url": "$url", "sha256": "$1" }
  }
}
JSON
}

# file_apt_root ROOT REPO [SUITE [APTREPO-OPTION...]] (in setup_file): the
# debootstrapped Debian root of SUITE (debroot.sh's: bookworm, the default,
# or trixie; "" is the default) in ROOT and the stand-in repository of
# tests/fixtures/aptrepo.sh, made with these options, in REPO,
# with the root's own apt sources emptied. Where either cannot be made (not
# root; debroot.sh or aptrepo.sh exit 77) it returns 1 with the reason in
# $BATS_FILE_TMPDIR/skip, which the file's setup turns into a skip.
file_apt_root() {
	local root=$1 repo=$2 suite=${3-} rc=0 why=$BATS_FILE_TMPDIR/skip
	shift 2
	[ $# -eq 0 ] || shift
	if [ "$(id -u)" -ne 0 ]; then
		echo "needs root (chroot)" > "$why"
		return 1
	fi
	# shellcheck disable=SC2086 # no suite: no argument
	sh "$REPO_ROOT/tests/fixtures/debroot.sh" "$root" $suite 2> "$BATS_FILE_TMPDIR/debroot.err" || rc=$?
	if [ "$rc" -eq 77 ]; then
		cp "$BATS_FILE_TMPDIR/debroot.err" "$why"
		return 1
	fi
	[ "$rc" -eq 0 ] || fail "debroot.sh failed:" "$(cat "$BATS_FILE_TMPDIR/debroot.err")"
	rc=0
	sh "$REPO_ROOT/tests/fixtures/aptrepo.sh" "$repo" "$@" 2> "$BATS_FILE_TMPDIR/aptrepo.err" || rc=$?
	if [ "$rc" -eq 77 ]; then
		cp "$BATS_FILE_TMPDIR/aptrepo.err" "$why"
		return 1
	fi
	[ "$rc" -eq 0 ] || fail "aptrepo.sh failed:" "$(cat "$BATS_FILE_TMPDIR/aptrepo.err")"
	: > "$root/etc/apt/sources.list"
	rm -f "$root"/etc/apt/sources.list.d/*
}

# ubuntu_archive_root ROOT [APTREPO-OPTION...] (in setup_file): file_apt_root's
# Debian 12 root in ROOT posing as Ubuntu 22.04 (os-release; the running
# kernel $KVER, default 5.15.0-91-generic, with its headers for DKMS; a
# boot id; no nvidia module loaded), whose only apt source, the archive of
# Canonical's names (source canonical), is the signed stand-in repository
# of tests/fixtures/aptrepo.sh (made with these options in
# $BATS_FILE_TMPDIR/aptrepo) at file:///srv/repo/. Returns 1 as
# file_apt_root does.
ubuntu_archive_root() {
	local root=$1 ar=$BATS_FILE_TMPDIR/aptrepo kver=${KVER:-5.15.0-91-generic}
	shift
	file_apt_root "$root" "$ar" "" "$@" || return 1
	mkdir -p "$root/srv"
	cp -a "$ar/repo" "$root/srv/repo"
	cp "$ar/key.gpg" "$root/usr/share/keyrings/stand-in.gpg"
	echo "deb [signed-by=/usr/share/keyrings/stand-in.gpg] file:///srv/repo/ /" \
		> "$root/etc/apt/sources.list.d/stand-in.list"
	rm -f "$root/etc/os-release"
	printf '%s\n' 'NAME="Ubuntu"' 'VERSION_ID="22.04"' 'ID=ubuntu' 'ID_LIKE=debian' \
		'PRETTY_NAME="Ubuntu 22.04.4 LTS (stand-in)"' > "$root/etc/os-release"
	mkdir -p "$root/proc/sys/kernel/random" "$root/lib/modules/$kver" "$root/boot" \
		"$root/usr/src/linux-headers-$kver"
	echo "$kver" > "$root/proc/sys/kernel/osrelease"
	echo 11111111-2222-4333-8444-555555555555 > "$root/proc/sys/kernel/random/boot_id"
	echo "ahci 45056 2 - Live 0x0000000000000000" > "$root/proc/modules"
	echo "vmlinuz $kver" > "$root/boot/vmlinuz-$kver"
}

# rocky_dnf_root ROOT (in setup_file): the Debian 12 root that carries
# Debian's real dnf, versionlock plugin and rpm (debroot.sh bookworm-dnf),
# posing as Rocky Linux 10 (its os-release, Rocky's dnf.conf, rpm's database
# where Rocky keeps it, /var/lib/rpm), running kernel $KVER (default 6.12.0-55.9.1.el10_0.x86_64),
# with the signed stand-in repository of tests/fixtures/rpmrepo.sh in
# $RR (built into $BATS_FILE_TMPDIR/rpmrepo) and copied to ROOT/srv/rpmrepo.
# No repository is configured: gpuprov writes NVIDIA's, pointed there by
# distro.repo_url. Returns 1 with the reason in $BATS_FILE_TMPDIR/skip where
# the root or the repository cannot be made.
rocky_dnf_root() {
	local root=$1 kver=${KVER:-6.12.0-55.9.1.el10_0.x86_64} rc=0 why=$BATS_FILE_TMPDIR/skip
	RR=$BATS_FILE_TMPDIR/rpmrepo
	export RR
	if [ "$(id -u)" -ne 0 ]; then
		echo "needs root (chroot)" > "$why"
		return 1
	fi
	local step
	for step in "debroot.sh $root bookworm-dnf" "rpmrepo.sh $RR $kver"; do
		rc=0
		# shellcheck disable=SC2086 # a script and its arguments
		sh "$REPO_ROOT"/tests/fixtures/$step 2> "$BATS_FILE_TMPDIR/fixture.err" || rc=$?
		if [ "$rc" -eq 77 ]; then
			cp "$BATS_FILE_TMPDIR/fixture.err" "$why"
			return 1
		fi
		[ "$rc" -eq 0 ] || fail "$step failed:" "$(cat "$BATS_FILE_TMPDIR/fixture.err")"
	done
	mkdir -p "$root/srv" "$root/etc/rpm" "$root/var/lib/rpm"
	cp -a "$RR/repo" "$root/srv/rpmrepo"
	echo '%_dbpath /var/lib/rpm' > "$root/etc/rpm/macros"
	# dnf.conf as Rocky ships it; Debian's dnf-plugins-core also enables
	# the "local" plugin, which Rocky does not install.
	printf '%s\n' '[main]' 'gpgcheck=1' 'installonly_limit=3' 'clean_requirements_on_remove=True' \
		'best=True' 'skip_if_unavailable=False' > "$root/etc/dnf/dnf.conf"
	sed -i 's/^enabled = true/enabled = false/' "$root/etc/dnf/plugins/local.conf"
	rm -f "$root/etc/os-release"
	printf '%s\n' 'NAME="Rocky Linux"' 'VERSION_ID="10.0"' 'ID=rocky' 'ID_LIKE="rhel centos fedora"' \
		'PRETTY_NAME="Rocky Linux 10.0 (stand-in)"' > "$root/etc/os-release"
	mkdir -p "$root/proc/sys/kernel/random" "$root/lib/modules/$kver" "$root/boot"
	echo "$kver" > "$root/proc/sys/kernel/osrelease"
	echo 11111111-2222-4333-8444-555555555555 > "$root/proc/sys/kernel/random/boot_id"
	echo "ahci 45056 2 - Live 0x0000000000000000" > "$root/proc/modules"
	echo "vmlinuz $kver" > "$root/boot/vmlinuz-$kver"
}

# assert_nvidia_set EXPECTED: the NVIDIA driver packages dpkg has in $R (in
# any state but not-installed) are exactly EXPECTED ("name=version" lines,
# sorted), each installed, and apt-mark showhold lists exactly their names
# (upgrade.bats, driver_nvidia_repo.bats).
assert_nvidia_set() {
	local got held want_held
	got=$(chroot "$R" dpkg-query -W -f '${db:Status-Status} ${Package}=${Version}\n' \
		'nvidia-*' 'libnvidia-*' 'linux-modules-nvidia-*' 'cuda-drivers-*' 2> /dev/null |
		awk '$1 != "not-installed" && $1 != "config-files"' | sort -k2)
	held=$(chroot "$R" apt-mark showhold | sort)
	want_held=$(printf '%s\n' "$1" | sed 's/=.*//' | sort)
	[ "$got" = "$(printf '%s\n' "$1" | sed 's/^/installed /')" ] ||
		fail "dpkg has:" "$got" "expected:" "$1"
	[ "$held" = "$want_held" ] || fail "apt-mark showhold:" "$held" "expected:" "$want_held"
}

# journal_edit PYTHON: runs PYTHON on $R's journal document j, then saves
# it (dnf.bats, driver_nvidia_repo.bats).
journal_edit() {
	"$PYTHON" - "$R/var/lib/gpuprov/state.json" "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(j, open(sys.argv[1], "w"))
PY
}

# loaded VERSION [open]: the reboot of $R into the module of VERSION
# happened, of the open flavor when told (upgrade.bats, dnf.bats).
loaded() {
	mkdir -p "$R/proc/driver/nvidia"
	if [ "${2-}" = open ]; then
		printf 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build\n' "$1"
	else
		printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Sun Jan 1\n' "$1"
	fi > "$R/proc/driver/nvidia/version"
	printf '%s\n' "ahci 45056 2 - Live 0x0000000000000000" "nvidia 56000000 0 - Live 0x0" \
		> "$R/proc/modules"
	new_boot_id "$R"
}

# pci_dev ROOT ADDRESS DEVICE CLASS: an NVIDIA PCI function in ROOT's sys/
# (vendor 0x10de), as the GPU and NVSwitch tables read it.
pci_dev() {
	local d=$1/sys/bus/pci/devices/$2
	mkdir -p "$d"
	echo 0x10de > "$d/vendor"
	echo "$3" > "$d/device"
	echo "$4" > "$d/class"
}

# a100_dev ROOT: one A100 (0x20b0, a 3D controller) at $GPU_DEV.
a100_dev() {
	pci_dev "$1" "${GPU_DEV#sys/bus/pci/devices/}" 0x20b0 0x030200
}

# canonical_driver_profile NAME BRANCH VERSION [KERNEL_MODULES]: $P installs
# Canonical's -server driver of BRANCH at VERSION, proprietary modules
# (dkms unless told), held.
canonical_driver_profile() {
	cat > "$P" <<JSON
{
  "name": "$1",
  "extends": "distro/ubuntu2204",
  "stages": { "driver": { "method": "apt", "source": "canonical", "branch": "$2",
    "version": "$3", "flavor": "server", "modules": "proprietary",
    "kernel_modules": "${4:-dkms}", "hold": true } }
}
JSON
}

# --- The container toolkit's stand-in repository (container_toolkit.bats,
# uninstall.bats) ----------------------------------------------------------

# ctk_apt_root [DAEMON-JSON] (in setup_file): file_apt_root in $R and $AR,
# the stand-in repository copied to /srv/ctk-repo as NVIDIA's container
# toolkit repository, and DAEMON-JSON (when given) as the root's own
# daemon.json.
ctk_apt_root() {
	R=$BATS_FILE_TMPDIR/root
	AR=$BATS_FILE_TMPDIR/aptrepo
	export R AR
	file_apt_root "$R" "$AR" || return 0
	mkdir -p "$R/srv"
	cp -a "$AR/repo" "$R/srv/ctk-repo"
	[ -z "${1-}" ] || { mkdir -p "$R/etc/docker" && printf '%s\n' "$1" > "$R/etc/docker/daemon.json"; }
}

# ctk_setup (in setup): the tests named "(stub root)" need neither the
# Debian root nor apt; the others skip when ctk_apt_root could not make it,
# serve the repository's key over loopback HTTPS as "gpgkey" (named as
# NVIDIA names it), set $KSHA and write $P for 1.17.7-1.
ctk_setup() {
	if [[ "$BATS_TEST_DESCRIPTION" == *"(stub root)"* ]]; then
		require_root
		return 0
	fi
	[ ! -e "$BATS_FILE_TMPDIR/skip" ] || skip "$(cat "$BATS_FILE_TMPDIR/skip")"
	start_https_server
	cp "$AR/key.asc" "$WWW/gpgkey"
	KSHA=$(sha256sum < "$AR/key.asc" | cut -d' ' -f1)
	P=$BATS_TEST_TMPDIR/p.json
	ctk_profile 1.17.7-1
}

# ctk_profile VERSION [EXTRA]: $P, Debian 12 with the container toolkit at
# VERSION from the stand-in repository; EXTRA is more of the stage's keys.
ctk_profile() {
	cat > "$P" <<JSON
{
  "name": "ctk-apt",
  "extends": "distro/debian12",
  "distro": { "container_toolkit_repo": {
    "url": "file:///srv/ctk-repo/",
    "keyring_url": "https://127.0.0.1:$PORT/gpgkey",
    "keyring_sha256": "$KSHA",
    "keyring_fingerprint": "$(cat "$AR/key.fpr")" } },
  "stages": { "container_toolkit": { "version": "$1"${2:+, $2} } }
}
JSON
}

# --- Real apt and dpkg (cuda.bats; reusable by driver and cudnn tests) ------

# setup_apt_root: a debootstrapped Debian 12 root in $R (skipped loudly when
# tests/fixtures/debroot.sh cannot build one) with no network sources, the
# stand-in repository from tests/fixtures/aptrepo.sh (built once per file
# into $BATS_FILE_TMPDIR/aptrepo, in $AR) copied to $R/srv/repo, the keyring
# package served over loopback HTTPS ($WWW, $PORT, $CA), and $KSHA, $FPR set.
setup_apt_root() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	debroot "$R"
	local rc=0
	AR=$BATS_FILE_TMPDIR/aptrepo
	if [ ! -s "$AR/key.fpr" ]; then
		rc=0
		sh "$REPO_ROOT/tests/fixtures/aptrepo.sh" "$AR" 2> "$BATS_TEST_TMPDIR/aptrepo.err" || rc=$?
		[ "$rc" -eq 77 ] && skip "$(cat "$BATS_TEST_TMPDIR/aptrepo.err")"
		[ "$rc" -eq 0 ] || fail "aptrepo.sh failed:" "$(cat "$BATS_TEST_TMPDIR/aptrepo.err")"
	fi
	: > "$R/etc/apt/sources.list"
	rm -f "$R"/etc/apt/sources.list.d/*
	mkdir -p "$R/srv"
	cp -a "$AR/repo" "$R/srv/repo"
	start_https_server
	cp "$AR/cuda-keyring_1.1-1_all.deb" "$WWW/"
	KSHA=$(sha256sum < "$AR/cuda-keyring_1.1-1_all.deb" | cut -d' ' -f1)
	FPR=$(cat "$AR/key.fpr")
}

# write_apt_profile FILE STAGES-JSON [FINGERPRINT]: a Debian 12 profile whose
# NVIDIA repository is the stand-in one.
write_apt_profile() {
	cat > "$1" <<JSON
{
  "name": "apt-test",
  "extends": "distro/debian12",
  "distro": {
    "keyring_url": "https://127.0.0.1:$PORT/cuda-keyring_1.1-1_all.deb",
    "keyring_sha256": "$KSHA",
    "keyring_fingerprint": "${3:-$FPR}",
    "repo_url": "file:///srv/repo/"
  },
  "stages": $2
}
JSON
}

# dpkg_status ROOT PACKAGE: "STATUS VERSION" as dpkg-query reads it in ROOT.
dpkg_status() {
	chroot "$1" dpkg-query -W -f '${Status} ${Version}\n' "$2" 2>/dev/null || echo "not-installed"
}

# state ROOT: what uninstall must give back (uninstall.bats, cuda.bats):
# every file (apt's and dpkg's own databases, caches, logs and gpuprov's
# journal and backups left out; ld.so.cache, which the packages' triggers
# rewrite, too), then each package's dpkg status and version, then the
# held set.
state() {
	manifest "$1" | awk '{
		p = (length($1) == 64 && $1 ~ /^[0-9a-f]+$/) ? $2 : $1
		if (p ~ /^\.\/(var\/lib\/apt|var\/lib\/dpkg|var\/cache|var\/log|var\/lib\/gpuprov|etc\/ld\.so\.cache|tmp|run|var\/run)(\/|$)/) next
		print
	}'
	echo "--- dpkg"
	chroot "$1" dpkg-query -W -f '${Package} ${Status} ${Version}\n'
	echo "--- held"
	chroot "$1" apt-mark showhold
}

# --- PyTorch stage (pytorch.bats, pytorch_verify.bats, conda.bats) -----------

# debroot DIR: the cached real Debian 12 root (tests/fixtures/debroot.sh) in
# DIR; the test is skipped, saying why, when it cannot be built here.
debroot() {
	local rc=0
	sh "$REPO_ROOT/tests/fixtures/debroot.sh" "$1" 2> "$1.err" || rc=$?
	[ "$rc" -eq 77 ] && skip "no Debian root: $(tail -1 "$1.err")"
	[ "$rc" -eq 0 ] || fail "debroot.sh failed ($rc):" "$(cat "$1.err")"
}

# fake_torch JSON: what the stand-in torch module reports (mkwheels.py).
fake_torch() {
	printf '%s\n' "$1" > "$R/etc/fake-torch.json"
}

# nvidia_driver VERSION: the loaded NVIDIA module as /proc describes it;
# "none" removes it.
nvidia_driver() {
	rm -rf "$R/proc/driver/nvidia"
	[ "$1" = none ] && return 0
	mkdir -p "$R/proc/driver/nvidia"
	printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Release Build\n' "$1" \
		> "$R/proc/driver/nvidia/version"
}

# setup_torch_root: $R, the Debian root with one A100 that the stand-in torch
# sees and driver 570.86.15 loaded; the loopback HTTPS wheel index of
# mkwheels.py ($BAD_HASH: the project whose links carry a wrong sha256) at
# https://127.0.0.1:$PORT/whl/<tag>; its CA inside the root as $ROOT_CA.
setup_torch_root() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	debroot "$R"
	HTTPD_ARGS=--tree start_https_server
	"$PYTHON" "$REPO_ROOT/tests/fixtures/mkwheels.py" "$WWW" ${BAD_HASH:+--bad-hash "$BAD_HASH"} ||
		fail "mkwheels.py failed"
	ROOT_CA=/etc/ssl/gpuprov-test-ca.pem
	cp "$CA" "$R$ROOT_CA"
	fake_torch '{"available": true, "devices": ["NVIDIA A100-SXM4-80GB"], "cudnn": 90100, "matmul": 8.0}'
	nvidia_driver 570.86.15
}

# torch_profile TAG [TORCH VISION AUDIO] [EXTRA_JSON]: $P, a Debian 12
# profile whose pytorch stage makes a venv in /opt/venv and installs the
# three pins from the loopback index's TAG.
torch_profile() {
	local tag=$1 t=${2:-2.7.1} v=${3:-0.22.1} a=${4:-2.7.1} extra=${5-}
	P=$BATS_TEST_TMPDIR/torch-test.json
	cat > "$P" <<JSON
{
  "name": "torch-test",
  "extends": "distro/debian12",
  "stages": {
    "pytorch": { "method": "venv", "prefix": "/opt/venv",
                 "index_url": "https://127.0.0.1:$PORT/whl/$tag",
                 "ca_bundle": "$ROOT_CA",
                 "packages": ["torch==$t", "torchvision==$v", "torchaudio==$a"]$extra }
  }
}
JSON
}

# dist_version ENV PROJECT: the installed version from its dist-info.
dist_version() {
	local m
	for m in "$1"/lib/python3*/site-packages/"$2"-*.dist-info/METADATA; do
		[ -f "$m" ] && sed -n 's/^Version: //p' "$m"
	done
}

# --- Package stubs and dnf (driver.bats, driver_apt.bats) -------------------

# assert_stdout_line LINE: stdout has exactly this line (leading blanks of
# the plan's indentation included).
assert_stdout_line() {
	printf '%s\n' "$output" | grep -Fxq -- "$1" ||
		fail "stdout lacks the line: $1" "--- stdout:" "$output"
}

# rpmdb_write FILE "NAME [EPOCH:]VERSION-RELEASE"...: an rpm sqlite database
# (rpmdb.sqlite: table Packages of header blobs, as rpm 4.16+ writes it)
# with these packages, for the dnf stub of mkroot.sh --pkg-stubs.
rpmdb_write() {
	"$PYTHON" - "$@" <<'PY'
import sqlite3, struct, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY AUTOINCREMENT, blob BLOB NOT NULL)")
for spec in sys.argv[2:]:
    name, evr = spec.split()
    epoch, _, vr = evr.rpartition(":")
    ver, rel = vr.rsplit("-", 1)
    ents, data = [], b""
    for tag, s in ((1000, name), (1001, ver), (1002, rel)):
        ents.append((tag, 6, len(data), 1))
        data += s.encode() + b"\0"
    if epoch:
        data += b"\0" * (-len(data) % 4)
        ents.append((1003, 4, len(data), 1))
        data += struct.pack(">I", int(epoch))
    blob = struct.pack(">II", len(ents), len(data))
    blob += b"".join(struct.pack(">IIII", *e) for e in ents) + data
    db.execute("INSERT INTO Packages (blob) VALUES (?)", (blob,))
db.commit()
PY
}

# stand_in_key FILE: writes a minimal OpenPGP v4 public key packet (EdDSA,
# random key material; nothing is ever verified with it) and prints its
# fingerprint, for repository tests that need a pin but no signature.
stand_in_key() {
	"$PYTHON" - "$1" <<'PY'
import hashlib, os, struct, sys
oid = bytes.fromhex("2b06010401da470f01")
body = bytes([4]) + struct.pack(">I", 1700000000) + bytes([22, len(oid)]) + oid
body += struct.pack(">H", 263) + b"\x40" + os.urandom(32)
open(sys.argv[1], "wb").write(bytes([0x99]) + struct.pack(">H", len(body)) + body)
pre = bytes([0x99]) + struct.pack(">H", len(body))
print(hashlib.sha1(pre + body).hexdigest().upper())
PY
}

# --- The plan is what the run does ------------------------------------------

# assert_plan_matches_run ROOT ARGS...: `gpuprov --root ROOT plan --json
# ARGS...` on the root as it is, then `gpuprov --root ROOT install --json
# ARGS...` on the same root, and the effects of every stage (type, paths,
# argv, contents, downloads, reboot reasons, in order) must be equal,
# exactly: a diff is shown when they are not. Nothing is normalised: what a
# plan cannot know before the run (a keyring not yet downloaded, apt lists
# not yet refreshed) must be planned at a granularity the run then matches.
# The install's effect events (JSON lines on stderr) must list the same.
# Leaves the install's result in $status/$output/$stderr (its JSON plan).
# PLAN_CMD and RUN_CMD replace "plan" and "install" (uninstall.bats:
# PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall).
assert_plan_matches_run() {
	local root=$1
	shift
	local dir=$BATS_TEST_TMPDIR/plan-vs-run
	mkdir -p "$dir"
	# shellcheck disable=SC2086 # a command and its options
	gp --root "$root" ${PLAN_CMD:-plan} --json "$@"
	[ "$status" -eq 0 ] || [ "$status" -eq 5 ] || { show_run; fail "plan --json failed"; }
	printf '%s\n' "$output" > "$dir/plan.json"
	gp --root "$root" ${RUN_CMD:-install} --json "$@"
	printf '%s\n' "$output" > "$dir/run.json"
	printf '%s\n' "$stderr" > "$dir/events"
	[ "$status" -eq 0 ] || [ "$status" -eq 5 ] || { show_run; fail "install --json failed"; }
	local st=$status out=$output err=$stderr
	"$PYTHON" - "$dir/plan.json" "$dir/run.json" "$dir/events" <<'PY' || return 1
import difflib, json, sys
def dump(effects):
    return json.dumps(effects, indent=1, sort_keys=True)
def effects(path):
    with open(path) as f:
        d = json.load(f)
    return {s["name"]: s["effects"] for s in d["stages"]}
def events(path, stages):
    got = {name: [] for name in stages}
    for line in open(path):
        e = json.loads(line) if line.startswith("{") else {}
        if e.get("event") == "effect":
            got.setdefault(e["stage"], []).append(e["effect"])
    return got
planned = effects(sys.argv[1])
plan = dump(planned)
for name, other in (("run", dump(effects(sys.argv[2]))),
                    ("events", dump(events(sys.argv[3], planned)))):
    if plan != other:
        sys.stderr.write(f"the plan's effects differ from the {name}'s (- plan, + {name}):\n")
        sys.stderr.writelines(difflib.unified_diff(plan.splitlines(True), other.splitlines(True), "plan", name))
        sys.exit(1)
PY
	status=$st output=$out stderr=$err
}

# as_live_host ROOT ARGS...: gpuprov ARGS... run inside the debootstrapped
# ROOT by chroot, so that ROOT is its live host ("/"): the binary and the
# libraries it links (not libc, libm, libresolv: the root's own, Debian 12
# as this host) copied under /opt/gpuprov-test with the catalogue; a
# private mount and pid namespace with its own /proc, so nothing reaches
# this host's. LIVE_PROC_DRIVER=DIR: DIR stands for /proc/driver there
# (nvidia/version: a loaded nvidia module), bind-mounted in that namespace.
# A busybox root (mkroot.sh), which has no C library, gets this host's
# libc and loader too, and a /dev/null for the command runner.
as_live_host() {
	local root=$1 d=$1/opt/gpuprov-test lib own_libc=
	shift
	[ ! -e "$root/usr/lib/x86_64-linux-gnu/libc.so.6" ] || own_libc=1
	if ! cmp -s "$GPUPROV" "$d/gpuprov"; then
		rm -rf "$d"
		mkdir -p "$d/lib"
		cp "$GPUPROV" "$d/gpuprov"
		cp -r "$REPO_ROOT/profiles" "$d/profiles"
		for lib in $(ldd "$GPUPROV" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do
			case $own_libc${lib##*/} in 1libc.so.* | 1libm.so.* | 1libresolv.so.*) ;; *) cp -L "$lib" "$d/lib/" ;; esac
		done
	fi
	if [ -z "$own_libc" ]; then
		mkdir -p "$root/lib64" "$root/dev"
		[ -e "$root/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
		[ -e "$root/dev/null" ] || mknod -m 0666 "$root/dev/null" c 1 3
	fi
	# shellcheck disable=SC2016 # the inner shell's own arguments
	run --separate-stderr unshare --mount --pid --fork --mount-proc="$root/proc" sh -c '
		[ -z "$1" ] || mount --bind "$1" "$2/proc/driver" || exit 99
		r=$2
		shift 2
		exec chroot "$r" /lib64/ld-linux-x86-64.so.2 --library-path /opt/gpuprov-test/lib \
			/opt/gpuprov-test/gpuprov --profile-dir /opt/gpuprov-test/profiles "$@"' \
		sh "${LIVE_PROC_DRIVER:-}" "$root" "$@"
}
