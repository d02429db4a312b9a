#!/bin/sh
# The README's first command: the main job, shown on a throwaway sandbox
# root that looks like a fresh Ubuntu 22.04 server with an A100 and nouveau
# loaded. Prints the install plan; changes nothing outside the sandbox.
set -eu
gpuprov=${1:-./gpuprov}
here=$(cd "$(dirname "$0")" && pwd)
root=$(mktemp -d "${TMPDIR:-/tmp}/gpuprov-demo.XXXXXX")
trap 'rm -rf "$root"' EXIT
sh "$here/fixtures/mkroot.sh" "$root"
echo "\$ gpuprov --root $root install --profile a100-ubuntu2204 --dry-run"
set +e
"$gpuprov" --root "$root" install --profile a100-ubuntu2204 --dry-run
rc=$?
set -e
case $rc in
0) echo "(exit 0: nothing to do)" ;;
4) echo "(exit 4: install would stop here before changing anything: a 'blocked'" \
	"stage says what it needs)" ;;
5) echo "(exit 5: install would make these changes, then ask for a reboot: nouveau" \
	"must be gone before the driver stage runs; 'gpuprov install' again after it" \
	"does the rest)" ;;
*) echo "(exit $rc)"; exit "$rc" ;;
esac
