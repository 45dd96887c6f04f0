#!/usr/bin/env bash
# Runs every fuzzer of untrusted input in turn, each for FUZZTIME (default 20s; a count
# such as 1000x works too). `go test` alone replays each fuzzer's seed corpus (f.Add and
# the committed testdata/fuzz/<FuzzName>/ of its package); this explores beyond it. A
# failing input is written to that directory: fix the product and commit the file as a
# regression seed.
#
# The list below must name every Fuzz function of the repository; the script refuses
# to run when one is missing, so a new fuzzer cannot be forgotten.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-20s}

fuzzers=(
  "./pkg/admission FuzzPodAnnotations"          # the webhook's Pod rules over annotation values
  "./pkg/admission FuzzReviewBody"              # AdmissionReview decoding in the webhook
  "./pkg/apis/juneau/annotations FuzzParse"     # the Pod annotation grammar
  "./pkg/apis/juneau/iprange FuzzClaimName"     # AllocationClaim names of both families
  "./pkg/apis/juneau/iprange FuzzParse"         # AddressPool entries
  "./pkg/apis/juneau/jsonwire FuzzEvents"       # watch events read without a parse, against apimachinery's
  "./pkg/apis/juneau/jsonwire FuzzMeta"         # kinds read from the first keys, against apimachinery's
  "./pkg/node/agent FuzzCompute"                # the agent's desired-state builder
  "./pkg/node/arp FuzzDecide"                   # ARP frame decoding
  "./pkg/node/arp FuzzKernelDecide"             # the kernel path's program against Decide (root: BPF_PROG_TEST_RUN)
  "./pkg/node/cni FuzzPluginInput"              # the CNI plugin's stdin and arguments
  "./pkg/node/cni FuzzStateFile"                # the CNI plugin's state files, as DEL, CHECK and GC read them
  "./pkg/node/cniserver FuzzRequest"            # requests on the agent's CNI socket
  "./pkg/node/handover FuzzLoadAnswering"       # the addresses a previous agent saved it answered for
  "./pkg/node/ndp FuzzDecide"                   # neighbor solicitation decoding
)

listed=$(printf '%s\n' "${fuzzers[@]}" | sed 's/ *#.*//' | sort)
found=$(grep -rl --include='*_test.go' '^func Fuzz' pkg cmd test bench | sort | while read -r f; do
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed "s|^func |./$(dirname "$f") |"
done | sort)
if [[ "$listed" != "$found" ]]; then
  echo "hack/fuzz.sh: its list differs from the Fuzz functions in the tree (< listed, > found):" >&2
  diff <(echo "$listed") <(echo "$found") >&2 || true
  exit 1
fi

start=$SECONDS
for f in "${fuzzers[@]}"; do
  read -r pkg name _ <<<"$f"
  echo "fuzz: $name ($pkg) for $FUZZTIME"
  # The progress lines every 3 s are left out; failures and the summary are kept.
  # Go 1.26's fuzz coordinator can report a bare "context deadline exceeded" when a
  # duration-bound run ends while a loaded machine starves a worker (go.dev/issue/75804,
  # fixed in Go 1.27): no input failed, none is written. Only that exact outcome passes;
  # any failure with an input, or any other error, fails.
  out=$("$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1) && rc=0 || rc=$?
  grep -v '^fuzz: elapsed' <<<"$out" || true
  if [[ $rc -ne 0 ]]; then
    # The failure's own lines: the one after "--- FAIL" must be the deadline, alone.
    report=$(grep -A1 '^--- FAIL' <<<"$out" | grep -v '^--- FAIL' || true)
    if [[ "$report" == "    context deadline exceeded" ]] && ! grep -q 'Failing input written\|^panic:' <<<"$out"; then
      echo "fuzz: $name ended at its time limit with Go's deadline report (go.dev/issue/75804), no failing input"
    else
      exit "$rc"
    fi
  fi
done
echo "fuzz: ${#fuzzers[@]} fuzzers in $((SECONDS - start))s"
