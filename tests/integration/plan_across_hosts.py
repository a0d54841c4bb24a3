#!/usr/bin/env python3
"""Checks `ppstage plan --json` run over 2 hosts of 2 ranks with the link between them slowed
(multi_host.sh): it planned for 2 hosts, probed one pair inside each host and one between
them, measured the link between hosts slower than the one inside and no faster than
MAX_BYTES_PER_S, and chose a layout whose all-reduces stay inside the hosts and whose
pipeline is cut between them. Prints what it found in one line; exits 1 where any fails.

usage: plan_across_hosts.py PLAN.json MAX_BYTES_PER_S
"""
import json
import sys

plan = json.load(open(sys.argv[1]))
most = float(sys.argv[2])
links, chosen = plan["link_costs"], plan["chosen"]
pairs = [tuple(p["hosts"]) for p in links["probed"]]
between, inside = links["host_message"], links["message"]
problems = []
if plan["hosts"] != 2:
    problems.append(f"planned for {plan['hosts']} hosts")
if pairs != [("h0", "h0"), ("h1", "h1"), ("h0", "h1")]:
    problems.append(f"probed {pairs}")
if not between or between["bytes_per_s"] > most or between["bytes_per_s"] >= inside["bytes_per_s"]:
    problems.append(f"the link between hosts measured {between}, inside {inside}")
across = chosen["across_hosts"]
if across["data_parallel"] or not across["boundaries"]:
    problems.append(f"chose dp {chosen['dp']} x pp {chosen['pp']} {chosen['rank_order']}, "
                    f"across hosts {across}")
if problems:
    print("; ".join(problems))
    sys.exit(1)
print(f"chose dp {chosen['dp']} x pp {chosen['pp']} {chosen['rank_order']}, across hosts: "
      f"stage boundaries {across['boundaries']}; probed between hosts "
      f"{between['bytes_per_s'] / 1e6:.1f} MB/s, inside {inside['bytes_per_s'] / 1e9:.2f} GB/s")
