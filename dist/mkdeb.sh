#!/bin/sh
# Builds gpuprov's Debian package (`make deb`). dpkg-buildpackage wants
# debian/ at the top of the source, and dist/debian/ is where the tree keeps
# it: so the source (git's files, or the tree without its build outputs) is
# copied to OUTDIR/gpuprov-VERSION/ with dist/debian/ as debian/, and the
# package is built there; OUTDIR/gpuprov_<version>_<arch>.deb is the result,
# and its path the last line printed.
#
#   mkdeb.sh OUTDIR VERSION [DEB_VERSION]
#
# VERSION is the Makefile's, which dist/debian/changelog's newest entry must
# carry. DEB_VERSION (e.g. 0.1.0+site1, a local rebuild) adds a changelog
# entry of that version to the copy; an earlier copy of the same VERSION is
# then reused as it is, compiled objects included (dpkg-buildpackage -nc).
set -eu

out=${1:?usage: mkdeb.sh OUTDIR VERSION [DEB_VERSION]}
version=${2:?usage: mkdeb.sh OUTDIR VERSION [DEB_VERSION]}
deb_version=${3:-}
top=$(cd "$(dirname "$0")/.." && pwd)
# The package is built as released, whatever make called this: an outer
# make's variables (make check-asan's SANITIZE=1 and BUILD, through
# MAKEFLAGS) would otherwise reach the package's own make and ship an ASan
# binary.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES SANITIZE BUILD WERROR

for tool in dpkg-buildpackage dh dpkg-parsechangelog; do
	command -v "$tool" > /dev/null 2>&1 ||
		{ echo "mkdeb.sh: $tool is not installed; run make deps-deb" >&2; exit 1; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
src=$out/gpuprov-$version

reuse=""
if [ -n "$deb_version" ] && [ -f "$src/debian/changelog" ]; then
	reuse=-nc
else
	rm -rf "$src"
	mkdir -p "$src"
	if git -C "$top" rev-parse --show-toplevel > /dev/null 2>&1; then
		# Tracked and new files, not what .gitignore names (build outputs).
		(cd "$top" && git ls-files -z --cached --others --exclude-standard |
			tar --null --no-recursion --ignore-failed-read -T - -cf -) |
			tar -C "$src" -xf -
	else
		(cd "$top" && tar --exclude=./.git --exclude=./build --exclude='./build-*' \
			--exclude=./gpuprov -cf - .) | tar -C "$src" -xf -
	fi
	cp -R "$src/dist/debian" "$src/debian"
fi

changelog=$src/debian/changelog
newest=$(dpkg-parsechangelog -l "$changelog" -S Version)
if [ -z "$deb_version" ] && [ "$newest" != "$version" ]; then
	echo "mkdeb.sh: dist/debian/changelog's newest entry is $newest, the Makefile's VERSION $version: add an entry for $version" >&2
	exit 1
fi
if [ -n "$deb_version" ] && [ "$newest" != "$deb_version" ]; then
	maint=$(dpkg-parsechangelog -l "$changelog" -S Maintainer)
	{
		printf 'gpuprov (%s) unstable; urgency=medium\n\n' "$deb_version"
		printf '  * Local rebuild of %s.\n\n' "$version"
		printf ' -- %s  %s\n\n' "$maint" "$(date -R)"
		cat "$changelog"
	} > "$changelog.new"
	mv "$changelog.new" "$changelog"
fi

(cd "$src" && dpkg-buildpackage -us -uc -b $reuse)
pkg_version=$(dpkg-parsechangelog -l "$changelog" -S Version)
echo "$out/gpuprov_${pkg_version}_$(dpkg-architecture -qDEB_HOST_ARCH).deb"
