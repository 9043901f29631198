#!/bin/sh
# check-docs-tree.sh ROOT
#
# docs/testing.md ("Where tests, tools and scripts live") lists the top-level
# folders and every script: each must be named there, or the list drifts
# from the tree.
set -eu
root=$1
doc=$root/docs/testing.md
status=0
for d in "$root"/*/; do
	name=$(basename "$d")
	case $name in build | build-*) continue ;; esac
	[ "$name" = src ] || [ "$name" = include ] && continue # design.md and the README map these
	grep -q "^$name/ " "$doc" || { echo "docs/testing.md does not list the folder $name/"; status=1; }
done
for f in "$root"/scripts/*; do
	name=$(basename "$f")
	grep -q "$name" "$doc" || { echo "docs/testing.md does not name scripts/$name"; status=1; }
done
[ $status -eq 0 ] && echo "every folder and script is in docs/testing.md"
exit $status
