#!/usr/bin/env bats
# The container_toolkit stage against real apt and dpkg: one debootstrapped
# Debian 12 root for the whole file (tests/fixtures/debroot.sh), with the
# signed stand-in repository of tests/fixtures/aptrepo.sh copied to
# /srv/ctk-repo as NVIDIA's container toolkit repository (its four packages
# in 1.17.7-1 and 1.17.8-1) and its armored key served over loopback HTTPS
# as "gpgkey", named as NVIDIA names it. The root has a daemon.json of its
# own (a log level and another runtime) that the stage must keep. The tests
# run in order on that root: plan, install 1.17.7-1 (older than the
# candidate) and verify, a rerun changes nothing, the pin moves to 1.17.8-1,
# gpuprov run inside the root (chroot: the root is its live host) restarts a
# stand-in docker once; then daemon.json files gpuprov refuses to merge with.
# The tests named "(stub root)" use busybox roots of their own.

load helpers

EXPECTED_DAEMON=$BATS_TEST_DIRNAME/expected/container_toolkit/daemon.json
PKGS="nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1"

setup_file() {
	ctk_apt_root '{
  "log-level": "warn",
  "runtimes": { "runsc": { "path": "/usr/local/bin/runsc" } }
}'
}

setup() {
	ctk_setup
}

teardown() {
	stop_https_server
}

# unpinned_profile FILE STAGE-JSON: a Debian 12 profile (no distro base)
# whose container toolkit repository has a URL and a key with its sha256,
# but no fingerprint.
unpinned_profile() {
	cat > "$1" <<JSON
{
  "name": "ctk-unpinned",
  "match": { "os_id": "debian", "version_id": "12", "arch": "x86_64" },
  "distro": { "id": "debian12", "package_manager": "apt", "nvidia_repo": "debian12",
    "initramfs": ["update-initramfs", "-u"],
    "container_toolkit_repo": {
      "url": "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/",
      "keyring_url": "https://nvidia.github.io/libnvidia-container/gpgkey",
      "keyring_sha256": "c880576d6cf75a48e5027a871bac70fd0421ab07d2b55f30877b21f1c87959c9" } },
  "stages": { "container_toolkit": $2 }
}
JSON
}

# assert_toolkit_at VERSION: the four packages installed at VERSION and held.
assert_toolkit_at() {
	local p held bad=
	held=$(chroot "$R" apt-mark showhold)
	for p in $PKGS; do
		[ "$(dpkg_status "$R" "$p")" = "hold ok installed $1" ] || bad="$bad $p=$(dpkg_status "$R" "$p")"
		printf '%s\n' "$held" | grep -Fxq "$p" || bad="$bad $p(not held)"
	done
	[ -z "$bad" ] || fail "not at $1 and held:$bad"
}

@test "container_toolkit: the plan shows the repository, the exact packages, the hold and the daemon.json diff, and changes nothing" {
	snapshot "$R" before
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "container_toolkit: needed - nvidia-container-toolkit is not installed; /etc/docker/daemon.json does not configure the nvidia runtime (docker is not restarted under --root: restart it where this root runs)"
	assert_stdout_line "      download https://127.0.0.1:$PORT/gpgkey"
	# NVIDIA's key has no .asc name but is armored: named by its content.
	assert_stdout_line "      create /usr/share/keyrings/nvidia-container-toolkit-keyring.asc (new file, mode 0644)"
	assert_stdout_line "        +deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.asc] file:///srv/ctk-repo/ /"
	assert_stdout_line "      run, by rule: apt-get -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install --no-install-recommends --allow-downgrades --no-remove nvidia-container-toolkit=1.17.7-1 nvidia-container-toolkit-base=1.17.7-1 libnvidia-container-tools=1.17.7-1 libnvidia-container1=1.17.7-1, each version taken at its newest revision in the lists the refresh fetched, with every package these depend on at exactly that version (the root's apt lists did not offer them before this run's refresh)"
	assert_stdout_has "run, by rule: apt-mark hold nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1"
	assert_stdout_line "      replace /etc/docker/daemon.json (backed up first, mode 0644)"
	assert_stdout_line "        +            \"path\": \"nvidia-container-runtime\","
	assert_stdout_line "        -  \"log-level\": \"warn\","
	assert_stdout_line "        +    \"log-level\": \"warn\","
	refute_stdout_has "systemctl"
	assert_unchanged "$R" before
}

@test "container_toolkit: installs the four packages at the exact version, older than the candidate, and holds them; daemon.json keeps what gpuprov does not own; verify passes" {
	assert_plan_matches_run "$R" --profile "$P" --ca-file "$CA"
	assert_status 0
	assert_toolkit_at 1.17.7-1
	run chroot "$R" apt-cache policy nvidia-container-toolkit
	[[ "$output" == *"Candidate: 1.17.8-1"* ]] || fail "the archive should offer a newer version: $output"
	diff -u "$EXPECTED_DAEMON" "$R/etc/docker/daemon.json" || fail "daemon.json (diff above: - expected, + now)"
	grep -q "systemctl" "$R/var/log/gpuprov.log" && fail "docker was restarted under --root"
	gp --root "$R" verify --profile "$P"
	assert_status 0
	assert_stdout_has "nvidia-container-toolkit 1.17.7-1"
	assert_stdout_has "/etc/docker/daemon.json has runtimes.nvidia (path nvidia-container-runtime)"
	assert_stdout_has "/usr/bin/nvidia-container-runtime is installed"
	gp --root "$R" --json verify --profile "$P"
	JSON=$BATS_TEST_TMPDIR/v.json
	printf '%s\n' "$output" > "$JSON"
	jeq 'sorted(f["id"] for f in d["findings"])' '["container_toolkit.hold", "container_toolkit.package.libnvidia_container1", "container_toolkit.package.libnvidia_container_tools", "container_toolkit.package.nvidia_container_toolkit", "container_toolkit.package.nvidia_container_toolkit_base", "container_toolkit.runtime", "container_toolkit.runtime_binary"]'
}

@test "container_toolkit: a second install changes nothing" {
	snapshot "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	assert_stdout_has "container_toolkit: satisfied - nvidia-container-toolkit 1.17.7-1 and its three companion packages, held; /etc/docker/daemon.json has the nvidia runtime"
	refute_stdout_has "apt-get"
	assert_unchanged "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json var/lib/gpuprov/lock
}

@test "container_toolkit: a new pin moves the held set; default_runtime adds default-runtime" {
	ctk_profile 1.17.8-1 '"default_runtime": true'
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "container_toolkit: needed - nvidia-container-toolkit 1.17.7-1 is installed; the profile wants 1.17.8-1; /etc/docker/daemon.json does not configure the nvidia runtime as the default"
	assert_stdout_line "        +    \"default-runtime\": \"nvidia\""
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	assert_toolkit_at 1.17.8-1
	grep -q '"default-runtime": "nvidia"' "$R/etc/docker/daemon.json" || fail "no default-runtime:" "$(cat "$R/etc/docker/daemon.json")"
	grep -q '"log-level": "warn"' "$R/etc/docker/daemon.json" || fail "log-level lost"
	gp --root "$R" verify --profile "$P"
	assert_status 0
	assert_stdout_has "/etc/docker/daemon.json makes nvidia the default-runtime"
}

# in_root_as_host ARGS...: gpuprov ARGS... chrooted into the file's root,
# which is then its live host (as_live_host in helpers.bash).
in_root_as_host() {
	as_live_host "$R" "$@"
}

@test "container_toolkit: on the live host docker is restarted once for the daemon.json gpuprov wrote, never again" {
	ctk_profile 1.17.8-1 '"default_runtime": true'
	cp "$P" "$R/tmp/p.json"
	# Stand-ins: dockerd (present is all that counts) and systemctl, which
	# logs its argv.
	printf '#!/bin/sh\nexit 0\n' > "$R/usr/bin/dockerd"
	printf '#!/bin/sh\necho "$*" >> /var/log/systemctl-stand-in.log\n' > "$R/usr/bin/systemctl"
	chmod 0755 "$R/usr/bin/dockerd" "$R/usr/bin/systemctl"
	in_root_as_host plan --profile /tmp/p.json --only container_toolkit
	assert_status 0
	assert_stdout_has "container_toolkit: needed - docker was not restarted since gpuprov wrote /etc/docker/daemon.json"
	assert_stdout_line "      run systemctl restart docker"
	in_root_as_host install --profile /tmp/p.json --only container_toolkit
	assert_status 0
	[ "$(cat "$R/var/log/systemctl-stand-in.log")" = "restart docker" ] ||
		fail "systemctl ran as:" "$(cat "$R/var/log/systemctl-stand-in.log")"
	in_root_as_host install --profile /tmp/p.json --only container_toolkit
	assert_status 0
	assert_stdout_has "container_toolkit: satisfied"
	[ "$(wc -l < "$R/var/log/systemctl-stand-in.log")" = 1 ] || fail "docker was restarted again"
	rm -f "$R/usr/bin/dockerd" "$R/usr/bin/systemctl" "$R/var/log/systemctl-stand-in.log"
}

@test "container_toolkit: runtime containerd writes the nvidia drop-in and adds its directory to config.toml's imports, that line only; a file it does not understand is refused, nothing written" {
	ctk_profile 1.17.8-1 '"runtime": "containerd"'
	local cfg=$R/etc/containerd/config.toml dropin=$R/etc/containerd/conf.d/99-nvidia.toml
	mkdir -p "$R/etc/containerd"
	# Refused, nothing written: imports over several lines; a file that
	# configures the CRI plugin (a drop-in would replace that table whole
	# before containerd 2.1).
	printf 'version = 2\nimports = [\n  "/a/*.toml",\n]\n' > "$cfg"
	snapshot "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 4
	assert_stdout_has "container_toolkit: blocked - $cfg:2: imports is not a one-line array of plain strings; gpuprov edits only that: write it on one line, as imports = [\"/etc/containerd/conf.d/*.toml\"], and run gpuprov again; nothing was written"
	assert_unchanged "$R" before var/lib/gpuprov var/lib/gpuprov/lock
	printf 'version = 2\n\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n' > "$cfg"
	gp --root "$R" plan --profile "$P"
	assert_status 4
	assert_stdout_has "container_toolkit: blocked - $cfg:3 configures containerd's CRI plugin: containerd before 2.1 lets a drop-in's plugin table replace that one whole"
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_stdout_has "$cfg:3 configures containerd's CRI plugin"
	# A version 2 file with imports of its own: one more element.
	printf '# site\nversion = 2\nimports = ["/etc/containerd/site/*.toml"]\n\n[plugins."io.containerd.internal.v1.opt"]\n  path = "/opt/containerd"\n' > "$cfg"
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "/etc/containerd/conf.d/99-nvidia.toml does not configure the nvidia runtime and /etc/containerd/config.toml does not import /etc/containerd/conf.d/*.toml (containerd is not restarted under --root"
	assert_stdout_line "      create /etc/containerd/conf.d/99-nvidia.toml (new file, mode 0644)"
	assert_stdout_line "        -imports = [\"/etc/containerd/site/*.toml\"]"
	assert_stdout_line "        +imports = [\"/etc/containerd/site/*.toml\", \"/etc/containerd/conf.d/*.toml\"]"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(cat "$cfg")" = "$(printf '# site\nversion = 2\nimports = ["/etc/containerd/site/*.toml", "/etc/containerd/conf.d/*.toml"]\n\n[plugins."io.containerd.internal.v1.opt"]\n  path = "/opt/containerd"')" ] ||
		fail "config.toml:" "$(cat "$cfg")"
	grep -qxF '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]' "$dropin" || fail "drop-in:" "$(cat "$dropin")"
	grep -qxF '  BinaryName = "/usr/bin/nvidia-container-runtime"' "$dropin" || fail "drop-in:" "$(cat "$dropin")"
	gp --root "$R" verify --profile "$P"
	assert_status 0
	assert_stdout_has "/etc/containerd/conf.d/99-nvidia.toml configures the nvidia runtime (/usr/bin/nvidia-container-runtime), imported by /etc/containerd/config.toml"
	gp --root "$R" plan --profile "$P"
	assert_stdout_has "container_toolkit: satisfied"
	# A version 3 file without imports gets the line after its version,
	# and the drop-in is rewritten for containerd 2's plugin.
	printf 'version = 3\nroot = "/var/lib/containerd"\n' > "$cfg"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(cat "$cfg")" = "$(printf 'version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\nroot = "/var/lib/containerd"')" ] || fail "config.toml:" "$(cat "$cfg")"
	grep -qF '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]' "$dropin" || fail "drop-in:" "$(cat "$dropin")"
	gp --root "$R" verify --profile "$P"
	assert_status 0
}

@test "container_toolkit: runtime crio writes the nvidia drop-in in crio.conf.d, default_runtime included" {
	ctk_profile 1.17.8-1 '"runtime": "crio", "default_runtime": true'
	local dropin=$R/etc/crio/crio.conf.d/99-nvidia.toml
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "/etc/crio/crio.conf.d/99-nvidia.toml does not configure the nvidia runtime as the default (crio is not restarted under --root"
	assert_stdout_line "        +runtime_path = \"/usr/bin/nvidia-container-runtime\""
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(cat "$dropin")" = "$(printf '# Written by gpuprov (stage container_toolkit): the NVIDIA runtime.\n\n[crio.runtime]\ndefault_runtime = "nvidia"\n\n[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\nruntime_type = "oci"')" ] ||
		fail "drop-in:" "$(cat "$dropin")"
	gp --root "$R" verify --profile "$P"
	assert_status 0
	assert_stdout_has "/etc/crio/crio.conf.d/99-nvidia.toml configures the nvidia runtime (/usr/bin/nvidia-container-runtime) as the default"
	# On the live host crio is restarted once for that drop-in.
	cp "$P" "$R/tmp/p.json"
	printf '#!/bin/sh\nexit 0\n' > "$R/usr/bin/crio"
	printf '#!/bin/sh\necho "$*" >> /var/log/systemctl-stand-in.log\n' > "$R/usr/bin/systemctl"
	chmod 0755 "$R/usr/bin/crio" "$R/usr/bin/systemctl"
	in_root_as_host plan --profile /tmp/p.json --only container_toolkit
	assert_status 0
	assert_stdout_has "container_toolkit: needed - crio was not restarted since gpuprov wrote /etc/crio/crio.conf.d/99-nvidia.toml"
	in_root_as_host install --profile /tmp/p.json --only container_toolkit
	assert_status 0
	in_root_as_host install --profile /tmp/p.json --only container_toolkit
	assert_status 0
	[ "$(cat "$R/var/log/systemctl-stand-in.log")" = "restart crio" ] ||
		fail "systemctl ran as:" "$(cat "$R/var/log/systemctl-stand-in.log")"
	rm -f "$R/usr/bin/crio" "$R/usr/bin/systemctl" "$R/var/log/systemctl-stand-in.log"
}

# cdi_host N VERSION: the root has N NVIDIA GPUs on its PCI bus, driver
# VERSION loaded, and a stand-in nvidia-ctk that writes, for
# `cdi generate --output=FILE`, the spec nvidia-ctk would write for them
# (lays out as tests/unit/cdispec/two-gpus.yaml) and logs its argv.
cdi_host() {
	local i dev
	rm -rf "$R/sys/bus/pci/devices"
	for i in $(seq 1 "$1"); do
		dev=$R/sys/bus/pci/devices/0000:1$i:00.0
		mkdir -p "$dev"
		echo 0x10de > "$dev/vendor"
		echo 0x2335 > "$dev/device"
		echo 0x030200 > "$dev/class"
	done
	nvidia_driver "$2"
	cat > "$R/usr/bin/nvidia-ctk" <<'SH'
#!/bin/sh
echo "$*" >> /var/log/nvidia-ctk-stand-in.log
[ "$1 $2" = "cdi generate" ] || exit 0
out=${3#--output=}
ver=$(sed -n 's/.*Kernel Module  *\([0-9.]*\) .*/\1/p' /proc/driver/nvidia/version)
mkdir -p "${out%/*}"
{
	printf -- '---\ncdiVersion: 0.5.0\ncontainerEdits:\n  mounts:\n'
	printf '  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.%s\n' "$ver"
	printf 'devices:\n'
	i=0
	for d in /sys/bus/pci/devices/*; do
		printf -- '- containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia%d\n  name: "%d"\n' $i $i
		i=$((i + 1))
	done
	printf -- '- name: all\nkind: nvidia.com/gpu\n'
} > "$out"
SH
	chmod 0755 "$R/usr/bin/nvidia-ctk"
}

@test "container_toolkit: cdi_spec generates the CDI spec with nvidia-ctk; a driver change makes it stale, verify says so and install regenerates it" {
	# The packages first (a no-op after the tests above): the stand-in
	# nvidia-ctk replaces the one they install.
	ctk_profile 1.17.8-1 '"default_runtime": true'
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	ctk_profile 1.17.8-1 '"default_runtime": true, "cdi_spec": true'
	cdi_host 2 570.86.15
	rm -f "$R/etc/cdi/nvidia.yaml" "$R/var/log/nvidia-ctk-stand-in.log"
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "container_toolkit: needed - there is no CDI spec /etc/cdi/nvidia.yaml"
	assert_stdout_line "      run nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
	[ ! -e "$R/var/log/nvidia-ctk-stand-in.log" ] || fail "the plan ran nvidia-ctk"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(cat "$R/var/log/nvidia-ctk-stand-in.log")" = "cdi generate --output=/etc/cdi/nvidia.yaml" ] ||
		fail "nvidia-ctk ran as:" "$(cat "$R/var/log/nvidia-ctk-stand-in.log")"
	gp --root "$R" verify --profile "$P"
	assert_status 0
	assert_stdout_has '/etc/cdi/nvidia.yaml lists 2 GPUs and "all" for driver 570.86.15'
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	assert_stdout_has 'container_toolkit: satisfied - nvidia-container-toolkit 1.17.8-1 and its three companion packages, held; /etc/docker/daemon.json has the nvidia runtime as the default; /etc/cdi/nvidia.yaml lists 2 GPUs'
	[ "$(wc -l < "$R/var/log/nvidia-ctk-stand-in.log")" = 1 ] || fail "nvidia-ctk ran again"
	# A driver upgrade (and a third GPU): the spec names the old driver; a
	# copy of it in /var/run/cdi (/run/cdi: Debian links /var/run there)
	# would hide the one install regenerates.
	mkdir -p "$R/run/cdi"
	cp "$R/etc/cdi/nvidia.yaml" "$R/run/cdi/nvidia.yaml"
	cdi_host 3 575.51.03
	gp --root "$R" --json verify --profile "$P"
	assert_status 3
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/v.json"
	JSON=$BATS_TEST_TMPDIR/v.json
	jeq '[f["level"] for f in d["findings"] if f["id"] == "container_toolkit.cdi_spec"]' '["fail"]'
	gp --root "$R" verify --profile "$P"
	assert_stdout_has "the CDI spec /etc/cdi/nvidia.yaml is stale: it was generated for driver 570.86.15; 575.51.03 is loaded"
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	assert_stdout_has "container_toolkit: changed - the CDI spec /etc/cdi/nvidia.yaml is stale"
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_stdout_has '/etc/cdi/nvidia.yaml lists 3 GPUs and "all" for driver 575.51.03'
	assert_stdout_has "fail  CDI spec in /var/run: the CDI spec /var/run/cdi/nvidia.yaml is stale: it was generated for driver 570.86.15; 575.51.03 is loaded"
	assert_stdout_has "hint: it takes precedence over /etc/cdi/nvidia.yaml: remove it"
	rm "$R/run/cdi/nvidia.yaml"
	gp --root "$R" verify --profile "$P"
	assert_status 0
	# A spec that lost a GPU's entry is stale as well.
	sed -i '/name: "2"/d' "$R/etc/cdi/nvidia.yaml"
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_stdout_has "/etc/cdi/nvidia.yaml:"
	rm -rf "$R/sys/bus/pci/devices" "$R/proc/driver" "$R/etc/cdi" "$R/var/log/nvidia-ctk-stand-in.log"
}

# docker_stand_in: a docker in the root for verify's test container:
# `image inspect` knows the images listed in /etc/docker-stand-in/images,
# `run` answers as /etc/docker-stand-in/mode says (pass: one line per GPU
# on the root's PCI bus; one: a single GPU; or one of docker's known
# failures) and refuses a run without --pull=never. verify runs it with
# the root read-only, so it cannot log.
docker_stand_in() {
	mkdir -p "$R/etc/docker-stand-in"
	: > "$R/etc/docker-stand-in/images"
	cat > "$R/usr/bin/docker" <<'SH'
#!/bin/sh
if [ "$1 $2" = "image inspect" ]; then
	grep -qxF "$5" /etc/docker-stand-in/images && { echo sha256:0123; exit 0; }
	echo "Error: No such image: $5" >&2
	exit 1
fi
[ "$1" = run ] || exit 0
case " $* " in *" --pull=never "*) ;; *) echo "a run without --pull=never" >&2; exit 99 ;; esac
case $(cat /etc/docker-stand-in/mode) in
pass) i=0; for d in /sys/bus/pci/devices/*; do echo "GPU $i: NVIDIA H200 (UUID: GPU-$i)"; i=$((i + 1)); done ;;
one) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)" ;;
nodriver) echo 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].' >&2; exit 125 ;;
cdi) echo 'docker: Error response from daemon: failed to create task: unresolvable CDI devices nvidia.com/gpu=all' >&2; exit 125 ;;
nvml) echo 'Failed to initialize NVML: Unknown Error'; exit 255 ;;
esac
SH
	chmod 0755 "$R/usr/bin/docker"
}

@test "container_toolkit: verify runs the test image, never pulled, with every GPU on the live host; docker's known failures get their hints" {
	local image=nvidia/cuda:12.8.1-base-ubuntu24.04
	ctk_profile 1.17.8-1 "\"test_image\": \"$image\""
	cp "$P" "$R/tmp/p.json"
	cdi_host 2 570.86.15
	docker_stand_in
	# Under --root no container runs.
	gp --root "$R" verify --profile "$P"
	assert_stdout_has "skip  test container: containers run on the live host only, not under --root"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "warn  test container: the test image $image is not on this host"
	assert_stdout_has "hint: gpuprov never pulls"
	echo "$image" > "$R/etc/docker-stand-in/images"
	echo pass > "$R/etc/docker-stand-in/mode"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "pass  test container: \`docker run --rm --pull=never --gpus all $image nvidia-smi -L\` lists 2 GPUs"
	echo one > "$R/etc/docker-stand-in/mode"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_status 3
	assert_stdout_has "fail  test container: \`docker run --rm --pull=never --gpus all $image nvidia-smi -L\` lists 1 GPU; the host has 2"
	echo nodriver > "$R/etc/docker-stand-in/mode"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has 'could not select device driver "" with capabilities: [[gpu]].'
	assert_stdout_has "hint: docker has no nvidia runtime, or was not restarted since it got one"
	echo nvml > "$R/etc/docker-stand-in/mode"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "hint: the container lost its GPU devices"
	# With cdi_spec the GPUs are asked for as CDI devices.
	ctk_profile 1.17.8-1 "\"test_image\": \"$image\", \"cdi_spec\": true"
	cp "$P" "$R/tmp/p.json"
	echo cdi > "$R/etc/docker-stand-in/mode"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "fail  test container: \`docker run --rm --pull=never --device nvidia.com/gpu=all $image nvidia-smi -L\` exited with status 125"
	assert_stdout_has "hint: the CDI spec lacks the device or is stale"
	rm -rf "$R/usr/bin/docker" "$R/etc/docker-stand-in" "$R/sys/bus/pci/devices" "$R/proc/driver"
}

@test "container_toolkit: beside CRI-O, verify runs the test image with podman when it is installed, never pulled, the GPUs as CDI devices" {
	local image=nvidia/cuda:12.8.1-base-ubuntu24.04
	ctk_profile 1.17.8-1 "\"runtime\": \"crio\", \"test_image\": \"$image\""
	cp "$P" "$R/tmp/p.json"
	cdi_host 2 570.86.15
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "skip  test container: only docker, podman beside CRI-O, or ctr beside containerd runs the test image"
	# A stand-in podman: the images it has, and a run that lists two GPUs.
	mkdir -p "$R/etc/podman-stand-in"
	: > "$R/etc/podman-stand-in/images"
	cat > "$R/usr/bin/podman" <<'SH'
#!/bin/sh
[ "$1 $2" != "image exists" ] || exec grep -qxF "$3" /etc/podman-stand-in/images
[ "$*" = "run --rm --pull=never --device nvidia.com/gpu=all $IMAGE nvidia-smi -L" ] || {
	echo "podman stand-in: unexpected $*" >&2
	exit 99
}
printf 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n'
SH
	sed -i "s|\$IMAGE|$image|" "$R/usr/bin/podman"
	chmod 0755 "$R/usr/bin/podman"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "warn  test container: the test image $image is not on this host"
	assert_stdout_has "hint: gpuprov never pulls: \`podman pull\` it yourself"
	echo "$image" > "$R/etc/podman-stand-in/images"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "pass  test container: \`podman run --rm --pull=never --device nvidia.com/gpu=all $image nvidia-smi -L\` lists 2 GPUs"
	rm -rf "$R/usr/bin/podman" "$R/etc/podman-stand-in" "$R/sys/bus/pci/devices" "$R/proc/driver"
}

# ctr_stand_in: containerd's ctr in the root, its argv logged to
# /var/log/ctr-stand-in.log: `--namespace NS images check -q` prints the
# complete images listed in /etc/ctr-stand-in/images.NS, `--namespace NS
# run` answers as /etc/ctr-stand-in/mode says (pass: one line per --gpus
# index, or two for --device nvidia.com/gpu=all; down: containerd not
# running; nocli: the hook's nvidia-container-cli missing) and it refuses
# anything else (a pull above all, or no namespace).
ctr_stand_in() {
	mkdir -p "$R/etc/ctr-stand-in"
	: > "$R/etc/ctr-stand-in/images.k8s.io"
	: > "$R/etc/ctr-stand-in/images.default"
	echo pass > "$R/etc/ctr-stand-in/mode"
	cat > "$R/usr/bin/ctr" <<'SH'
#!/bin/sh
echo "$*" >> /var/log/ctr-stand-in.log
mode=$(cat /etc/ctr-stand-in/mode)
if [ "$mode" = down ]; then
	echo 'ctr: failed to dial "/run/containerd/containerd.sock": context deadline exceeded' >&2
	exit 1
fi
[ "$1" = --namespace ] || { echo "ctr stand-in: no namespace: $*" >&2; exit 99; }
ns=$2
shift 2
[ "$*" != "images check -q" ] || exec cat "/etc/ctr-stand-in/images.$ns"
case "$*" in
"run --rm "*" gpuprov-verify-"*" nvidia-smi -L") ;;
*) echo "ctr stand-in: unexpected $*" >&2; exit 99 ;;
esac
case $mode in
pass) shift 2
	if [ "$1 $2" = "--device nvidia.com/gpu=all" ]; then set -- --gpus 0 --gpus 1; fi
	i=0
	while [ "$1" = --gpus ]; do echo "GPU $2: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; i=$((i + 1)); shift 2; done ;;
nocli) echo 'ctr: exec: "nvidia-container-cli": executable file not found in $PATH' >&2; exit 1 ;;
esac
SH
	chmod 0755 "$R/usr/bin/ctr"
}

@test "container_toolkit: beside containerd, verify runs the test image with ctr in Kubernetes' namespace, never pulled, every GPU by index or as the CDI device; containerd down or the image absent: no run" {
	local image=docker.io/nvidia/cuda:12.8.1-base-ubuntu24.04
	ctk_profile 1.17.8-1 "\"runtime\": \"containerd\", \"test_image\": \"$image\""
	cp "$P" "$R/tmp/p.json"
	cdi_host 2 570.86.15
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "skip  test container: only docker, podman beside CRI-O, or ctr beside containerd runs the test image"
	ctr_stand_in
	# The image in ctr's own default namespace, not Kubernetes': a warning,
	# and no run (the stand-in fails on anything but `images check -q` and
	# `run`).
	echo docker.io/library/ubuntu:24.04 > "$R/etc/ctr-stand-in/images.k8s.io"
	echo "$image" > "$R/etc/ctr-stand-in/images.default"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "warn  test container: the test image $image is not on this host in containerd's namespace k8s.io"
	assert_stdout_has "hint: gpuprov never pulls: \`ctr --namespace k8s.io images pull\` it yourself, or name an image that is here by its full name, as \`ctr --namespace k8s.io images check -q\` lists it"
	[ "$(cat "$R/var/log/ctr-stand-in.log")" = "--namespace k8s.io images check -q" ] ||
		fail "ctr calls:" "$(cat "$R/var/log/ctr-stand-in.log")"
	echo "$image" >> "$R/etc/ctr-stand-in/images.k8s.io"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "pass  test container: \`ctr --namespace k8s.io run --rm --gpus 0 --gpus 1 $image gpuprov-verify-"
	assert_stdout_has " nvidia-smi -L\` lists 2 GPUs"
	# The namespace the profile names.
	ctk_profile 1.17.8-1 "\"runtime\": \"containerd\", \"containerd_namespace\": \"default\", \"test_image\": \"$image\""
	cp "$P" "$R/tmp/p.json"
	echo docker.io/library/ubuntu:24.04 > "$R/etc/ctr-stand-in/images.k8s.io"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "pass  test container: \`ctr --namespace default run --rm --gpus 0 --gpus 1 $image gpuprov-verify-"
	# With a CDI spec there, every GPU as the CDI device (containerd 1.7).
	mkdir -p "$R/etc/cdi"
	printf 'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n' > "$R/etc/cdi/nvidia.yaml"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "pass  test container: \`ctr --namespace default run --rm --device nvidia.com/gpu=all $image gpuprov-verify-"
	assert_stdout_has " nvidia-smi -L\` lists 2 GPUs"
	rm "$R/etc/cdi/nvidia.yaml"
	echo nocli > "$R/etc/ctr-stand-in/mode"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_status 3
	assert_stdout_has "hint: ctr's --gpus hook runs nvidia-container-cli, which is not on PATH"
	echo down > "$R/etc/ctr-stand-in/mode"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "skip  test container: containerd is not running: the test image is run when it is"
	! grep -q pull "$R/var/log/ctr-stand-in.log" || fail "ctr was asked to pull:" "$(cat "$R/var/log/ctr-stand-in.log")"
	rm -rf "$R/usr/bin/ctr" "$R/etc/ctr-stand-in" "$R/var/log/ctr-stand-in.log" "$R/sys/bus/pci/devices" "$R/proc/driver"
}

@test "container_toolkit: with containerd_client nerdctl, verify runs the test image with nerdctl in the namespace, never pulled, the GPUs as the CDI device when a spec is there" {
	local image=docker.io/nvidia/cuda:12.8.1-base-ubuntu24.04
	ctk_profile 1.17.8-1 "\"runtime\": \"containerd\", \"containerd_client\": \"nerdctl\", \"test_image\": \"$image\""
	cp "$P" "$R/tmp/p.json"
	cdi_host 2 570.86.15
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "skip  test container: nerdctl (containerd_client) is not installed: it runs the test image beside containerd"
	# A stand-in nerdctl where its release tarball puts it: argv logged,
	# `image inspect` fails for an image not listed, `run` lists two GPUs.
	mkdir -p "$R/etc/nerdctl-stand-in" "$R/usr/local/bin"
	: > "$R/etc/nerdctl-stand-in/images"
	cat > "$R/usr/local/bin/nerdctl" <<'SH'
#!/bin/sh
echo "$*" >> /var/log/nerdctl-stand-in.log
case "$*" in
"--namespace k8s.io image inspect --format {{.ID}} "*)
	grep -qxF "$7" /etc/nerdctl-stand-in/images || { echo "FATA[0000] no such image: $7" >&2; exit 1; }
	echo sha256:0123 ;;
"--namespace k8s.io run --rm --pull=never "*" nvidia-smi -L")
	printf 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n' ;;
*) echo "nerdctl stand-in: unexpected $*" >&2; exit 99 ;;
esac
SH
	chmod 0755 "$R/usr/local/bin/nerdctl"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "warn  test container: the test image $image is not on this host in containerd's namespace k8s.io"
	assert_stdout_has "hint: gpuprov never pulls: \`nerdctl --namespace k8s.io pull\` it yourself, or name an image that is here"
	[ "$(cat "$R/var/log/nerdctl-stand-in.log")" = "--namespace k8s.io image inspect --format {{.ID}} $image" ] ||
		fail "nerdctl calls:" "$(cat "$R/var/log/nerdctl-stand-in.log")"
	echo "$image" > "$R/etc/nerdctl-stand-in/images"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "pass  test container: \`/usr/local/bin/nerdctl --namespace k8s.io run --rm --pull=never --gpus all $image nvidia-smi -L\` lists 2 GPUs"
	mkdir -p "$R/etc/cdi"
	printf 'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n' > "$R/etc/cdi/nvidia.yaml"
	in_root_as_host verify --profile /tmp/p.json --only container_toolkit
	assert_stdout_has "pass  test container: \`/usr/local/bin/nerdctl --namespace k8s.io run --rm --pull=never --device nvidia.com/gpu=all $image nvidia-smi -L\` lists 2 GPUs"
	! grep -q ' pull ' "$R/var/log/nerdctl-stand-in.log" || fail "nerdctl was asked to pull:" "$(cat "$R/var/log/nerdctl-stand-in.log")"
	rm -rf "$R/usr/local/bin/nerdctl" "$R/etc/nerdctl-stand-in" "$R/var/log/nerdctl-stand-in.log" "$R/etc/cdi" "$R/sys/bus/pci/devices" "$R/proc/driver"
}

@test "container_toolkit: a daemon.json that is not JSON blocks the install, naming the place; nothing is written" {
	ctk_profile 1.17.8-1
	printf '{\n  "log-level": "warn",\n  "runtimes": {\n' > "$R/etc/docker/daemon.json"
	snapshot "$R" before var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 4
	assert_stdout_has "container_toolkit: blocked - $R/etc/docker/daemon.json:4:1: unexpected end of file; check for a missing comma, quote or bracket; dockerd cannot read it either: fix it (or move it away) and run gpuprov again"
	assert_unchanged "$R" before var/lib/gpuprov/lock
	gp --root "$R" verify --profile "$P"
	assert_status 3
	assert_stdout_has "daemon.json:4:1: unexpected end of file"
}

@test "container_toolkit: a daemon.json that is a symlink or a directory is refused, never followed" {
	printf '{}\n' > "$R/etc/docker/elsewhere.json"
	rm -f "$R/etc/docker/daemon.json"
	ln -s elsewhere.json "$R/etc/docker/daemon.json"
	snapshot "$R" before var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 4
	assert_stdout_has "container_toolkit: blocked - $R/etc/docker/daemon.json is a symbolic link, not a regular file: gpuprov merges only a regular daemon.json and never writes through a link; replace it with a regular file and run gpuprov again"
	assert_unchanged "$R" before var/lib/gpuprov/lock
	rm "$R/etc/docker/daemon.json"
	mkdir "$R/etc/docker/daemon.json"
	gp --root "$R" plan --profile "$P"
	assert_status 4
	assert_stdout_has "daemon.json is a directory, not a regular file"
}

@test "container_toolkit: without a pinned key fingerprint lint calls the profile blocked and install stops before any change (stub root)" {
	local prof=$BATS_TEST_TMPDIR/unpinned.json root=$BATS_TEST_TMPDIR/stub
	unpinned_profile "$prof" '{ "version": "1.17.8-1" }'
	gp profiles lint "$prof"
	assert_status 4
	assert_stdout_has "stage container_toolkit: distro.container_toolkit_repo.keyring_fingerprint is not set"
	mkroot "$root" --distro debian12 --nouveau unloaded
	snapshot "$root" before var/lib/gpuprov var/lib/gpuprov/lock
	gp --root "$root" install --profile "$prof"
	assert_status 4
	assert_stdout_has "container_toolkit: blocked - cannot add NVIDIA's container toolkit repository: distro.container_toolkit_repo.keyring_fingerprint is not set"
	assert_unchanged "$root" before var/lib/gpuprov var/lib/gpuprov/lock
	# The catalogue's bases pin it.
	gp profiles lint "$REPO_ROOT/profiles/a100-ubuntu2204-docker.json"
	assert_status 0
}

@test "container_toolkit: without a version the stage is blocked (stub root)" {
	local prof=$BATS_TEST_TMPDIR/nover.json root=$BATS_TEST_TMPDIR/stub
	unpinned_profile "$prof" '{ "runtime": "docker" }'
	mkroot "$root" --distro debian12 --nouveau unloaded
	gp --root "$root" plan --profile "$prof"
	assert_status 4
	assert_stdout_has "container_toolkit: blocked - stages.container_toolkit.version is not set"
}

@test "container_toolkit: a test_image that could be read as an option is refused by lint (stub root)" {
	local prof=$BATS_TEST_TMPDIR/opt.json
	unpinned_profile "$prof" '{ "version": "1.17.8-1", "test_image": "--privileged" }'
	gp profiles lint "$prof"
	assert_status 65
	assert_stdout_has '"test_image" must be an image reference (nvidia/cuda:12.8.1-base-ubuntu24.04) (got "--privileged")'
	unpinned_profile "$prof" '{ "version": "1.17.8-1", "test_image": "registry.example:5000/my_team/cuda@sha256:0123" }'
	gp profiles lint "$prof"
	refute_stdout_has "must be an image reference"
}
