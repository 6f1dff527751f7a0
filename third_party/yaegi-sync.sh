#!/usr/bin/env bash
# yaegi-sync.sh: third_party/yaegi is the upstream yaegi module (third_party/yaegi-patches/
# upstream names the version) less the files listed in third_party/yaegi-patches/trim, plus
# the patches third_party/yaegi-patches/NNNN-*.patch applied in order, plus
# README.godist.md. See third_party/yaegi/README.godist.md.
#
#   yaegi-sync.sh check        rebuild that tree in a temporary directory and compare it
#                              with third_party/yaegi; on a difference print it as a patch
#                              on stdout (ready to become the next NNNN-*.patch) and fail
#   yaegi-sync.sh apply        rewrite third_party/yaegi from upstream, trim and patches
#                              (to move to another release, or after editing a patch)
#   yaegi-sync.sh tree DIR [N] write upstream less the trim, with the first N patches (all
#                              by default), into the new directory DIR: the base for
#                              reworking patch N+1
#
# The module comes from `go mod download`: the module cache when it holds the version
# (offline), else the module proxy.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
patches=$here/yaegi-patches
target=$here/yaegi
read -r module version <"$patches/upstream"

die() { echo "yaegi-sync: $*" >&2; exit 1; }

# upstream_dir prints the directory of the extracted module in the module cache. It runs
# outside any module (a temporary directory), so that godist's go.mod and its replace of
# yaegi play no part and are not rewritten.
upstream_dir() {
	local tmp json dir
	tmp=$(mktemp -d)
	json=$(cd "$tmp" && GO111MODULE=on GOWORK=off GOFLAGS= go mod download -json "$module@$version" 2>&1) || {
		rm -rf "$tmp"
		die "go mod download $module@$version failed: $json"
	}
	rm -rf "$tmp"
	dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
	[ -n "$dir" ] && [ -d "$dir" ] || die "go mod download $module@$version gave no directory: $json"
	printf '%s\n' "$dir"
}

# apply_patch applies one patch file inside directory $1, exactly (no fuzz).
apply_patch() {
	local dir=$1 p=$2
	if command -v patch >/dev/null; then
		patch -d "$dir" -p1 -F0 -N -s --no-backup-if-mismatch -i "$p"
	else
		(cd "$dir" && git apply -p1 --whitespace=nowarn "$p")
	fi
}

# build DIR [N]: upstream, less the trim, with the first N patches, in the new DIR.
build() {
	local dir=$1 n=${2:-} src pat i=0 p
	src=$(upstream_dir)
	mkdir -p "$dir"
	cp -R "$src/." "$dir/"
	chmod -R u+w "$dir" # the module cache is read-only
	while IFS= read -r pat || [ -n "$pat" ]; do
		case $pat in '' | '#'*) continue ;; esac
		(cd "$dir" && find . -path "./$pat" -prune -exec rm -rf {} +)
	done <"$patches/trim"
	for p in "$patches"/[0-9][0-9][0-9][0-9]-*.patch; do
		[ -e "$p" ] || break
		if [ -n "$n" ] && [ "$i" -ge "$n" ]; then
			break
		fi
		apply_patch "$dir" "$p" || die "$(basename "$p") does not apply to $module $version with the $i patches before it; to rework it, start from: yaegi-sync.sh tree DIR $i"
		i=$((i + 1))
	done
}

case ${1:-} in
check)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	build "$tmp/a"
	cp "$target/README.godist.md" "$tmp/a/"
	ln -s "$target" "$tmp/b"
	# diff -N shows a new or deleted file as a patch, but an empty one not at all: compare
	# the lists of files too.
	(cd "$tmp/a" && find . -type f | LC_ALL=C sort) >"$tmp/files.a"
	(cd "$target" && find . -type f | LC_ALL=C sort) >"$tmp/files.b"
	if ! (cd "$tmp" && LC_ALL=C diff -ruN a b) || ! LC_ALL=C diff -u --label upstream+patches --label third_party/yaegi "$tmp/files.a" "$tmp/files.b" >&2; then
		echo "yaegi-sync: third_party/yaegi differs from $module $version + third_party/yaegi-patches (the diff above, as a patch)." >&2
		echo "yaegi-sync: put a new change in a new NNNN-*.patch (yaegi-sync.sh check > third_party/yaegi-patches/NNNN-name.patch, then add its header), or run yaegi-sync.sh apply to drop it." >&2
		exit 1
	fi
	echo "yaegi-sync: third_party/yaegi is $module $version + trim + $(ls "$patches"/[0-9][0-9][0-9][0-9]-*.patch | wc -l | tr -d ' ') patches"
	;;
apply)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	build "$tmp/a"
	cp "$target/README.godist.md" "$tmp/a/"
	find "$target" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
	cp -R "$tmp/a/." "$target/"
	echo "yaegi-sync: third_party/yaegi rewritten from $module $version + trim + patches"
	;;
tree)
	[ $# -ge 2 ] || die "usage: yaegi-sync.sh tree DIR [N]"
	[ ! -e "$2" ] || die "$2 exists"
	build "$2" "${3:-}"
	echo "yaegi-sync: $2 is $module $version + trim + ${3:-all} patches"
	;;
*)
	sed -n '2,15s/^# \{0,1\}//p' "$0" >&2
	exit 2
	;;
esac
