#!/usr/bin/env bash
# Prints, for every failed test in a `go test -v` log, the lines the test
# itself logged (t.Log, t.Error, t.Fatal: "    file.go:N: ..."), with up to
# three continuation lines each, and no more than the last 60 per test. The
# control plane's log dumps a failed test prints (deeper indented) are left
# in the full log: the CI summary shows what the test asserted.
#
# Usage: hack/test-failures.sh LOG
set -euo pipefail
log=${1:?usage: $0 LOG}
awk '
function flush(name,   i, n, from) {
	n = count[name]
	from = n > 60 ? n - 60 : 0
	if (from > 0) printf "    ... %d earlier lines of %s left out\n", from, name
	for (i = from + 1; i <= n; i++) print lines[name, i]
}
/^=== (RUN|CONT|PAUSE|NAME) / { cur = $3; cont = 0; next }
/^ *--- FAIL: / {
	name = $3
	print "--- FAIL: " name
	flush(name)
	next
}
/^ *--- (PASS|SKIP): / { next }
/^    [^ ][^ ]*\.go:[0-9]+: / {
	if (cur == "") next
	lines[cur, ++count[cur]] = $0
	cont = 3
	next
}
/^        / {
	if (cont > 0 && cur != "") { lines[cur, ++count[cur]] = $0; cont-- }
	next
}
{ cont = 0 }
' "$log"
