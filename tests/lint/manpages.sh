#!/bin/sh
# The man pages render at 80 columns (what man gives a pipe) without a
# warning from groff: deb.bats fails on one, found here without building the
# package. Usage: manpages.sh PAGE...
set -u
status=0
for page in "$@"; do
	warnings=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -P cat -l "$page" 2>&1 > /dev/null)
	if [ -n "$warnings" ]; then
		printf '%s: groff warns at 80 columns:\n%s\n' "$page" "$warnings" >&2
		status=1
	fi
done
exit "$status"
