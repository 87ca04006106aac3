# Sourced by run.sh and yardstick.sh: the file arguments they share. Sets `files` (test file names) and
# `extra` (pytest arguments after --) from "$@": names (test_ and .py optional), @LIST (LIST.txt here),
# then -- and pytest arguments. With no file argument, foundation.txt.
files=()
lists=()
extra=()
seen_sep=0
for a in "$@"; do
  if [[ $seen_sep == 1 ]]; then extra+=("$a"); continue; fi
  if [[ $a == "--" ]]; then seen_sep=1; continue; fi
  if [[ $a == @* ]]; then lists+=("$HERE/${a#@}.txt"); continue; fi
  a="$(basename "$a")"; a="${a%.py}"; [[ $a == test_* ]] || a="test_$a"
  files+=("$a.py")
done
if [[ ${#files[@]} == 0 && ${#lists[@]} == 0 ]]; then lists=("$HERE/foundation.txt"); fi
for list in "${lists[@]}"; do
  while read -r line; do
    line="${line%%#*}"; line="${line//[[:space:]]/}"
    [[ -n $line ]] && files+=("$line")
  done < "$list"
done
