#!/usr/bin/env bash
# The main job, as far as it exists today: check and translate every
# example aspect. Weaving into the lab kernel comes with the weaver.
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
examples=(examples/*.klasy)
if [ ${#examples[@]} -eq 0 ]; then
	echo "demo: no example aspects yet (examples/*.klasy)"
	exit 0
fi
for f in "${examples[@]}"; do
	echo "== klasy check $f"
	./bin/klasy check "$f"
	echo "== klasy translate $f"
	./bin/klasy translate "$f"
done
echo
echo "demo: every example aspect checked and translated; weaving into a running kernel is not implemented yet."
