#!/usr/bin/env bats
# The cudnn stage's method apt against real apt and dpkg: a debootstrapped
# Debian 12 root and the signed stand-in repository (tests/fixtures/aptrepo.sh:
# libcudnn9-cuda-12 and libcudnn9-dev-cuda-12 in 9.1.0.70-1 and 9.8.0.87-1,
# shared objects with sonames, the ldconfig trigger, the headers as
# alternatives), with cuda-toolkit-12-4 for the CUDA major.

load helpers

LIBDIR=/usr/lib/x86_64-linux-gnu

setup() {
	setup_apt_root
	P=$BATS_TEST_TMPDIR/p.json
	cudnn_profile 9.8.0.87
}

teardown() {
	stop_https_server
}

# cudnn_profile VERSION: $P, CUDA 12.4 from the repository and cuDNN VERSION
# from NVIDIA's packages.
cudnn_profile() {
	write_apt_profile "$P" "{ \"cuda\": { \"method\": \"repo\", \"version\": \"12.4\" },
		\"cudnn\": { \"method\": \"apt\", \"version\": \"$1\" } }"
}

@test "cudnn apt: the dry run lists the repository and both packages at the version, and changes nothing" {
	snapshot "$R" before
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "cudnn: needed - libcudnn9-cuda-12 is not installed"
	assert_stdout_has "create /usr/share/keyrings/cuda-archive-keyring.gpg (new file, mode 0644)"
	refute_stdout_has "run dpkg"
	# NVIDIA's repository is added by this run: its lists are not there, so
	# the full version (9.8.0.87-1) is known to the run only, as the plan says.
	assert_stdout_has "run, by rule: apt-get -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install --no-install-recommends --allow-downgrades --no-remove libcudnn9-cuda-12=9.8.0.87 libcudnn9-dev-cuda-12=9.8.0.87, each version taken at its newest revision in the lists the refresh fetched, with every package these depend on at exactly that version (the root's apt lists did not offer them before this run's refresh)"
	refute_stdout_has " cudnn9-cuda-12"
	# The cuda stage adds the repository; the cudnn stage's plan knows it.
	[ "$(printf '%s\n' "$output" | grep -c "create /usr/share/keyrings/cuda-archive-keyring.gpg")" = 1 ] ||
		fail "the repository is added twice in the plan"
	assert_unchanged "$R" before
}

@test "cudnn apt: installs both packages at the exact version; sonames resolve; verify passes; a rerun changes nothing" {
	assert_plan_matches_run "$R" --profile "$P" --ca-file "$CA"
	assert_status 0
	grep -Fq "cudnn: run apt-get -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install --no-install-recommends --allow-downgrades --no-remove libcudnn9-cuda-12=9.8.0.87-1 libcudnn9-dev-cuda-12=9.8.0.87-1" "$R/var/log/gpuprov.log" ||
		fail "the install's command line is not in the run log:" "$(grep 'run apt' "$R/var/log/gpuprov.log")"
	[ "$(dpkg_status "$R" libcudnn9-cuda-12)" = "install ok installed 9.8.0.87-1" ]
	[ "$(dpkg_status "$R" libcudnn9-dev-cuda-12)" = "install ok installed 9.8.0.87-1" ]
	# The package's ldconfig trigger ran in the root: its cache has the
	# sonames (under /lib: Debian 12's /usr is merged).
	chroot "$R" ldconfig -p | grep -q "libcudnn_graph.so.9 (.*) => /lib/x86_64-linux-gnu/libcudnn_graph.so.9" ||
		fail "libcudnn_graph.so.9 is not in the root's linker cache"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "libcudnn9-cuda-12 9.8.0.87-1"
	assert_stdout_has "libcudnn9-dev-cuda-12 9.8.0.87-1"
	assert_stdout_has "/usr/include/cudnn_version.h says 9.8.0"
	assert_stdout_has "/usr/include/cudnn_version.h and /usr/include/cudnn.h present"
	assert_stdout_has "libcudnn.so.9 => /lib/x86_64-linux-gnu/libcudnn.so.9"
	assert_stdout_has "libcudnn_graph.so.9 => /lib/x86_64-linux-gnu/libcudnn_graph.so.9"
	assert_stdout_has "toolkit 12.4.1, cuDNN built for CUDA 12"
	snapshot "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	assert_stdout_has "cudnn: satisfied - cuDNN 9.8.0 from libcudnn9-cuda-12 and libcudnn9-dev-cuda-12 (/usr/include/cudnn_version.h)"
	refute_stdout_has "apt-get"
	assert_unchanged "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json
}

@test "cudnn apt: a version change in the profile moves both packages" {
	cudnn_profile 9.1.0.70
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(dpkg_status "$R" libcudnn9-dev-cuda-12)" = "install ok installed 9.1.0.70-1" ]
	[ "$(chroot "$R" readlink -f /usr/include/cudnn_version.h)" = /usr/include/x86_64-linux-gnu/cudnn_version_v9.h ]
	grep -qx "#define CUDNN_MINOR 1" "$R/usr/include/x86_64-linux-gnu/cudnn_version_v9.h"
	cudnn_profile 9.8.0.87
	gp --root "$R" plan --profile "$P"
	assert_status 0
	assert_stdout_has "cudnn: needed - libcudnn9-cuda-12 9.1.0.70-1 is installed; the profile wants 9.8.0.87"
	assert_stdout_has "libcudnn9-cuda-12=9.8.0.87-1 libcudnn9-dev-cuda-12=9.8.0.87-1"
	assert_plan_matches_run "$R" --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(dpkg_status "$R" libcudnn9-cuda-12)" = "install ok installed 9.8.0.87-1" ]
	[ "$(dpkg_status "$R" libcudnn9-dev-cuda-12)" = "install ok installed 9.8.0.87-1" ]
	[ ! -e "$R$LIBDIR/libcudnn.so.9.1.0" ] || fail "the old library is still there"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 0
	assert_stdout_has "/usr/include/cudnn_version.h says 9.8.0"
	# And back down: the pinned version wins over the newer one installed.
	cudnn_profile 9.1.0.70
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	[ "$(dpkg_status "$R" libcudnn9-cuda-12)" = "install ok installed 9.1.0.70-1" ]
}

@test "cudnn apt: verify fails on a header of another version and on a soname gone; check blocks naming the header" {
	gp --root "$R" install --profile "$P" --ca-file "$CA"
	assert_status 0
	sed -i 's/CUDNN_MINOR 8/CUDNN_MINOR 1/' "$R/usr/include/x86_64-linux-gnu/cudnn_version_v9.h"
	rm "$R$LIBDIR/libcudnn_graph.so.9.8.0"
	gp --root "$R" verify --profile "$P" --only cudnn
	assert_status 3
	assert_stdout_has "/usr/include/cudnn_version.h says 9.1.0; the profile wants 9.8.0"
	assert_stdout_has "$LIBDIR/libcudnn_graph.so.9 is missing or a broken link"
	snapshot "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json var/lib/gpuprov/lock
	gp --root "$R" install --profile "$P" --ca-file "$CA" --only cudnn
	assert_status 4
	assert_stdout_has "cudnn: blocked - /usr/include/cudnn_version.h says cuDNN 9.1.0, but libcudnn9-dev-cuda-12 is installed for 9.8.0"
	assert_unchanged "$R" before var/log/gpuprov.log var/lib/gpuprov/state.json var/lib/gpuprov/lock
}

@test "cudnn apt: cuDNN 8, a three-number version and no CUDA major are blocked with the way out" {
	write_apt_profile "$P" '{ "cudnn": { "method": "apt", "version": "8.9.7.29", "cuda": "12" } }'
	gp --root "$R" plan --profile "$P"
	assert_status 4
	assert_stdout_has "cuDNN 8's libcudnn8 packages carry the CUDA version in the package revision"
	assert_stdout_has "use method tarball for cuDNN 8"
	write_apt_profile "$P" '{ "cudnn": { "method": "apt", "version": "9.8.0", "cuda": "12" } }'
	gp --root "$R" plan --profile "$P"
	assert_status 4
	assert_stdout_has "stages.cudnn.version 9.8.0 has three numbers"
	write_apt_profile "$P" '{ "cudnn": { "method": "apt", "version": "9.8.0.87" } }'
	gp --root "$R" plan --profile "$P"
	assert_status 4
	assert_stdout_has "set stages.cudnn.cuda or stages.cuda.version"
}
