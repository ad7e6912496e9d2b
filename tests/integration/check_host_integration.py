#!/usr/bin/env python3
"""Two rnicd on the test bed, driven through the client library (host_integration, Catch2).
Every run captures on both daemons, and every capture is checked frame by frame:
 run 1: RC/UD/atomics at MTU 1024 and 4096, RC over IPv6 GIDs (link-local and fd77::), RC with a
        GRH traffic class over IPv4 and IPv6; 2% loss each way (XDP on the receiving veth, the
        kernel here has no netem) under WRITE, SEND, READ and both atomics; a client killed
        mid-transfer; a client shrinking the file behind its own MR (rnicd lives on, the
        accesses complete in error). Both captures must pass rnic-pcap, hold IPv6 frames, show the loss (frames
        one side sent that the other never got), carry the traffic class exactly on the marked
        QPs' frames.
 run 2: malformed frames injected from a raw socket in namespace B, then the peer daemon B
        killed with SIGKILL under a batch of WRITEs and a READ. A's capture must fail rnic-pcap
        on exactly the injected broken frames and on nothing else; B's capture ends where the
        kill cut it and is checked up to its last whole record.
 run 3: a 1500-byte link (active MTU 1024): UD up to 1024 bytes, nothing larger, RC capped.
For every capture tshark must decode as InfiniBand exactly the frames rnic-pcap counts as
RoCEv2, with the same opcode, PSN and destination QP in each, and flag none in the RoCEv2
headers.
Usage: check_host_integration.py TESTBED RNICD HOST_INTEGRATION RNIC_PCAP"""
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

testbed, rnicd, binary, rnic_pcap = sys.argv[1:5]
name = f"rnicit{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.79.0")
failures = []


def fail(what):
    print("FAIL: " + what, flush=True)
    failures.append(what)


def run(args, timeout=300, check=True, extra_env=None):
    print("$ " + " ".join(args), flush=True)
    r = subprocess.run(args, env=dict(env, **(extra_env or {})), capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    out = (r.stdout + r.stderr).strip()
    if out:
        print("\n".join(out.splitlines()[-40:]), flush=True)
    if check and r.returncode != 0:
        fail(f"{' '.join(args)} -> {r.returncode}")
    return r


def catch(tags, in_ns_b=False):
    args = [binary, tags, "--durations", "yes"]
    if in_ns_b:
        args = [testbed, "exec", "b"] + args
    run(args)


def up(mtu=None):
    """A fresh bed with both daemons capturing; the facts file starts empty."""
    if os.path.exists(f"{state}/facts.jsonl"):
        os.remove(f"{state}/facts.jsonl")
    run([testbed, "up", "--daemons", "both", "--pcap", "--rnicd", rnicd], timeout=60,
        extra_env={"RNIC_TESTBED_MTU": str(mtu)} if mtu else None)


def down_and_keep(tag):
    """SIGTERM both daemons (captures flushed) and keep this run's captures and facts."""
    run([testbed, "down"], timeout=60)
    kept = {}
    for side in "ab":
        if os.path.exists(f"{state}/{side}.pcap"):
            os.replace(f"{state}/{side}.pcap", f"{state}/{tag}-{side}.pcap")
            kept[side] = f"{state}/{tag}-{side}.pcap"
    facts = []
    if os.path.exists(f"{state}/facts.jsonl"):
        with open(f"{state}/facts.jsonl") as f:
            facts = [json.loads(line) for line in f if line.strip()]
    return kept, facts


def whole_records(path):
    """A capture of a SIGKILLed daemon ends inside a record (its writer's buffer died with it).
    Writes the capture up to its last whole record beside it; returns (path, bytes cut)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return None, len(data)
    magic = data[:4]
    endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    pos = 24
    while pos + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[pos + 8:pos + 12])[0]
        if pos + 16 + incl > len(data):
            break
        pos += 16 + incl
    out = path.replace(".pcap", "-whole.pcap")
    with open(out, "wb") as f:
        f.write(data[:pos])
    return out, len(data) - pos


def rnic_pcap_json(pcap):
    r = subprocess.run([rnic_pcap, "--json", pcap], capture_output=True, text=True, timeout=300)
    if r.returncode == 2:
        fail(f"rnic-pcap could not read {pcap}: {r.stderr.strip()}")
        return r.returncode, None, r.stderr
    return r.returncode, json.loads(r.stdout)["files"][0], r.stderr


def tshark_frames(pcap):
    """frame number -> what tshark decoded, in one pass (~2.6 s for 185k frames here)."""
    fields = ["frame.number", "frame.protocols", "infiniband.bth.opcode", "infiniband.bth.psn",
              "infiniband.bth.destqp", "udp.srcport", "ip.dsfield", "ipv6.tclass", "_ws.malformed",
              "_ws.expert.message", "_ws.expert.severity"]
    args = ["tshark", "-r", pcap, "-T", "fields", "-E", "aggregator=|"]
    for f in fields:
        args += ["-e", f]
    t = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if t.returncode != 0:
        fail(f"tshark -r {pcap} exited {t.returncode}: {t.stderr.strip()[:200]}")

    def first(text, base=10):
        return int(text.split("|")[0], base) if text else None

    frames = {}
    for line in t.stdout.splitlines():
        v = (line.split("\t") + [""] * len(fields))[:len(fields)]
        frames[int(v[0])] = {
            "protocols": v[1],
            "opcode": first(v[2]),
            "psn": first(v[3]),
            "destqp": first(v[4], 16),
            "sport": first(v[5]),
            "tos": first(v[6], 16) if v[6] else first(v[7], 16),
            "malformed": bool(v[8]),
            "expert": set(v[9].split("|")) - {""},
            # PI_ERROR is 0x00800000; notes and warnings below it carry no verdict
            "error": any(int(x) >= 0x00800000 for x in v[10].split("|") if x),
        }
    return frames


def check_capture(label, pcap, expect_failed=None):
    """rnic-pcap and tshark on one capture. expect_failed: {frame: rnic-pcap error name} that
    must fail, and nothing else; without it every RoCEv2 frame must pass. Returns rnic-pcap's
    packets by frame number and tshark's frames."""
    expect_failed = expect_failed or {}
    with ThreadPoolExecutor(2) as pool:
        ours = pool.submit(rnic_pcap_json, pcap)
        theirs = pool.submit(tshark_frames, pcap)
        rc, doc, stderr = ours.result()
        tframes = theirs.result()
    if doc is None:
        return {}, tframes
    print(f"{label}: {doc['frames']} frames, {doc['rocev2']} RoCEv2, ICRC ok {doc['icrc_ok']}, "
          f"failed {[(f['frame'], f['error']) for f in doc['failed']]}", flush=True)
    failed = {f["frame"]: f["error"] for f in doc["failed"]}
    if failed != expect_failed:
        fail(f"{label}: rnic-pcap failed frames {failed}, expected exactly {expect_failed}")
    named = stderr.partition("failed: ")[2].strip()
    want = ", ".join(f"{n} ({e})" for n, e in sorted(expect_failed.items()))
    if rc != (1 if expect_failed else 0) or named != want:
        fail(f"{label}: rnic-pcap exit {rc} naming '{named}', expected exit {1 if expect_failed else 0} "
             f"naming '{want}'")
    if doc["rocev2"] == 0:
        fail(f"{label}: no RoCEv2 frames at all")
    packets = {p["frame"]: p for p in doc["packets"]}

    # tshark's verdict on the same file: InfiniBand on exactly the RoCEv2 frames, and the same
    # BTH in each. Every frame is compared (a 185k-frame capture takes ~3 s).
    ib = {n for n, f in tframes.items() if ":infiniband" in f["protocols"]}
    if len(tframes) != doc["frames"]:
        fail(f"{label}: tshark read {len(tframes)} frames, rnic-pcap {doc['frames']}")
    if ib != set(packets):
        only_t, only_r = sorted(ib - set(packets))[:10], sorted(set(packets) - ib)[:10]
        fail(f"{label}: tshark decodes {len(ib)} frames as InfiniBand, rnic-pcap counts {len(packets)} RoCEv2 "
             f"(only tshark: {only_t}, only rnic-pcap: {only_r})")
    disagree = []
    for n, p in packets.items():
        t = tframes.get(n)
        if t is None or "opcode" not in p:
            continue  # a frame rnic-pcap could not parse: judged above
        ours_bth = (p["opcode"], p["psn"], p["dest_qp"])
        if (t["opcode"], t["psn"], t["destqp"]) != ours_bth:
            disagree.append((n, ours_bth, (t["opcode"], t["psn"], t["destqp"])))
    print(f"tshark {label}: {len(ib)} InfiniBand frames, BTH (opcode, PSN, QP) compared on "
          f"{sum(1 for p in packets.values() if 'opcode' in p)}: {len(disagree)} disagree", flush=True)
    if disagree:
        fail(f"{label}: rnic-pcap and tshark disagree on {len(disagree)} frames, first (frame, ours, tshark): "
             f"{disagree[:5]}")

    # Marks inside the RoCEv2 headers. The payloads are random test data: Wireshark's guesses at
    # what rides on them (RPC-over-RDMA, an Ethertype, ...) throw on short ones, which says
    # nothing about RoCE. Over IPv6 one expert mark is expected on every frame: UDP checksum 0,
    # which RoCEv2 senders (rxe included) use and Wireshark calls illegal (docs/wire.md).
    bad, guesses, zero_checksum = [], 0, 0
    for n, t in tframes.items():
        if not (t["malformed"] or t["error"]) or n in expect_failed:
            continue  # sound, or broken on purpose and rnic-pcap said so
        if ":ipv6:" in t["protocols"] and not t["malformed"] and t["expert"] == {"Illegal checksum value (0)"}:
            zero_checksum += 1
        elif t["protocols"].partition(":infiniband")[2].strip(":"):
            guesses += 1
        else:
            bad.append(n)
    print(f"tshark {label}: {len(bad)} malformed frames in the RoCEv2 headers, {guesses} payload-guess errors "
          f"ignored, {zero_checksum} IPv6 frames with UDP checksum 0", flush=True)
    if bad:
        fail(f"tshark flags frames {bad[:10]} in {label}")
    return packets, tframes


def check_loss_was_real(a_packets, b_packets):
    """Each capture holds what its daemon sent and what it received. With loss, some frames one
    side sent never reached the other; without any, the rule lost nothing (as the old egress rule,
    which only delayed frames, did). And nothing else may go missing."""
    def sent_by(packets, src):
        out = {}
        for p in packets.values():
            if p.get("src") == src:
                k = (p["dst"], p["dest_qp"], p["opcode"], p["psn"])
                out[k] = out.get(k, 0) + 1
        return out
    for sender, mine, theirs in (("10.79.0.1", a_packets, b_packets), ("10.79.0.2", b_packets, a_packets)):
        sent, got = sent_by(mine, sender), sent_by(theirs, sender)
        lost = sum(sent.values()) - sum(got.values())
        extra = sum(max(0, n - sent.get(k, 0)) for k, n in got.items())
        print(f"loss: {sender} sent {sum(sent.values())} IPv4 RoCEv2 frames, the peer captured "
              f"{sum(got.values())}: {lost} lost, {extra} received that were never sent", flush=True)
        if lost <= 0 or extra:
            fail(f"loss from {sender}: {lost} frames lost, {extra} unexplained; the loss rule did not lose frames")


def check_traffic_class(label, packets, facts, foreign=()):
    """The marked QPs' frames carry the traffic class in the IPv4 TOS byte / IPv6 traffic class,
    the others DSCP 0; a QP's frames are ECT(0) unless the traffic class chose the ECN bits (DCQCN
    on by default, docs/congestion.md), the CM's MADs (QP 1) are not ECN-capable."""
    flows = {}
    for f in facts:
        if f["kind"] == "tos":
            for dst, qpn in f["flows"]:
                flows[(dst, qpn)] = f["tc"]
    seen = {k: 0 for k in flows}
    wrong = []
    for n, p in packets.items():
        if "opcode" not in p or n in foreign:  # frames the test forged itself
            continue
        tc = p["dscp"] << 2 | p["ecn"]
        key = (p["dst"], p["dest_qp"])
        if key in seen:
            seen[key] += 1
        want = flows.get(key, 0)
        if p["dest_qp"] != 1 and want & 3 == 0:
            want |= 2
        if tc != want:
            wrong.append((n, key, hex(tc), hex(want)))
    marked = {f"{d}/{q}": seen[(d, q)] for (d, q), tc in flows.items() if tc}
    print(f"{label}: traffic class checked on {len(packets)} frames, marked flows (frames) {marked}", flush=True)
    if wrong:
        fail(f"{label}: {len(wrong)} frames with the wrong traffic class, first (frame, flow, got, want): {wrong[:5]}")
    # Each recorded flow, marked or not, carried SENDs, WRITEs, a READ and an atomic: dozens of
    # frames each way.
    thin = [k for k, n in seen.items() if n < 16]
    if thin:
        fail(f"{label}: traffic-class flows with almost no frames: {thin}")


def check_tos_agrees_with_tshark(label, packets, tframes):
    differ = [n for n, p in packets.items()
              if "opcode" in p and tframes.get(n, {}).get("tos") != (p["dscp"] << 2 | p["ecn"])]
    if differ:
        fail(f"{label}: tshark's TOS/traffic class differs from rnic-pcap's on frames {differ[:10]}")


def check_ipv6(label, packets):
    v6 = [p for p in packets.values() if p.get("ip_version") == 6]
    by_prefix = {pre: sum(1 for p in v6 if p["src"].startswith(pre)) for pre in ("fd77:", "fe80:")}
    print(f"{label}: {len(v6)} RoCEv2 frames over IPv6 {by_prefix}", flush=True)
    if not all(by_prefix.values()):
        fail(f"{label}: IPv6 frames missing ({by_prefix})")


started = time.monotonic()
try:
    # ---- run 1 ----
    up()
    catch("[rc],[ud],[ipv6],[tos]")
    run([testbed, "loss", "2"])
    catch("[loss]")
    run([testbed, "loss", "0"])
    catch("[kill-client]")
    catch("[shrink]")
    pcaps, facts = down_and_keep("run1")
    got = {}
    for side in "ab":
        label = f"run 1 {side}.pcap"
        packets, tframes = check_capture(label, pcaps[side])
        got[side] = packets
        check_ipv6(label, packets)
        if not any(f["kind"] == "tos" and f["tc"] for f in facts):
            fail(f"{label}: [tos] recorded no marked flows")
        check_traffic_class(label, packets, facts)
        check_tos_agrees_with_tshark(label, packets, tframes)
    check_loss_was_real(got["a"], got["b"])

    # ---- run 2 ----
    up()
    catch("[inject]", in_ns_b=True)
    catch("[kill-peer]")
    pcaps, facts = down_and_keep("run2")
    injected = [f for f in facts if f["kind"] == "inject"]
    if len(injected) != 4:
        fail(f"[inject] recorded {len(injected)} injected frames, expected 4")
    # Which frames of A's capture are the injected ones: their UDP source ports, below the
    # 0xC000 rnicd always sends from, as tshark reads them (rnic-pcap names no port for a frame
    # it cannot parse).
    a_frames = tshark_frames(pcaps["a"])
    expect_failed, found = {}, {}
    for f in injected:
        frames = [n for n, t in a_frames.items() if t["sport"] == f["sport"]]
        found[f["what"]] = frames
        if len(frames) != 1:
            fail(f"injected frame '{f['what']}' (source port {f['sport']}) found {len(frames)} times in A's capture")
        elif f["expect"] == "bad_icrc":
            expect_failed[frames[0]] = "bad_icrc"
        elif f["expect"] == "truncated":
            expect_failed[frames[0]] = "truncated_ip"  # the IP total length runs past the frame
    print(f"run 2 a.pcap: injected frames at {found}", flush=True)
    packets, _ = check_capture("run 2 a.pcap", pcaps["a"], expect_failed)
    check_traffic_class("run 2 a.pcap", packets, [], foreign={n for frames in found.values() for n in frames})
    for f in injected:
        if f["expect"] == "ok" and len(found[f["what"]]) == 1:
            p = packets.get(found[f["what"]][0], {})
            if not p.get("icrc_ok"):
                fail(f"injected frame '{f['what']}' should verify (only the engine refuses it): {p}")
    if sum(1 for p in packets.values() if p.get("opcode_name", "").startswith("RC_RDMA_WRITE")) < 100:
        fail("run 2 a.pcap: the WRITEs [kill-peer] had in flight are missing")
    # B died by SIGKILL: its capture holds what its writer had flushed by then.
    if "b" in pcaps:
        whole, cut = whole_records(pcaps["b"])
        print(f"run 2 b.pcap: killed daemon's capture, {cut} bytes of a partial last record cut", flush=True)
        if whole:
            packets, _ = check_capture("run 2 b.pcap (up to the kill)", whole)
            check_traffic_class("run 2 b.pcap (up to the kill)", packets, [])
    else:
        fail("run 2: no capture from daemon B")

    # ---- run 3 ----
    up(mtu=1500)
    catch("[ud],[mtu1024]")
    pcaps, facts = down_and_keep("run3")
    for side in "ab":
        label = f"run 3 {side}.pcap"
        packets, _ = check_capture(label, pcaps[side])
        check_traffic_class(label, packets, [])
        ud = [p["payload_length"] for p in packets.values() if p.get("opcode_name") == "UD_SEND_ONLY"]
        rc = [p["payload_length"] for p in packets.values() if p.get("transport") == "RC"]
        print(f"{label}: UD payloads {sorted(set(ud))}, largest RC payload {max(rc, default=0)}", flush=True)
        if max(ud, default=0) != 1024 or max(rc, default=0) > 1024:
            fail(f"{label}: expected UD messages of exactly up to 1024 bytes and RC packets of at most 1024")
finally:
    subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)

print(f"runs and checks took {time.monotonic() - started:.0f} s", flush=True)
if failures:
    print(f"captures and daemon logs kept in {state}", flush=True)
else:
    shutil.rmtree(state, ignore_errors=True)  # ~400 MB of captures
print("FAILED: " + "; ".join(failures) if failures else "all integration checks passed")
sys.exit(1 if failures else 0)
