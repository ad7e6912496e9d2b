#!/usr/bin/env python3
"""Two rnicd on the test bed, driven through the client library (host_integration, Catch2):
 run 1, capturing: RC/UD/atomics at MTU 1024 and 4096, RC over IPv6 GIDs (link-local and
        fd77::); 2% loss each way (XDP on the receiving veth, the kernel here has no
        netem); a client killed mid-transfer. Then SIGTERM (captures
        flushed) and both captures must pass rnic-pcap (IPv6 frames among them) and decode in
        tshark without malformed marks.
 run 2, no capture (it would rightly fail rnic-pcap): malformed frames injected from a raw
        socket in namespace B; then the peer daemon killed with SIGKILL.
Usage: check_host_integration.py TESTBED RNICD HOST_INTEGRATION RNIC_PCAP"""
import json
import os
import subprocess
import sys

testbed, rnicd, binary, rnic_pcap = sys.argv[1:5]
name = f"rnicit{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.79.0")
failures = []


def run(args, timeout=300, check=True):
    print("$ " + " ".join(args), flush=True)
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    out = (r.stdout + r.stderr).strip()
    if out:
        print("\n".join(out.splitlines()[-40:]), flush=True)
    if check and r.returncode != 0:
        failures.append(f"{' '.join(args)} -> {r.returncode}")
    return r


def catch(tags, in_ns_b=False):
    args = [binary, tags, "--durations", "yes"]
    if in_ns_b:
        args = [testbed, "exec", "b"] + args
    run(args)


try:
    run([testbed, "up", "--daemons", "both", "--pcap", "--rnicd", rnicd], timeout=60)
    catch("[rc],[ud],[ipv6]")
    run([testbed, "loss", "2"])
    catch("[loss]")
    run([testbed, "loss", "0"])
    catch("[kill-client]")
    run([testbed, "down"], timeout=60)
    for side in "ab":
        pcap = f"{state}/{side}.pcap"
        r = run([rnic_pcap, "--quiet", pcap])
        if "RoCEv2" not in r.stdout + r.stderr and r.returncode == 0:
            failures.append(f"{pcap}: no summary")
        # The IPv6 QPs' frames are in there, from both GIDs, every ICRC verified.
        j = json.loads(subprocess.run([rnic_pcap, "--json", pcap], capture_output=True, text=True, timeout=300).stdout)
        v6 = [p for f in j["files"] for p in f["packets"] if p["ip_version"] == 6]
        by_prefix = {pre: sum(1 for p in v6 if p["src"].startswith(pre)) for pre in ("fd77:", "fe80:")}
        bad6 = sum(1 for p in v6 if not p["icrc_ok"])
        print(f"{pcap}: {len(v6)} RoCEv2 frames over IPv6 {by_prefix}, {bad6} with a bad ICRC", flush=True)
        if not all(by_prefix.values()) or bad6:
            failures.append(f"{pcap}: IPv6 frames missing or broken ({by_prefix}, {bad6} bad)")
        # The payloads are random test data: Wireshark's guesses at what protocol rides on them
        # (RPC-over-RDMA, an Ethertype, ...) throw on short ones, which says nothing about RoCE.
        # A mark counts only when the dissection ended inside the RoCEv2 headers themselves.
        # Over IPv6 one expert mark is expected on every frame: UDP checksum 0, which RoCEv2
        # senders (rxe included) use and Wireshark calls illegal for IPv6 (docs/wire.md).
        t = subprocess.run(["tshark", "-r", pcap, "-Y", "_ws.malformed || _ws.expert.severity >= error",
                            "-T", "fields", "-E", "aggregator=|", "-e", "frame.number", "-e", "frame.protocols",
                            "-e", "_ws.malformed", "-e", "_ws.expert.message"],
                           capture_output=True, text=True, timeout=300)
        bad, guesses, zero_checksum = [], 0, 0
        for line in t.stdout.splitlines():
            number, protocols, malformed, messages = (line.split("\t") + ["", "", ""])[:4]
            if (":ipv6:" in protocols and not malformed and
                    set(messages.split("|")) == {"Illegal checksum value (0)"}):
                zero_checksum += 1
                continue
            above_roce = protocols.partition(":infiniband")[2].strip(":")
            if above_roce:
                guesses += 1
            else:
                bad.append(number)
        print(f"tshark {pcap}: {len(bad)} malformed/error frames in the RoCEv2 headers, "
              f"{guesses} payload-guess errors ignored, {zero_checksum} IPv6 frames with UDP checksum 0",
              flush=True)
        if t.returncode != 0 or bad:
            failures.append(f"tshark flags frames {bad[:10]} in {pcap} (exit {t.returncode})")

    run([testbed, "up", "--daemons", "both", "--rnicd", rnicd], timeout=60)
    catch("[inject]", in_ns_b=True)
    catch("[kill-peer]")
finally:
    subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)

print("FAILED: " + "; ".join(failures) if failures else "all integration checks passed")
sys.exit(1 if failures else 0)
