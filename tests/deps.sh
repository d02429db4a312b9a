#!/bin/sh
# Installs the Debian packages named as arguments that are missing.
# Used by `make deps`, `make check`, `make demo` and `make fuzz`.
set -eu
missing=""
for p in "$@"; do
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "make deps: missing packages:$missing" >&2
	echo "make deps: run it as root (sudo make deps) or install them with apt-get" >&2
	exit 1
fi
echo "make deps: installing$missing" >&2
apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
