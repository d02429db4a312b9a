#!/usr/bin/env bats
# The 2026 distro bases and arm64 (docs/architecture.md "Adding a distro"):
# the fixture roots of Ubuntu 26.04, Debian 13 and Rocky 10 and an aarch64
# GH200 host; the architecture as the root gives it against match.arch;
# NVIDIA's sbsa directories, linux-sbsa cuDNN, Canonical's -64k flavours and
# Miniforge's Linux-aarch64 installer derived from the architecture; no
# proprietary modules on aarch64; RHEL 10's driver without module streams;
# deb822 apt sources on Debian 13. The catalogue profiles' full plans are
# golden (golden.bats); real apt with deb822 is apt_trixie.bats.

load helpers

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	P=$BATS_TEST_TMPDIR/p.json
}

# profile JSON: $P holds it.
profile() {
	printf '%s\n' "$1" > "$P"
}

@test "distros: each fixture root is the distribution and architecture its profiles match" {
	local spec d a want
	for spec in ubuntu2604:x86_64:"Ubuntu 26.04 LTS" debian13:x86_64:"Debian GNU/Linux 13 (trixie)" \
		rocky10:x86_64:"Rocky Linux 10.0 (Red Quartz)" ubuntu2404:aarch64:"Ubuntu 24.04 LTS"; do
		d=${spec%%:*}
		a=${spec#*:}
		want=${a#*:}
		a=${a%%:*}
		rm -rf "$R"
		mkroot "$R" --distro "$d" --arch "$a"
		[ "$(cat "$R/proc/sys/kernel/arch")" = "$a" ] || fail "$d: arch"
		gp --root "$R" detect
		assert_status 0
		assert_stdout_has "$want"
		assert_stdout_has "Arch:        $a"
		gp --root "$R" --json detect
		printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/detect.json"
		[ "$(json_get "$BATS_TEST_TMPDIR/detect.json" 'd["arch"]')" = "$a" ] ||
			fail "$d: detect --json arch:" "$output"
	done
	# The -64k flavour of Ubuntu's arm64 servers, Debian's arm64 kernel.
	[ -d "$R/lib/modules/6.8.0-31-generic-64k" ] || fail "no generic-64k kernel"
	rm -rf "$R"
	mkroot "$R" --distro debian13 --arch aarch64
	[ -d "$R/lib/modules/6.12.48+deb13-arm64" ] || fail "no arm64 kernel"
}

@test "distros: match.arch is compared with the root's architecture, both ways" {
	mkroot "$R" --distro ubuntu2404 --gpu 2342
	gp --root "$R" plan --profile gh200-ubuntu2404-arm64
	assert_status 4
	assert_stderr_has "expected architecture aarch64, found x86_64"
	rm -rf "$R"
	mkroot "$R" --distro ubuntu2404 --arch aarch64 --gpu 2335
	gp --root "$R" plan --profile h200-ubuntu2404
	assert_status 4
	assert_stderr_has "expected architecture x86_64, found aarch64"
}

@test "distros: a root's arch file that is no architecture word is an unknown architecture" {
	mkroot "$R" --distro ubuntu2404 --arch aarch64 --gpu 2342
	printf 'aarch64\033[2J\n' > "$R/proc/sys/kernel/arch"
	gp --root "$R" plan --profile gh200-ubuntu2404-arm64
	assert_status 4
	assert_stderr_has "expected architecture aarch64, found an unknown one"
	[[ $stderr != *$'\033'* ]] || fail "the escape reached the terminal"
}

@test "distros: an aarch64 GH200 host gets sbsa, linux-sbsa, -64k and Linux-aarch64 names" {
	mkroot "$R" --distro ubuntu2404 --arch aarch64 --gpu 2342 --nouveau unloaded
	# Canonical's prebuilt modules for the running kernel's -64k flavour.
	mkdir -p "$R/var/lib/apt/lists"
	printf 'Package: %s\nVersion: 1\n\n' linux-modules-nvidia-580-server-open-6.8.0-31-generic-64k \
		linux-modules-nvidia-580-server-open-generic-64k nvidia-driver-580-server-open \
		> "$R/var/lib/apt/lists/ports_dists_noble_main_binary-arm64_Packages"
	# The catalogue profile's stages, but no installer_url: the stage's
	# default is the architecture's Miniforge.
	profile '{ "name": "t-gh200", "extends": "distro/ubuntu2404",
	  "match": { "arch": "aarch64", "gpus": ["10de:2342"] },
	  "stages": {
	    "driver": { "method": "apt", "branch": "580", "flavor": "server", "modules": "open" },
	    "cuda": { "method": "repo", "version": "13.0", "path": "/usr/local/cuda-13.0" },
	    "cudnn": { "method": "tarball", "version": "9.27.0.42", "cuda": "13",
	               "sha256": "74912c0c6182d7af2cd35619241674781dd4ca716a5ba87b01157b78ee959001" },
	    "pytorch": { "method": "conda", "python": "3.12", "packages": ["torch==2.14.0"],
	                 "index_url": "https://download.pytorch.org/whl/cu130" } } }'
	gp --root "$R" plan --profile "$P"
	assert_status 4
	assert_stdout_has "install --no-install-recommends --allow-downgrades --no-remove nvidia-driver-580-server-open linux-modules-nvidia-580-server-open-6.8.0-31-generic-64k linux-modules-nvidia-580-server-open-generic-64k"
	assert_stdout_has "(open modules, prebuilt signed)"
	assert_stdout_has "create /etc/apt/sources.list.d/cuda-ubuntu2404-sbsa.list"
	assert_stdout_has "+deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa/ /"
	assert_stdout_has "download https://developer.download.nvidia.com/compute/cudnn/redist/cudnn/linux-sbsa/cudnn-linux-sbsa-9.27.0.42_cuda13-archive.tar.xz"
	assert_stdout_has "https://github.com/conda-forge/miniforge/releases/latest/download/Miniforge3-Linux-aarch64.sh"
	# Nothing names x86_64 but the architecture-independent keyring package
	# the base pins (cuda-keyring_1.1-1_all.deb in the x86_64 directory).
	local other
	other=$(grep x86_64 <<< "$output" | grep -v '/x86_64/cuda-keyring_1.1-1_all.deb') || true
	[ -z "$other" ] || fail "x86_64 names on an aarch64 host:" "$other"
}

@test "distros: no proprietary kernel modules on aarch64 (preflight), open allowed" {
	# An A100 on an arm64 host: the GPU could take either flavor, the
	# architecture cannot.
	profile '{ "name": "t-arm-prop", "match": { "arch": "aarch64", "gpus": ["10de:20b0"] },
	  "stages": { "driver": { "method": "apt", "branch": "580", "modules": "proprietary" } } }'
	gp profiles lint "$P"
	assert_status 4
	assert_stdout_has "rule module-flavor"
	assert_stdout_has "proprietary kernel modules are not supported on aarch64"
	profile '{ "name": "t-arm-open", "match": { "arch": "aarch64", "gpus": ["10de:20b0"] },
	  "stages": { "driver": { "method": "apt", "branch": "580", "modules": "open" } } }'
	gp profiles lint "$P"
	assert_status 0
	# The same proprietary driver on x86_64 is fine.
	profile '{ "name": "t-x86-prop", "match": { "arch": "x86_64", "gpus": ["10de:20b0"] },
	  "stages": { "driver": { "method": "apt", "branch": "580", "modules": "proprietary" } } }'
	gp profiles lint "$P"
	assert_status 0
	# GH200 with proprietary: refused for the architecture and the GPU.
	profile '{ "name": "t-gh200-prop", "extends": "gh200-ubuntu2404-arm64",
	  "stages": { "driver": { "modules": "proprietary" } } }'
	gp profiles lint "$P"
	assert_status 4
	assert_stdout_has "proprietary kernel modules are not supported on aarch64"
	assert_stdout_has "GH200"
	# "auto" resolves to open on aarch64 whatever the branch's default.
	mkroot "$R" --distro ubuntu2404 --arch aarch64 --gpu 20b0 --nouveau unloaded
	profile '{ "name": "t-arm-auto", "extends": "distro/ubuntu2404", "match": { "arch": "aarch64" },
	  "stages": { "driver": { "method": "apt", "branch": "535", "flavor": "server", "modules": "auto" } } }'
	gp --root "$R" plan --profile "$P"
	assert_stdout_has "nvidia-driver-535-server-open (open modules, DKMS)"
}

# A Rocky 10 profile with the key pinned as an operator would (a test value).
rocky10_profile() {
	profile '{ "name": "t-rocky10", "extends": "distro/rocky10",
	  "distro": { "keyring_sha256": "1111111111111111111111111111111111111111111111111111111111111111",
	              "keyring_fingerprint": "0000000000000000000000000000000000000000" },
	  "stages": { "driver": '"$1"' } }'
}

@test "distros: RHEL 10 has no module streams: nvidia-open at an exact version, a bare branch refused" {
	mkroot "$R" --distro rocky10 --nouveau unloaded --pkg-stubs
	rocky10_profile '{ "method": "dnf", "branch": "580", "modules": "open", "hold": true }'
	gp --root "$R" plan --profile "$P"
	assert_status 4
	assert_stdout_has "driver: blocked - this distribution's NVIDIA repository has no dnf module streams (distro.dnf_module_streams false: RHEL 10), so dnf would install the repository's newest driver (nvidia-open or cuda-drivers), not branch 580; pin an exact stages.driver.version of branch 580"
	rocky10_profile '{ "method": "dnf", "version": "580.126.20", "modules": "open", "hold": true }'
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "create /etc/yum.repos.d/cuda-rhel10-x86_64.repo"
	assert_stdout_has "baseurl=https://developer.download.nvidia.com/compute/cuda/repos/rhel10/x86_64/"
	assert_stdout_has "install kernel-devel-6.12.0-55.9.1.el10_0.x86_64 nvidia-open-580.126.20 nvidia-driver-libs-580.126.20"
	assert_stdout_has "kmod-nvidia-open-dkms-580.126.20"
	assert_stdout_has "versionlock add"
	refute_stdout_has "@nvidia-driver"
	# Rocky 9 keeps its streams.
	rm -rf "$R"
	mkroot "$R" --distro rocky9 --nouveau unloaded --pkg-stubs
	profile '{ "name": "t-rocky9", "extends": "distro/rocky9",
	  "stages": { "driver": { "method": "dnf", "branch": "580", "modules": "open" } } }'
	gp --root "$R" plan --profile "$P"
	assert_status 5
	assert_stdout_has "@nvidia-driver:580-open"
}

@test "distros: Debian 13 writes every apt repository as a deb822 .sources file" {
	mkroot "$R" --distro debian13 --gpu 26b9 --nouveau unloaded --pkg-stubs
	profile '{ "name": "t-trixie", "extends": "l40s-debian13",
	  "distro": { "keyring_sha256": "2222222222222222222222222222222222222222222222222222222222222222" },
	  "stages": { "cudnn": false, "pytorch": false, "env": false,
	              "container_toolkit": { "version": "1.17.8" } } }'
	gp --root "$R" plan --profile "$P"
	assert_status 5
	# NVIDIA's CUDA repository (driver and cuda stages) and the container
	# toolkit's, through the one writer.
	local want
	want=$(cat <<'EOF'
        --- /etc/apt/sources.list.d/cuda-debian13-x86_64.sources (absent)
        +++ /etc/apt/sources.list.d/cuda-debian13-x86_64.sources (planned)
        @@ -0,0 +1,5 @@
        +# Written by gpuprov: repository cuda-debian13-x86_64, signed by key EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC
        +Types: deb
        +URIs: https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64/
        +Suites: /
        +Signed-By: /usr/share/keyrings/cuda-archive-keyring.gpg
EOF
	)
	[[ $output == *"$want"* ]] || fail "no deb822 CUDA repository:" "$output"
	assert_stdout_has "create /etc/apt/sources.list.d/nvidia-container-toolkit.sources"
	assert_stdout_has "+URIs: https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"
	refute_stdout_has "sources.list.d/cuda-debian13-x86_64.list"
	refute_stdout_has "+deb ["
}
