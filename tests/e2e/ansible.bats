#!/usr/bin/env bats
# The Ansible role (dist/ansible/roles/gpuprov) with the real
# ansible-playbook of Debian 12 against three chroot hosts
# (community.general.chroot), each a copy of the debootstrapped Debian 12
# root (debroot.sh; python3 is in it, which the connection needs) with
# fixture GPU files: an A100 with nouveau loaded, the running kernel, a CUDA
# directory and a stand-in update-initramfs (minbase has no
# initramfs-tools). The package is built once (dist/mkdeb.sh) and the role
# installs it with the host's apt-get and dpkg; its library dependencies
# are in the hosts already (debdeps.sh), as a mirror would provide them.
# gpuprov runs inside each chroot as it would on the host (--root /).
#
#   fresh        nothing provisioned
#   provisioned  the package, the site profile, installed and rebooted
#   mismatch     an H100 (10de:2330), which the A100 site profile refuses
#   fromrepo     as fresh, outside the group gpu: the package from a signed
#                local apt repository (a site mirror), not from a file
#
# The tests run in order on those hosts: check mode, a failed canary, the
# real run, the reboot path, a second run, a verify that fails, the
# package from the repository.

load helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-600}
KVER=6.1.0-18-amd64

need_tool() {
	command -v "$1" > /dev/null 2>&1 && return 0
	if [ -n "${GPUPROV_REQUIRE_REAL:-}" ] && [ "$GPUPROV_REQUIRE_REAL" != 0 ]; then
		fail "$1 is not installed (make deps) and GPUPROV_REQUIRE_REAL is set"
		return 1
	fi
	echo "$1 is not installed (make deps)" > "$BATS_FILE_TMPDIR/skip"
	return 1
}

# fixture_host DIR: the GPU server parts of a host in the Debian root DIR.
fixture_host() {
	local r=$1
	mkdir -p "$r/proc/sys/kernel/random" "$r/lib/modules/$KVER" "$r/boot" "$r/$GPU_DEV" \
		"$r/sys/module/nouveau" "$r/sys/bus/pci/drivers/nouveau" \
		"$r/usr/local/cuda/bin" "$r/usr/local/cuda/lib64"
	echo "$KVER" > "$r/proc/sys/kernel/osrelease"
	echo 11111111-2222-4333-8444-555555555555 > "$r/proc/sys/kernel/random/boot_id"
	printf '%s\n' "ahci 45056 2 - Live 0x0000000000000000" \
		"nouveau 2314240 0 - Live 0x0000000000000000" > "$r/proc/modules"
	echo "vmlinuz $KVER" > "$r/boot/vmlinuz-$KVER"
	echo 0x10de > "$r/$GPU_DEV/vendor"
	echo 0x20b0 > "$r/$GPU_DEV/device"
	echo 0x030200 > "$r/$GPU_DEV/class"
	ln -s ../../../bus/pci/drivers/nouveau "$r/$GPU_DEV/driver"
	cat > "$r/usr/sbin/update-initramfs" <<'SH'
#!/bin/sh
# Stand-in: what update-initramfs -u leaves, a new image of the running kernel's.
k=$(cat /proc/sys/kernel/osrelease)
echo "initramfs for $k" > "/boot/initrd.img-$k"
SH
	# The reboot the role's handler runs (gpuprov_reboot_command): what a
	# boot does to the fixture (helpers.bash simulate_reboot), and a new
	# boot id, which is how the reboot module sees the host came back.
	cat > "$r/usr/local/sbin/fixture-reboot" <<SH
#!/bin/sh
set -e
sed -i '/^nouveau /d' /proc/modules
rm -rf /sys/module/nouveau /sys/bus/pci/drivers/nouveau /$GPU_DEV/driver
rm -f /run/reboot-required /run/reboot-required.pkgs
python3 -c 'import uuid; print(uuid.uuid4())' > /proc/sys/kernel/random/boot_id
SH
	chmod 0755 "$r/usr/sbin/update-initramfs" "$r/usr/local/sbin/fixture-reboot"
}

setup_file() {
	local t
	for t in ansible-playbook ansible-lint dpkg-buildpackage dh; do
		need_tool "$t" && continue
		# A skip, unless GPUPROV_REQUIRE_REAL made it a failure.
		[ -e "$BATS_FILE_TMPDIR/skip" ] && return 0
		return 1
	done
	H=$BATS_FILE_TMPDIR/hosts
	export H
	local base=$H/base rc=0
	[ "$(id -u)" -eq 0 ] || skip "needs root (chroot)"
	mkdir -p "$H"
	debroot "$base"
	# No network sources: apt-get installs the package file from the
	# dependencies the hosts have.
	: > "$base/etc/apt/sources.list"
	rm -f "$base"/etc/apt/sources.list.d/*
	VERSION=$(sed -n 's/^VERSION := //p' "$REPO_ROOT/Makefile")
	sh "$REPO_ROOT/dist/mkdeb.sh" "$BATS_FILE_TMPDIR/deb" "$VERSION" > "$BATS_FILE_TMPDIR/build.log" 2>&1 ||
		rc=$?
	[ "$rc" -eq 0 ] || fail "make deb failed ($rc):" "$(tail -30 "$BATS_FILE_TMPDIR/build.log")"
	DEB=$(tail -1 "$BATS_FILE_TMPDIR/build.log")
	export DEB VERSION
	local deps
	deps=$(sh "$REPO_ROOT/tests/fixtures/debdeps.sh" "$base" "$DEB" 2> "$BATS_FILE_TMPDIR/debdeps.err") ||
		rc=$?
	if [ "$rc" -eq 77 ]; then
		tail -1 "$BATS_FILE_TMPDIR/debdeps.err" > "$BATS_FILE_TMPDIR/skip"
		return 0
	fi
	[ "$rc" -eq 0 ] || fail "debdeps.sh failed ($rc):" "$(cat "$BATS_FILE_TMPDIR/debdeps.err")"
	mkdir -p "$base/tmp/deps"
	cp "$deps"/*.deb "$base/tmp/deps/"
	chroot "$base" sh -c 'dpkg -i /tmp/deps/*.deb' > "$BATS_FILE_TMPDIR/deps.log" 2>&1 ||
		fail "the dependencies do not install:" "$(tail -20 "$BATS_FILE_TMPDIR/deps.log")"
	rm -rf "$base/tmp/deps"
	fixture_host "$base"

	# The site profile: nouveau off and the CUDA environment, on an A100.
	SITE=$BATS_FILE_TMPDIR/site-a100.json
	cat > "$SITE" <<'JSON'
{
  "name": "site-a100",
  "description": "A100 on Debian 12: nouveau off, the CUDA environment",
  "extends": "distro/debian12",
  "match": { "gpus": ["10de:20b0"] },
  "stages": {
    "nouveau": {},
    "env": { "cuda_home": "/usr/local/cuda", "vars": { "NCCL_DEBUG": "WARN" } }
  }
}
JSON
	export SITE
	cp -a "$base" "$H/fresh"
	cp -a "$base" "$H/fromrepo"
	cp -a "$base" "$H/mismatch"
	echo 0x2330 > "$H/mismatch/$GPU_DEV/device"
	# What the role leaves on a host: the package (and its file), the site
	# profile, the install finished across its reboot.
	mv "$base" "$H/provisioned"
	local p=$H/provisioned
	cp "$DEB" "$p/var/tmp/"
	chroot "$p" dpkg -i "/var/tmp/${DEB##*/}" > "$BATS_FILE_TMPDIR/prov.log" 2>&1 ||
		fail "dpkg -i failed:" "$(cat "$BATS_FILE_TMPDIR/prov.log")"
	cp "$SITE" "$p/etc/gpuprov/profiles/"
	rc=0
	chroot "$p" gpuprov install --profile site-a100 >> "$BATS_FILE_TMPDIR/prov.log" 2>&1 || rc=$?
	[ "$rc" -eq 5 ] || fail "install before the reboot: $rc" "$(cat "$BATS_FILE_TMPDIR/prov.log")"
	chroot "$p" fixture-reboot
	chroot "$p" gpuprov install --profile site-a100 >> "$BATS_FILE_TMPDIR/prov.log" 2>&1 ||
		fail "install after the reboot failed:" "$(cat "$BATS_FILE_TMPDIR/prov.log")"

	cat > "$BATS_FILE_TMPDIR/inventory" <<INI
[gpu]
fresh ansible_host=$H/fresh
provisioned ansible_host=$H/provisioned
mismatch ansible_host=$H/mismatch

[repo]
fromrepo ansible_host=$H/fromrepo

[canary_first]
mismatch
fresh
provisioned

[all:vars]
ansible_connection=community.general.chroot
ansible_python_interpreter=/usr/bin/python3
ansible_become=false
INI
	cat > "$BATS_FILE_TMPDIR/vars.json" <<JSON
{
  "gpuprov_profile": "site-a100",
  "gpuprov_site_profiles": ["$SITE"],
  "gpuprov_package_file": "$DEB",
  "gpuprov_reboot_command": "/usr/local/sbin/fixture-reboot"
}
JSON
	# Every host at once: a failure on one leaves the others running.
	cat > "$BATS_FILE_TMPDIR/site.yml" <<'YML'
---
- name: Provision the test hosts
  hosts: "{{ test_hosts | default('gpu') }}"
  gather_facts: false
  roles:
    - role: gpuprov
YML
}

setup() {
	[ ! -e "$BATS_FILE_TMPDIR/skip" ] || skip "$(cat "$BATS_FILE_TMPDIR/skip")"
	require_root
}

# play PLAYBOOK ARGS...: ansible-playbook with the json callback; its
# results flattened by ansible_results.py into $RESULTS (HOST TASK STATUS
# MSG lines and RECAP lines), its exit status in $status. Nothing of
# Ansible's lands outside the file's temporary directory.
play() {
	local book=$1
	shift
	local out=$BATS_TEST_TMPDIR/play.json
	mkdir -p "$BATS_FILE_TMPDIR/ansible-home"
	: > "$BATS_FILE_TMPDIR/ansible.cfg"
	run --separate-stderr env HOME="$BATS_FILE_TMPDIR/ansible-home" \
		ANSIBLE_LIBRARY="$REPO_ROOT/dist/ansible/roles/gpuprov/library" \
		ANSIBLE_CONFIG="$BATS_FILE_TMPDIR/ansible.cfg" \
		ANSIBLE_HOME="$BATS_FILE_TMPDIR/ansible-home" \
		ANSIBLE_LOCAL_TEMP="$BATS_FILE_TMPDIR/ansible-home/tmp" \
		ANSIBLE_ROLES_PATH="$REPO_ROOT/dist/ansible/roles" ANSIBLE_STDOUT_CALLBACK=json \
		ANSIBLE_RETRY_FILES_ENABLED=false ANSIBLE_NOCOLOR=1 ANSIBLE_PIPELINING=1 \
		ansible-playbook -i "${INVENTORY:-$BATS_FILE_TMPDIR/inventory}" -e "@$BATS_FILE_TMPDIR/vars.json" \
		"$book" "$@"
	printf '%s\n' "$output" > "$out"
	RESULTS=$("$PYTHON" "$BATS_TEST_DIRNAME/ansible_results.py" "$out") ||
		fail "not the json callback's output:" "$(tail -40 "$out")" "$stderr"
}

# result HOST TASK-SUBSTRING: "STATUS<TAB>MSG" of that host's task (the
# last one whose name has the substring).
result() {
	awk -F '\t' -v h="$1" -v t="$2" '$1 == h && index($2, t) { r = $3 "\t" $4 } END { print r }' \
		<<<"$RESULTS"
}

# assert_result HOST TASK STATUS [MSG-SUBSTRING]
assert_result() {
	local r
	r=$(result "$1" "$2")
	[ "${r%%$'\t'*}" = "$3" ] || fail "$1, task '$2': expected $3, got '$r'" "$RESULTS"
	[ -z "${4:-}" ] || [[ $r == *"$4"* ]] || fail "$1, task '$2': no '$4' in '$r'" "$RESULTS"
}

# recap HOST: "ok=N changed=N failed=N skipped=N unreachable=N".
recap() {
	awk -F '\t' -v h="$1" '$1 == h && $2 == "RECAP" { print $3 }' <<<"$RESULTS"
}

assert_recap_has() {
	[[ " $(recap "$1") " == *" $2 "* ]] || fail "$1: expected $2 in the recap" "$RESULTS"
}

# host_manifest HOST: the host's tree (helpers.bash manifest) without what
# Ansible itself leaves in root's home (its remote temporary directory) and
# gpuprov's run log, which every run appends to.
host_manifest() {
	manifest "$H/$1" |
		grep -v '^\(\./\|[0-9a-f]\{64\}  \./\)\(root/\.ansible\|var/log/gpuprov\.log\)'
}

@test "ansible: ansible-lint passes on the role and the example playbook" {
	cd "$REPO_ROOT/dist/ansible"
	run env HOME="$BATS_FILE_TMPDIR/ansible-home" XDG_CACHE_HOME="$BATS_FILE_TMPDIR/ansible-home/cache" \
		ANSIBLE_HOME="$BATS_FILE_TMPDIR/ansible-home" ansible-lint --nocolor --offline
	[ "$status" -eq 0 ] || { show_run; fail "ansible-lint reports problems"; }
}

@test "ansible: the example playbook's canary fails first and stops the fleet before the other hosts" {
	local h
	for h in fresh provisioned; do host_manifest "$h" > "$BATS_TEST_TMPDIR/$h.before"; done
	# mismatch is the first host of canary_first: the first batch of one.
	play "$REPO_ROOT/dist/ansible/playbook-example.yml" -e fleet_hosts=canary_first
	[ "$status" -ne 0 ] || fail "the play succeeded" "$RESULTS"
	assert_result mismatch "Run gpuprov install (" failed "does not fit this host"
	for h in fresh provisioned; do
		[ -z "$(recap "$h")" ] || fail "$h ran: $(recap "$h")" "$RESULTS"
		host_manifest "$h" | diff -u "$BATS_TEST_TMPDIR/$h.before" - >&2 ||
			fail "host $h changed after the canary failed (diff above)"
	done
}

@test "ansible: --check changes no host; the plan is the diff of a drifted host; the mismatch fails with gpuprov's message" {
	local h env=etc/profile.d/gpuprov-cuda.sh
	# Drift on the provisioned host: its CUDA environment file is gone.
	mv "$H/provisioned/$env" "$BATS_TEST_TMPDIR/env.sh"
	for h in fresh provisioned mismatch; do host_manifest "$h" > "$BATS_TEST_TMPDIR/$h.before"; done
	play "$BATS_FILE_TMPDIR/site.yml" --check --diff
	[ "$status" -eq 2 ] || fail "ansible-playbook --check: $status (a host failed: 2)" "$RESULTS"
	for h in fresh provisioned mismatch; do
		host_manifest "$h" | diff -u "$BATS_TEST_TMPDIR/$h.before" - >&2 ||
			fail "--check changed host $h (diff above)"
	done
	mv "$BATS_TEST_TMPDIR/env.sh" "$H/provisioned/$env"
	# fresh: the package is not there yet, so the plan waits for a real run.
	assert_result fresh "Run gpuprov install (" changed "gpuprov is not installed yet"
	assert_result provisioned "Install the package file" skipped
	assert_result provisioned "Copy the site profiles" ok
	assert_result provisioned "Run gpuprov install (" changed
	grep -qF '# env: /etc/profile.d/gpuprov-cuda.sh differs from the profile' "$BATS_TEST_TMPDIR/play.json" &&
		grep -qF '+++ /etc/profile.d/gpuprov-cuda.sh (planned)' "$BATS_TEST_TMPDIR/play.json" ||
		fail "no plan diff" "$(cat "$BATS_TEST_TMPDIR/play.json")"
	assert_result mismatch "Run gpuprov install (" failed \
		"gpuprov plan exited 4: profile site-a100 does not fit this host: no GPU of the profile's match.gpus; found 10de:2330"
}

@test "ansible: a real run: fresh changes, then stops for the reboot it may not do; provisioned is ok; mismatch fails alone" {
	play "$BATS_FILE_TMPDIR/site.yml" -e '{"gpuprov_allow_reboot": false}'
	[ "$status" -eq 2 ] || fail "ansible-playbook: $status" "$RESULTS"
	assert_result fresh "Install the package file" changed
	assert_result fresh "Run gpuprov install (" changed "reboot required (nouveau"
	assert_result fresh "a reboot is needed and gpuprov_allow_reboot is false" failed \
		"gpuprov needs a reboot to go on"
	[ "$(dpkg_status "$H/fresh" gpuprov)" = "install ok installed $VERSION" ] ||
		fail "fresh: the package is $(dpkg_status "$H/fresh" gpuprov)"
	grep -qx 'blacklist nouveau' "$H/fresh/etc/modprobe.d/blacklist-nouveau.conf"
	assert_recap_has provisioned changed=0
	assert_recap_has provisioned failed=0
	assert_result provisioned "Run gpuprov verify" ok
	assert_result mismatch "Run gpuprov install (" failed \
		"gpuprov install exited 4: profile site-a100 does not fit this host"
	[ ! -e "$H/mismatch/var/lib/gpuprov/state.json" ] || fail "gpuprov wrote a journal on mismatch"
}

@test "ansible: with gpuprov_allow_reboot the handler reboots the host and the install runs again; verify into gpuprov_report" {
	local boot
	boot=$(cat "$H/fresh/proc/sys/kernel/random/boot_id")
	play "$BATS_FILE_TMPDIR/site.yml" -e test_hosts=fresh -e '{"gpuprov_allow_reboot": true}'
	[ "$status" -eq 0 ] || fail "ansible-playbook: $status" "$RESULTS"
	assert_result fresh "Ask for the reboot" changed
	assert_result fresh "Reboot for gpuprov" changed
	[ "$(cat "$H/fresh/proc/sys/kernel/random/boot_id")" != "$boot" ] || fail "no reboot"
	assert_result fresh "Run gpuprov install again after the reboot" ok
	assert_result fresh "Run gpuprov verify" ok
	grep -q '"gpuprov_report": {' "$BATS_TEST_TMPDIR/play.json" ||
		fail "no gpuprov_report fact" "$(cat "$BATS_TEST_TMPDIR/play.json")"
}

@test "ansible: a second run is all ok and changes nothing" {
	local h
	for h in fresh provisioned; do host_manifest "$h" > "$BATS_TEST_TMPDIR/$h.before"; done
	play "$BATS_FILE_TMPDIR/site.yml" -e test_hosts=fresh:provisioned
	[ "$status" -eq 0 ] || fail "ansible-playbook: $status" "$RESULTS"
	for h in fresh provisioned; do
		assert_recap_has "$h" changed=0
		assert_recap_has "$h" failed=0
		assert_result "$h" "Run gpuprov install (" ok
		assert_result "$h" "Run gpuprov verify" ok
		host_manifest "$h" | diff -u "$BATS_TEST_TMPDIR/$h.before" - >&2 ||
			fail "the second run changed host $h (diff above)"
	done
}

@test "ansible: a verify that fails where install has nothing to do fails that host alone; gpuprov_verify_fails_host false only reports it" {
	# The CUDA libraries gone from the provisioned host after gpuprov ran
	# (the toolkit removed under it): the env stage's files are all as the
	# profile says, so install has nothing to do, and verify finds the
	# profile's LD_LIBRARY_PATH directory missing (exit 3; the finding's
	# subject is the path in id form).
	local lib=usr/local/cuda/lib64
	mv "$H/provisioned/$lib" "$BATS_TEST_TMPDIR/lib64"
	play "$BATS_FILE_TMPDIR/site.yml" -e test_hosts=fresh:provisioned
	[ "$status" -eq 2 ] || fail "ansible-playbook: $status (a host failed: 2)" "$RESULTS"
	assert_result provisioned "Run gpuprov install (" ok
	assert_result provisioned "Run gpuprov verify" failed \
		"gpuprov verify failed: env.directory.usr_local_cuda_lib64: no such directory in / (install the CUDA toolkit"
	assert_recap_has provisioned failed=1
	assert_recap_has fresh failed=0
	assert_recap_has fresh changed=0
	assert_result fresh "Run gpuprov verify" ok
	# Reported, not failed: the findings in the registered result and the
	# report in the fact.
	play "$BATS_FILE_TMPDIR/site.yml" -e test_hosts=provisioned -e '{"gpuprov_verify_fails_host": false}'
	mv "$BATS_TEST_TMPDIR/lib64" "$H/provisioned/$lib"
	[ "$status" -eq 0 ] || fail "ansible-playbook: $status" "$RESULTS"
	assert_result provisioned "Run gpuprov verify" ok
	"$PYTHON" - "$BATS_TEST_TMPDIR/play.json" <<'PY' || fail "no failures in the verify result" "$RESULTS"
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
task = [t for t in doc["plays"][0]["tasks"] if t["task"]["name"].endswith("Run gpuprov verify")][0]
r = task["hosts"]["provisioned"]
assert r["exit_status"] == 3, r
assert [f.split(" (")[0] for f in r["failures"]] == ["env.directory.usr_local_cuda_lib64: no such directory in /"], r
assert any(f["id"] == "env.directory.usr_local_cuda_lib64" and f["level"] == "fail"
           for f in r["ansible_facts"]["gpuprov_report"]["findings"]), r
PY
}

@test "ansible: without gpuprov_package_file the package comes from the host's signed repository (ansible.builtin.package); a second run is ok" {
	local r=$H/fromrepo mirror=$BATS_TEST_TMPDIR/mirror rc=0 extra d
	# python3-apt, which the apt module behind ansible.builtin.package needs
	# and installs itself from the host's repositories when it is missing
	# (Debian's mirror has it): downloaded once with what it needs and
	# cached by debdeps.sh, as the dependencies of a package that wants it.
	mkdir -p "$BATS_TEST_TMPDIR/want/DEBIAN"
	printf '%s\n' 'Package: gpuprov-test-wants-python3-apt' 'Version: 1' 'Architecture: all' \
		'Maintainer: gpuprov tests <tests@gpuprov.invalid>' 'Depends: python3-apt' \
		'Description: what the apt module needs (gpuprov tests)' > "$BATS_TEST_TMPDIR/want/DEBIAN/control"
	dpkg-deb --root-owner-group -b "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/want.deb" > /dev/null
	extra=$(sh "$REPO_ROOT/tests/fixtures/debdeps.sh" "$r" "$BATS_TEST_TMPDIR/want.deb" \
		2> "$BATS_TEST_TMPDIR/debdeps.err") || rc=$?
	[ "$rc" -ne 77 ] || skip "$(tail -1 "$BATS_TEST_TMPDIR/debdeps.err")"
	[ "$rc" -eq 0 ] || fail "debdeps.sh failed ($rc):" "$(cat "$BATS_TEST_TMPDIR/debdeps.err")"
	# The site's mirror: signed (aptrepo.sh's test key), with the package
	# the file built, python3-apt and what it needs, and the stand-ins.
	set -- --add "$DEB"
	for d in "$extra"/*.deb; do set -- "$@" --add "$d"; done
	sh "$REPO_ROOT/tests/fixtures/aptrepo.sh" "$mirror" --url file:///srv/site-mirror/ "$@" \
		> "$BATS_TEST_TMPDIR/aptrepo.log" 2>&1 || fail "aptrepo.sh failed:" "$(cat "$BATS_TEST_TMPDIR/aptrepo.log")"
	cp -a "$mirror/repo" "$r/srv/site-mirror"
	cp "$mirror/key.gpg" "$r/usr/share/keyrings/site-mirror.gpg"
	echo "deb [signed-by=/usr/share/keyrings/site-mirror.gpg] file:///srv/site-mirror/ /" \
		> "$r/etc/apt/sources.list.d/site-mirror.list"
	# A host has its lists; apt checks the mirror's signature here.
	chroot "$r" apt-get -q update > "$BATS_TEST_TMPDIR/update.log" 2>&1 ||
		fail "apt-get update failed:" "$(cat "$BATS_TEST_TMPDIR/update.log")"
	[ "$(dpkg_status "$r" gpuprov)" = not-installed ] || fail "gpuprov is there: $(dpkg_status "$r" gpuprov)"
	# env only: no reboot on this fresh host.
	local vars='{"gpuprov_package_file": "", "gpuprov_only": ["env"]}'
	# Check mode: the apt module may not install python3-apt, and says so.
	play "$BATS_FILE_TMPDIR/site.yml" --check -e test_hosts=repo -e "$vars"
	[ "$status" -eq 2 ] || fail "ansible-playbook --check: $status (a host failed: 2)" "$RESULTS"
	assert_result fromrepo "Install gpuprov from the host's repositories" failed \
		"python3-apt must be installed to use check mode"
	[ "$(dpkg_status "$r" python3-apt)" = not-installed ] || fail "check mode installed python3-apt"
	play "$BATS_FILE_TMPDIR/site.yml" -e test_hosts=repo -e "$vars"
	[ "$status" -eq 0 ] || fail "ansible-playbook: $status" "$RESULTS"
	assert_result fromrepo "Install gpuprov from the host's repositories" changed
	assert_result fromrepo "Install the package file" skipped
	assert_result fromrepo "Run gpuprov install (" changed
	assert_result fromrepo "Run gpuprov verify" ok
	[ "$(dpkg_status "$r" gpuprov)" = "install ok installed $VERSION" ] ||
		fail "fromrepo: the package is $(dpkg_status "$r" gpuprov)"
	[[ "$(dpkg_status "$r" python3-apt)" == "install ok installed "* ]] ||
		fail "python3-apt: $(dpkg_status "$r" python3-apt)"
	# The installed version is the mirror's.
	chroot "$r" apt-cache policy gpuprov > "$BATS_TEST_TMPDIR/policy"
	grep -A1 -F "*** $VERSION " "$BATS_TEST_TMPDIR/policy" | grep -qF 'file:/srv/site-mirror' ||
		fail "not the mirror's version:" "$(cat "$BATS_TEST_TMPDIR/policy")"
	host_manifest fromrepo > "$BATS_TEST_TMPDIR/fromrepo.before"
	play "$BATS_FILE_TMPDIR/site.yml" -e test_hosts=repo -e "$vars"
	[ "$status" -eq 0 ] || fail "ansible-playbook: $status" "$RESULTS"
	assert_result fromrepo "Install gpuprov from the host's repositories" ok
	assert_recap_has fromrepo changed=0
	assert_recap_has fromrepo failed=0
	host_manifest fromrepo | diff -u "$BATS_TEST_TMPDIR/fromrepo.before" - >&2 ||
		fail "the second run changed host fromrepo (diff above)"
}

@test "ansible: the module's root and binary: gpuprov --root on an image from the controller" {
	# A stub root (mkroot.sh) as the image, provisioned by the gpuprov under
	# test, run by the module on the controller (connection local).
	local img=$BATS_TEST_TMPDIR/image
	mkroot "$img"
	cat > "$BATS_TEST_TMPDIR/image.yml" <<'YML'
---
- name: Provision an image from the controller
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Plan the image (check mode)
      gpuprov:
        root: "{{ image }}"
        binary: "{{ gpuprov }}"
        profile: a100-ubuntu2204
        only: [nouveau, env]
      check_mode: true
      register: planned
    - name: Install into the image
      gpuprov:
        root: "{{ image }}"
        binary: "{{ gpuprov }}"
        profile: a100-ubuntu2204
        only: [nouveau, env]
      register: installed
    - name: Check the results
      ansible.builtin.assert:
        that:
          - planned.changed and planned.reboot_required
          - "'--root' in installed.cmd and image in installed.cmd"
          - installed.changed and installed.reboot_required and installed.exit_status == 5
          - installed.applied | selectattr('path', 'defined') | map(attribute='path') | select('equalto', '/etc/modprobe.d/blacklist-nouveau.conf') | list | length == 1
YML
	INVENTORY=localhost, play "$BATS_TEST_TMPDIR/image.yml" -e image="$img" -e gpuprov="$GPUPROV" \
		-e ansible_python_interpreter="$PYTHON"
	[ "$status" -eq 0 ] || fail "ansible-playbook: $status" "$RESULTS"
	assert_result localhost "Plan the image" changed
	assert_result localhost "Install into the image" changed "reboot required (nouveau"
	grep -qx 'blacklist nouveau' "$img/etc/modprobe.d/blacklist-nouveau.conf"
}
