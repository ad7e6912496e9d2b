#!/usr/bin/env python3
"""The sysfs view rnic-run gives programs (rnic-sysfs): two rnicd side by side in one run
directory (rnic0 in namespace A, rnic1 in B), programs run in namespace A.
 1. Every file of /sys/class/infiniband/<dev>/... agrees with Debian's ibv_devinfo -v through
    rnic-run (GUIDs, firmware, board id, port state, physical state, LIDs, LMC, capability mask,
    link layer, GID table with types, P_Key table), for both devices.
 2. infiniband_verbs/uverbsN/{ibdev,dev,abi_version}, the class abi_version files, and
    /dev/infiniband/uverbsN character devices with the numbers of uverbsN/dev.
 3. device/net/<iface> and gid_attrs/ndevs name the interface whose MAC is in the link-local GID
    (rnic0's veth, present in A); rnic1's interface is not in A: no ndevs, no device/net entry.
 4. The other classes stay visible (/sys/class/net lists the namespace's interfaces), nothing
    leaks out of the private namespace, and --no-sysfs / RNIC_RUN_SYSFS=0 run without the tree;
    as an unprivileged user (uid 65534, through a user namespace) the tree is there too.
 5. Debian's ibstat (libibumad reads only sysfs) and pyverbs (through our libibverbs) show the
    same device as the tree.
 6. rnic-sysfs write DIR writes the same files.
Usage: check_sysfs.py TESTBED RNICD RNIC_RUN RNIC_SYSFS
Exit 0 pass, 1 failure."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

testbed, rnicd, rnic_run, rnic_sysfs = sys.argv[1:5]
name = f"hss{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.71.3",
           RNIC_TESTBED_NET6="fd71:3::")
env.pop("LD_PRELOAD", None)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def in_a(args, run_dir, timeout=60, extra_env=None, via_rnic_run=True):
    cmd = [testbed, "exec", "a"]
    if extra_env:
        cmd += ["env"] + [f"{k}={v}" for k, v in extra_env.items()]
    if via_rnic_run:
        cmd += [rnic_run, "--run-dir", run_dir]
    r = subprocess.run(cmd + args, env=env, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    return r


# Prints every file of the tree as PATH<TAB>CONTENT, every symlink as PATH<TAB>-> TARGET.
DUMP = r"""
for f in $(find /sys/class/infiniband/ /sys/class/infiniband_verbs/ /sys/class/infiniband_mad/ \( -type f -o -type l \) | sort); do
  if [ -L "$f" ]; then printf '%s\t-> %s\n' "$f" "$(readlink "$f")"; else printf '%s\t%s\n' "$f" "$(cat "$f")"; fi
done
for n in /dev/infiniband/*; do stat -c '%n	%F %t:%T %a' "$n"; done
printf 'NET\t%s\n' "$(ls /sys/class/net | tr '\n' ' ')"
"""


def parse_devinfo(text):
    """ibv_devinfo -v: {dev: {field: value, 'port': {...}, 'gids': {i: (gid, type)}}}"""
    devs, cur, port = {}, None, None
    for line in text.splitlines():
        m = re.match(r"hca_id:\s*(\S+)", line)
        if m:
            cur = devs.setdefault(m.group(1), {"gids": {}})
            port = None
            continue
        if cur is None:
            continue
        m = re.match(r"\s+port:\s*(\d+)", line)
        if m:
            port = cur.setdefault("port", {})
            continue
        m = re.match(r"\s+GID\[\s*(\d+)\]:\s*(\S+), (.+)$", line)
        if m:
            cur["gids"][int(m.group(1))] = (m.group(2), m.group(3).strip())
            continue
        m = re.match(r"\s+(\w+):\s+(.*)$", line)
        if m:
            (port if port is not None else cur)[m.group(1)] = m.group(2).strip()
    return devs


def gid_to_sysfs(text):
    """ibv_devinfo's GID (inet_ntop form) in sysfs's eight groups of four hex digits."""
    import ipaddress
    packed = ipaddress.IPv6Address(text).packed
    return ":".join(packed[i:i + 2].hex() for i in range(0, 16, 2))


def check_device(dev, tree, info, netdev):
    root = f"/sys/class/infiniband/{dev}"
    f = lambda rel: tree.get(f"{root}/{rel}")  # noqa: E731
    check(f("node_type") == "1: CA", f"{dev}: node_type 1: CA")
    check(f("node_guid") == info["node_guid"], f"{dev}: node_guid {f('node_guid')} = ibv_devinfo {info['node_guid']}")
    check(f("sys_image_guid") == info["sys_image_guid"], f"{dev}: sys_image_guid = ibv_devinfo")
    check(f("fw_ver") == info["fw_ver"], f"{dev}: fw_ver {f('fw_ver')!r} = ibv_devinfo {info['fw_ver']!r}")
    check(f("board_id") == info["board_id"], f"{dev}: board_id = ibv_devinfo")
    check(f("hw_rev") is not None and int(f("hw_rev"), 16) == int(info["hw_ver"], 16), f"{dev}: hw_rev = hw_ver")
    for file in ("hca_type", "node_desc"):
        check(bool(f(file)), f"{dev}: {file} present ({f(file)!r})")
    p = info["port"]
    state_num = re.search(r"\((\d+)\)", p["state"]).group(1)
    check(f("ports/1/state") == f"{state_num}: {p['state'].split()[0].replace('PORT_', '')}",
          f"{dev}: ports/1/state {f('ports/1/state')!r} ~ {p['state']!r}")
    phys_num = re.search(r"\((\d+)\)", p["phys_state"]).group(1)
    check((f("ports/1/phys_state") or "").startswith(f"{phys_num}: "),
          f"{dev}: ports/1/phys_state {f('ports/1/phys_state')!r} ~ {p['phys_state']!r}")
    check(int(f("ports/1/lid"), 16) == int(p["port_lid"]), f"{dev}: lid = port_lid")
    check(int(f("ports/1/sm_lid"), 16) == int(p["sm_lid"]), f"{dev}: sm_lid")
    check(int(f("ports/1/lid_mask_count")) == int(p["port_lmc"], 16), f"{dev}: lid_mask_count = port_lmc")
    check(int(f("ports/1/sm_sl")) == int(p["sm_sl"]), f"{dev}: sm_sl")
    check(int(f("ports/1/cap_mask"), 16) == int(p["port_cap_flags"], 16), f"{dev}: cap_mask = port_cap_flags")
    check(f("ports/1/link_layer") == p["link_layer"], f"{dev}: link_layer {p['link_layer']}")
    lanes = re.match(r"(\d+)X", p["active_width"]).group(1)
    check(re.match(rf"[\d.]+ Gb/sec \({lanes}X \w+\)$", f("ports/1/rate") or "") is not None,
          f"{dev}: rate {f('ports/1/rate')!r} with {lanes}X lanes")
    gid_len = int(p["gid_tbl_len"])
    gids = sorted(int(k.rsplit("/", 1)[1]) for k in tree if k.startswith(f"{root}/ports/1/gids/"))
    check(gids == list(range(gid_len)), f"{dev}: gids/0..{gid_len - 1} (gid_tbl_len {gid_len})")
    for i, (gid, gtype) in info["gids"].items():
        check(f(f"ports/1/gids/{i}") == gid_to_sysfs(gid), f"{dev}: gids/{i} {f(f'ports/1/gids/{i}')} = {gid}")
        check(f(f"ports/1/gid_attrs/types/{i}") == gtype, f"{dev}: gid_attrs/types/{i} = {gtype}")
        check(f(f"ports/1/gid_attrs/ndevs/{i}") == netdev, f"{dev}: gid_attrs/ndevs/{i} = {netdev}")
    check(len(info["gids"]) > 0, f"{dev}: ibv_devinfo lists GIDs")
    pkeys = sorted(k for k in tree if k.startswith(f"{root}/ports/1/pkeys/"))
    check(len(pkeys) == int(p["pkey_tbl_len"]) and f("ports/1/pkeys/0") == "0xffff",
          f"{dev}: pkeys/ has pkey_tbl_len entries, pkeys/0 0xffff")
    net_links = [k for k in tree if k.startswith(f"{root}/device/net/")]
    if netdev:
        check(net_links == [f"{root}/device/net/{netdev}"] and tree[net_links[0]] == f"-> /sys/class/net/{netdev}",
              f"{dev}: device/net/{netdev} -> /sys/class/net/{netdev}")
    else:
        check(net_links == [], f"{dev}: no device/net entry (its interface is in another namespace)")


def main():
    try:
        up = subprocess.run([testbed, "up", "--daemons", "both", "--one-run-dir", "--rnicd", rnicd], env=env,
                            capture_output=True, text=True, timeout=60)
        if up.returncode != 0:
            failures.append(f"testbed up -> {up.returncode}: {(up.stdout + up.stderr).strip()[-500:]}")
            return
        with open(f"{state}/env") as fh:
            bed = dict(kv.split("=", 1) for kv in fh.read().split())
        run_dir = bed["run_dir"]

        r = in_a(["sh", "-c", DUMP], run_dir)
        print(r.stderr.strip())
        tree = {}
        for line in r.stdout.splitlines():
            if "\t" in line:
                k, v = line.split("\t", 1)
                tree[k] = v
        check(r.returncode == 0 and "/sys/class/infiniband/rnic0/node_guid" in tree,
              f"rnic-run shows the tree ({len(tree)} entries, rc {r.returncode})")
        print(f"({len(tree)} files; rnic0's: " +
              ", ".join(f"{k.split('rnic0/', 1)[1]}={v}" for k, v in sorted(tree.items())
                        if k.startswith("/sys/class/infiniband/rnic0/") and "/gid" not in k) + ")")

        dv = in_a(["ibv_devinfo", "-v"], run_dir)
        info = parse_devinfo(dv.stdout)
        check(dv.returncode == 0 and sorted(info) == ["rnic0", "rnic1"], f"ibv_devinfo -v lists rnic0 and rnic1 ({sorted(info)})")
        if sorted(info) != ["rnic0", "rnic1"]:
            return
        check_device("rnic0", tree, info["rnic0"], bed["if_a"])
        check_device("rnic1", tree, info["rnic1"], None)

        # The verbs class and the character devices.
        check(tree.get("/sys/class/infiniband_verbs/abi_version") == "6", "infiniband_verbs/abi_version 6")
        check(tree.get("/sys/class/infiniband_mad/abi_version") == "5", "infiniband_mad/abi_version 5")
        for n, dev in enumerate(["rnic0", "rnic1"]):
            uv = f"/sys/class/infiniband_verbs/uverbs{n}"
            check(tree.get(f"{uv}/ibdev") == dev, f"uverbs{n}/ibdev = {dev}")
            check(tree.get(f"{uv}/dev") == f"231:{192 + n}", f"uverbs{n}/dev 231:{192 + n}")
            node = tree.get(f"/dev/infiniband/uverbs{n}", "")
            # stat prints the numbers in hex: 231 = e7, 192 = c0.
            check(node.startswith("character special file") and f"e7:{192 + n:x}" in node and node.endswith("666"),
                  f"/dev/infiniband/uverbs{n} is a character device 231:{192 + n}, mode 666 ({node!r})")
        net = tree.get("NET", "").split()
        check(bed["if_a"] in net and "lo" in net, f"/sys/class/net of namespace A still visible ({net})")

        # Nothing leaks out; the opt-outs.
        check(not os.path.exists("/sys/class/infiniband/rnic0") and not os.path.exists("/dev/infiniband/uverbs0"),
              "the host's /sys/class and /dev are untouched")
        probe = ["sh", "-c", "ls /sys/class/infiniband 2>&1; ls /dev/infiniband 2>&1; exit 0"]
        for how, args, extra in (("--no-sysfs", ["--no-sysfs"] + probe, None), ("RNIC_RUN_SYSFS=0", probe, {"RNIC_RUN_SYSFS": "0"})):
            r = in_a(args, run_dir, extra_env=extra)
            check("rnic0" not in r.stdout and "uverbs0" not in r.stdout, f"{how}: no tree ({r.stdout.strip()!r})")

        # Not root: a user namespace maps the caller's ids, /dev/null stands in for the node. Only
        # where the unprivileged user can reach the build and the run directory (a checkout under
        # /root cannot be).
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        lib_dir = os.path.join(os.path.dirname(rnic_run), "lib", "libibverbs.so.1")
        reach = subprocess.run(nobody + ["sh", "-c", f"test -x '{rnic_run}' && test -r '{lib_dir}' && test -x '{rnic_sysfs}' "
                                         f"&& test -r '{run_dir}'"], capture_output=True, timeout=30)
        if shutil.which("setpriv") and reach.returncode == 0:
            r = in_a(nobody + [rnic_run, "--run-dir", run_dir, "sh", "-c",
                               "id -u; cat /sys/class/infiniband/rnic0/node_guid; stat -c '%F %t:%T' /dev/infiniband/uverbs0; "
                               "ls /sys/class/net"], run_dir, via_rnic_run=False)
            lines = r.stdout.split("\n")
            check(r.returncode == 0 and lines[0] == "65534" and lines[1] == info["rnic0"]["node_guid"]
                  and lines[2] == "character special file 1:3" and bed["if_a"] in r.stdout,
                  f"as uid 65534: the tree, /dev/null as uverbs0, /sys/class/net ({r.stdout.split()} {r.stderr.strip()[-200:]})")
        else:
            print("(uid 65534 cannot reach the build or the run directory: the unprivileged check is not run)")

        # ibstat: libibumad reads /sys/class/infiniband only.
        r = in_a(["ibstat", "rnic0"], run_dir)
        print(r.stdout.strip())
        guid = "0x" + info["rnic0"]["node_guid"].replace(":", "")
        for want in ("CA 'rnic0'", f"Firmware version: {info['rnic0']['fw_ver']}", f"Node GUID: {guid}",
                     "State: Active", "Physical state: LinkUp", "Link layer: Ethernet"):
            check(want in r.stdout, f"ibstat rnic0 shows {want!r}")
        r = in_a(["ibstat", "-l"], run_dir)
        check(r.stdout.split() == ["rnic0", "rnic1"], f"ibstat -l lists rnic0 rnic1 ({r.stdout.split()})")

        # pyverbs, through our libibverbs, against the tree read from the same process.
        py = ("import pyverbs.device as d\n"
              "from pyverbs.device import Context\n"
              "for dev in d.get_device_list():\n"
              "    n = dev.name.decode()\n"
              "    c = Context(name=n)\n"
              "    a = c.query_device(); p = c.query_port(1)\n"
              "    g = c.query_gid(1, 0).gid\n"
              "    s = open('/sys/class/infiniband/%s/ports/1/gids/0' % n).read().strip()\n"
              "    t = open('/sys/class/infiniband/%s/ports/1/state' % n).read().strip()\n"
              "    print(n, g, s, p.state, t, a.fw_version, open('/sys/class/infiniband/%s/fw_ver' % n).read().strip(), sep='\\t')\n")
        if subprocess.run(["/usr/bin/python3", "-c", "import pyverbs"], capture_output=True).returncode == 0:
            r = in_a(["/usr/bin/python3", "-c", py], run_dir)
            print(r.stdout.strip(), r.stderr.strip()[-300:])
            lines = r.stdout.split("\n")
            check(r.returncode == 0 and len([ln for ln in lines if ln.strip()]) == 2, "pyverbs lists and opens both devices")
            for ln in lines:
                if not ln.strip():
                    continue
                n, g, s, pstate, t, fw1, fw2 = ln.split("\t")
                # pyverbs prints a GID in sysfs's form already.
                check(g == s and t.startswith(f"{pstate}:") and fw1 == fw2,
                      f"pyverbs {n}: GID[0], port state and fw_ver = the tree")
        else:
            print("(python3-pyverbs not installed: pyverbs check not run)")

        # rnic-sysfs write DIR.
        out = tempfile.mkdtemp(prefix="rnic-sysfs-")
        try:
            r = in_a([rnic_sysfs, "write", out], run_dir, extra_env={"RNIC_RUN_DIR": run_dir}, via_rnic_run=False)
            check(r.returncode == 0, f"rnic-sysfs write -> {r.returncode} {r.stdout.strip()} {r.stderr.strip()}")
            same = all(open(os.path.join(out, k[len("/sys/class/"):])).read().strip() == v
                       for k, v in tree.items() if k.startswith("/sys/class/infiniband/") and not v.startswith("->"))
            check(same, "rnic-sysfs write DIR writes the files the namespace view shows")
        finally:
            shutil.rmtree(out, ignore_errors=True)
    finally:
        subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)


if __name__ == "__main__":
    main()
    print("FAILED: " + "; ".join(failures) if failures else "all sysfs checks passed")
    sys.exit(1 if failures else 0)
