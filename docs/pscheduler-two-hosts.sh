#!/usr/bin/env bash
# A throughput test between two hosts, with the tool's methods called as
# pScheduler calls them (can-run and participant-data on each host, `run`
# on both at one scheduled start, merged-results of the two results):
# what `pscheduler task --tool linerate throughput` does, without
# pScheduler. Each host is a network namespace here (`linerate lab up`).
#
#   docs/pscheduler-two-hosts.sh SOURCE_NS DEST_NS SPEC_JSON
#   docs/pscheduler-two-hosts.sh lr-a lr-b '{"schema":1,"dest":"198.18.0.2","duration":"PT2S"}'
#
# Needs python3 (to put the JSON documents together) and `linerate` on
# PATH. Prints each method's input and answer; exits non-zero if any
# method fails or the merged result did not succeed.
set -euo pipefail
src_ns=$1 dst_ns=$2 spec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
on() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
py() { python3 -c "$1" "${@:2}"; }

test_json="{\"type\":\"throughput\",\"spec\":$spec}"
echo "test: $test_json"
for ns in "$src_ns" "$dst_ns"; do
    echo "== can-run ($ns)"
    echo "$test_json" | on "$ns" linerate pscheduler can-run | tee "$work/can-run"
    py 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["can-run"] else 1)' "$work/can-run"
done
for p in 0 1; do
    ns=$src_ns; [ "$p" = 1 ] && ns=$dst_ns
    echo "== participant-data, participant $p ($ns)"
    echo "{\"participant\":$p,\"test\":$test_json}" \
        | on "$ns" linerate pscheduler participant-data > "$work/pd$p"
    # The credentials are the task's secret: shown redacted.
    py 'import json,sys
d=json.load(open(sys.argv[1]))
if "_auth" in d: d["_auth"]={k:"(redacted)" for k in d["_auth"]}
print(json.dumps(d))' "$work/pd$p"
done
echo "== duration"
echo "$test_json" | on "$src_ns" linerate pscheduler duration
# The runner's input: one schedule (start 2 s from now), the test, every
# participant's data; each host gets it with its participant number.
py 'import json,sys,datetime
start=(datetime.datetime.now(datetime.timezone.utc)+datetime.timedelta(seconds=2)).replace(microsecond=0)
run={"schema":1,"schedule":{"start":start.isoformat(),"duration":"PT30S"},
     "test":json.loads(sys.argv[1]),"participant":0,
     "participant-data":[json.load(open(sys.argv[2])),json.load(open(sys.argv[3]))]}
for p in (0,1):
    run["participant"]=p
    json.dump(run,open(sys.argv[4]+str(p),"w"))' "$test_json" "$work/pd0" "$work/pd1" "$work/run"
echo "== run: participant 1 ($dst_ns, the server) and participant 0 ($src_ns, the client)"
on "$dst_ns" linerate pscheduler run < "$work/run1" > "$work/r1" &
server=$!
on "$src_ns" linerate pscheduler run < "$work/run0" > "$work/r0"
wait "$server"
for p in 0 1; do
    py 'import json,sys
r=json.load(open(sys.argv[1]))
print("participant", sys.argv[2], "succeeded:", r["succeeded"], "| error:", r.get("error"))' "$work/r$p" "$p"
done
echo "== merged-results"
py 'import json,sys
print(json.dumps({"test":json.loads(sys.argv[1]),"results":[json.load(open(sys.argv[2])),json.load(open(sys.argv[3]))]}))' \
    "$test_json" "$work/r0" "$work/r1" > "$work/merge"
on "$src_ns" linerate pscheduler merged-results < "$work/merge" > "$work/merged"
py 'import json,sys
m=json.load(open(sys.argv[1]))
s=m["summary"]["summary"]
print("succeeded:", m["succeeded"])
print("intervals:", len(m["intervals"]))
print("throughput-bits: %.0f  sent: %s B  retransmits: %s" % (s["throughput-bits"], s["throughput-bytes"], s.get("retransmits")))
sys.exit(0 if m["succeeded"] else 1)' "$work/merged"
