#!/usr/bin/env bash
# The README reads in a minute (docs/architecture.md has the rest): at its top the two
# commands that set everything up (scripts/demo.sh, scripts/test.sh), then what runs where,
# a features table, a quick start of three commands with their output, one bring-your-own
# model example, and links to docs/ that all exist.
#
# usage: readme.sh SOURCE_DIR
source "$(dirname "$0")/harness.sh"
readme=$1/README.md

first_block=$(awk '/^```/{n++; next} n==1' "$readme")
grep -q "^scripts/demo.sh" <<< "$first_block" || fail "the first code block lacks scripts/demo.sh"
grep -q "^scripts/test.sh" <<< "$first_block" || fail "the first code block lacks scripts/test.sh"
grep -q "^\*\*Where it runs today:\*\*" "$readme" || fail "no 'Where it runs today' paragraph"
grep -q "^## Features" "$readme" || fail "no features section"
[ "$(grep -c '^| ' "$readme")" -ge 8 ] || fail "the features table has fewer than 6 rows"
grep -q "^## Quick start" "$readme" || fail "no quick start"
for n in 1 2 3; do grep -q "^\*\*$n\. " "$readme" || fail "quick start step $n missing"; done
[ "$(grep -c '^\$ ' "$readme")" -ge 4 ] || fail "the quick start shows fewer than 4 commands"
grep -q "^## Bring your own model" "$readme" || fail "no bring-your-own-model example"
grep -q "torch.jit.save(torch.jit.script(" "$readme" || fail "the example saves no model"
[ "$(wc -l < "$readme")" -le 200 ] || fail "the README has more than 200 lines"
for link in $(grep -o '](docs/[^)#]*' "$readme" | sed 's/^](//' | sort -u); do
  [ -e "$1/$link" ] || fail "a link to $link, which does not exist"
done
[ "$failed" = 0 ] && echo "ok: README.md"
exit "$failed"
