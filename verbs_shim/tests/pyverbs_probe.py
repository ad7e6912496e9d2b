#!/usr/bin/python3
"""Runs inside rnic-run under Debian's /usr/bin/python3 (python3-pyverbs), driven by
check_pyverbs.py. Prints one line per check and exits 1 if any failed.

  pyverbs_probe.py imports LIB_DIR
      Imports every extension module of Debian's pyverbs (Python's dlopen binds every symbol a
      module names, so a single symbol missing from our export tables fails the import), then
      requires that libibverbs.so.1, libmlx5.so.1 and libefa.so.1 in the process are ours.
  pyverbs_probe.py failures
      Calls entry points we do not implement through ctypes and checks the documented failure:
      mlx5dv_*/efadv_* and the IBVERBS_PRIVATE_34 provider interface (docs/verbs_shim.md,
      "The export tables"), and the old symbol versions through dlvsym.
  pyverbs_probe.py device NAME IPV4
      Opens the daemon's device through pyverbs: query_device and query_port against what
      ibv_devinfo -v says of it, the RoCE v2 GID, a PD, an MR and a CQ; the mlx5 and EFA
      contexts refuse it the way pyverbs reports a foreign device."""
import ctypes
import errno
import ipaddress
import os
import re
import subprocess
import sys

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def imports(lib_dir):
    import pyverbs
    root = os.path.dirname(pyverbs.__file__)
    modules = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            m = re.fullmatch(r"(\w+)\.cpython-.*\.so", f)
            if m:
                rel = os.path.relpath(os.path.join(dirpath, m.group(1)), os.path.dirname(root))
                modules.append(rel.replace(os.sep, "."))
    modules.sort()
    for want in ("pyverbs.providers.mlx5.mlx5dv", "pyverbs.providers.efa.efadv", "pyverbs.device"):
        check(want in modules, f"python3-pyverbs ships {want}")
    import importlib
    for name in modules:
        try:
            importlib.import_module(name)
            check(True, f"import {name}")
        except Exception as e:  # an ImportError naming the missing symbol and its version
            check(False, f"import {name}: {e}")
    with open("/proc/self/maps") as f:
        mapped = {line.split()[-1] for line in f if ".so" in line}
    for lib in ("libibverbs.so.1", "libmlx5.so.1", "libefa.so.1"):
        ours = os.path.join(os.path.realpath(lib_dir), lib)
        others = sorted(p for p in mapped if os.path.basename(p).startswith(lib.split(".so")[0] + ".so")
                        and os.path.realpath(p) != ours)
        check(ours in {os.path.realpath(p) for p in mapped} and not others,
              f"{lib} in the process is ours ({ours}), no other copy: {others or 'none'}")


def call(fn, restype, *args):
    """Calls fn with errno cleared; returns (result, errno)."""
    fn.restype = restype
    ctypes.set_errno(0)
    r = fn(*args)
    return r, ctypes.get_errno()


def versioned(lib, name, version):
    libc = ctypes.CDLL("libc.so.6")
    libc.dlvsym.restype = ctypes.c_void_p
    libc.dlvsym.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
    return libc.dlvsym(lib._handle, name.encode(), version.encode())


def failures_of_stubs():
    EOPNOTSUPP, ENOSYS, EINVAL = errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL
    vp, i32, u32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
    mlx5 = ctypes.CDLL("libmlx5.so.1", use_errno=True)
    efa = ctypes.CDLL("libefa.so.1", use_errno=True)
    ibv = ctypes.CDLL("libibverbs.so.1", use_errno=True)

    r = call(mlx5.mlx5dv_is_supported, ctypes.c_bool, None)[0]
    check(r is False, f"mlx5dv_is_supported -> {r} (false)")
    r, e = call(mlx5.mlx5dv_open_device, vp, None, None)
    check(r is None and e == EOPNOTSUPP, f"mlx5dv_open_device -> {r}, errno {e} (NULL, EOPNOTSUPP)")
    r, e = call(mlx5.mlx5dv_query_device, i32, None, None)
    check(r == EOPNOTSUPP and e == EOPNOTSUPP, f"mlx5dv_query_device -> {r} (EOPNOTSUPP)")
    qpn = ctypes.c_uint32(7)
    r, e = call(mlx5.mlx5dv_reserved_qpn_alloc, i32, None, ctypes.byref(qpn))
    check(r == EOPNOTSUPP and qpn.value == 7, f"mlx5dv_reserved_qpn_alloc -> {r}, qpn untouched (EOPNOTSUPP)")
    r, e = call(mlx5.mlx5dv_dr_action_create_drop, vp)
    check(r is None and e == EOPNOTSUPP, f"mlx5dv_dr_action_create_drop -> {r}, errno {e} (NULL, EOPNOTSUPP)")
    r, e = call(mlx5.mlx5dv_dump_dr_domain, i32, None, None)
    check(r == -EOPNOTSUPP, f"mlx5dv_dump_dr_domain -> {r} (-EOPNOTSUPP, its -errno convention)")
    r, e = call(mlx5.mlx5dv_devx_get_event, ctypes.c_ssize_t, None, None, ctypes.c_size_t(0))
    check(r == -1 and e == EOPNOTSUPP, f"mlx5dv_devx_get_event -> {r}, errno {e} (-1, EOPNOTSUPP)")
    old, new = versioned(mlx5, "mlx5dv_init_obj", "MLX5_1.0"), versioned(mlx5, "mlx5dv_init_obj", "MLX5_1.2")
    check(bool(old and new and old != new), "mlx5dv_init_obj at MLX5_1.0 and MLX5_1.2, two functions")
    for addr, ver in ((old, "MLX5_1.0"), (new, "MLX5_1.2")):
        if addr:
            r, e = call(ctypes.CFUNCTYPE(i32, vp, ctypes.c_uint64, use_errno=True)(addr), i32, None, 1)
            check(r == EOPNOTSUPP, f"mlx5dv_init_obj@{ver} -> {r} (EOPNOTSUPP)")

    r, e = call(efa.efadv_query_device, i32, None, None, u32(0))
    check(r == EOPNOTSUPP, f"efadv_query_device -> {r} (EOPNOTSUPP)")
    r, e = call(efa.efadv_create_qp_ex, vp, None, None, None, u32(0))
    check(r is None and e == EOPNOTSUPP, f"efadv_create_qp_ex -> {r}, errno {e} (NULL, EOPNOTSUPP)")

    r, e = call(ibv.ibv_cmd_alloc_pd, i32, None, None, None, ctypes.c_size_t(0), None, ctypes.c_size_t(0))
    check(r == EOPNOTSUPP, f"ibv_cmd_alloc_pd -> {r} (EOPNOTSUPP)")
    r, e = call(ibv.ibv_cmd_modify_qp, i32, None, None, i32(0), None, ctypes.c_size_t(0))
    check(r == EOPNOTSUPP, f"ibv_cmd_modify_qp -> {r} (EOPNOTSUPP)")
    r, e = call(ibv.ibv_cmd_poll_cq, i32, None, i32(1), None)
    check(r == -1 and e == EOPNOTSUPP, f"ibv_cmd_poll_cq -> {r}, errno {e} (-1, EOPNOTSUPP)")
    wr, bad = ctypes.create_string_buffer(128), vp(0)
    r, e = call(ibv.ibv_cmd_post_send, i32, None, wr, ctypes.byref(bad))
    check(r == EOPNOTSUPP and bad.value == ctypes.addressof(wr),
          f"ibv_cmd_post_send -> {r}, bad_wr the first request (EOPNOTSUPP)")
    r, e = call(ibv.execute_ioctl, i32, None, None)
    check(r == EOPNOTSUPP, f"execute_ioctl -> {r} (EOPNOTSUPP)")
    r, e = call(ibv._verbs_init_and_alloc_context, vp, None, i32(-1), ctypes.c_size_t(64), None, u32(0))
    check(r is None and e == EOPNOTSUPP, f"_verbs_init_and_alloc_context -> {r}, errno {e} (NULL, EOPNOTSUPP)")
    private = ctypes.create_string_buffer(16)
    r, e = call(ibv.verbs_open_device, vp, None, private)
    check(r is None and e == EOPNOTSUPP, f"verbs_open_device with provider data -> {r}, errno {e}")
    call(ibv.verbs_register_driver_34, None, None)
    check(True, "verbs_register_driver_34 accepts a registration")
    r, e = call(ibv.ibv_read_ibdev_sysfs_file, i32, ctypes.create_string_buffer(8), ctypes.c_size_t(8), None, b"x")
    check(r == -1 and e == EINVAL, f"ibv_read_ibdev_sysfs_file without a device -> {r}, errno {e} (-1, EINVAL)")
    flag = ctypes.c_bool.in_dll(ibv, "verbs_allow_disassociate_destroy")
    check(flag.value is False, "verbs_allow_disassociate_destroy is false")
    # Two linked command buffers holding 2 and 3 attributes (rdma-core's layout: 3 pointers, 5
    # bytes, the 24-byte ioctl header at 32, 16-byte attributes after it).
    bufs = [ctypes.create_string_buffer(56 + 16 * 4) for _ in range(2)]
    for b, nxt, n in ((bufs[0], bufs[1], 2), (bufs[1], None, 3)):
        base = ctypes.addressof(b)
        ctypes.memmove(base, ctypes.byref(vp(ctypes.addressof(nxt) if nxt else 0)), 8)
        ctypes.memmove(base + 8, ctypes.byref(vp(base + 56 + 16 * n)), 8)
    r, _ = call(ibv.__ioctl_final_num_attrs, u32, u32(4), bufs[0])
    check(r == 9, f"__ioctl_final_num_attrs(4, two links of 2 and 3) -> {r} (9)")

    old = versioned(ibv, "ibv_get_device_list", "IBVERBS_1.0")
    new = versioned(ibv, "ibv_get_device_list", "IBVERBS_1.1")
    check(bool(old and new and old != new), "ibv_get_device_list at IBVERBS_1.0 and IBVERBS_1.1, two functions")
    if old:
        n = ctypes.c_int(-5)
        r, e = call(ctypes.CFUNCTYPE(vp, ctypes.POINTER(ctypes.c_int), use_errno=True)(old), vp, ctypes.byref(n))
        check(r is None and e == ENOSYS, f"ibv_get_device_list@IBVERBS_1.0 -> {r}, errno {e} (NULL, ENOSYS)")
    reg = versioned(ibv, "ibv_register_driver", "IBVERBS_1.1")
    check(bool(reg), "ibv_register_driver@IBVERBS_1.1 exists")
    if reg:
        ctypes.CFUNCTYPE(None, ctypes.c_char_p, vp)(reg)(b"old-provider", None)
        check(True, "ibv_register_driver@IBVERBS_1.1 accepts a registration")


def devinfo(name):
    out = subprocess.run(["ibv_devinfo", "-v", "-d", name], capture_output=True, text=True, timeout=30)
    check(out.returncode == 0, f"ibv_devinfo -v -d {name} exits 0")
    fields = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s*([\w ]+?):\s+(.*\S)", line)
        if m and m.group(1) not in fields:
            fields[m.group(1)] = m.group(2)
    return fields


def device(name, ip):
    import pyverbs.enums as e
    from pyverbs.cq import CQ
    from pyverbs.device import Context, get_device_list
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.providers.efa.efadv import EfaContext
    from pyverbs.providers.mlx5.mlx5dv import Mlx5Context, Mlx5DVContextAttr
    from pyverbs.pyverbs_error import PyverbsRDMAError, PyverbsUserError

    names = [d.name.decode() for d in get_device_list()]
    check(name in names, f"get_device_list names {name}: {names}")
    info = devinfo(name)
    with Context(name=name) as ctx:
        attr = ctx.query_device()
        check(attr.fw_version == info.get("fw_ver"), f"fw_version {attr.fw_version!r} = ibv_devinfo's")
        # pyverbs gives the __be64 as the host reads it; ibv_devinfo prints it in network order.
        hexguid = f"{int.from_bytes(attr.node_guid.to_bytes(8, 'little'), 'big'):016x}"
        guid = ":".join(hexguid[i:i + 4] for i in range(0, 16, 4))
        check(guid == info.get("node_guid"), f"node_guid {guid} = ibv_devinfo's {info.get('node_guid')}")
        for field in ("max_qp", "max_cq", "max_cqe", "max_mr", "max_pd", "max_qp_wr", "max_sge"):
            check(str(getattr(attr, field)) == info.get(field),
                  f"{field} {getattr(attr, field)} = ibv_devinfo's {info.get(field)}")
        check(attr.phys_port_cnt == 1, f"phys_port_cnt {attr.phys_port_cnt} (1)")
        port = ctx.query_port(1)
        check(port.state == e.IBV_PORT_ACTIVE, f"port 1 state {port.state} (ACTIVE)")
        check(port.link_layer == e.IBV_LINK_LAYER_ETHERNET, f"port 1 link_layer {port.link_layer} (Ethernet)")
        mtu = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}.get(port.active_mtu)
        check(f"{mtu} ({port.active_mtu})" == info.get("active_mtu"),
              f"active_mtu {mtu} = ibv_devinfo's {info.get('active_mtu')}")
        check(port.gid_tbl_len >= 2, f"gid_tbl_len {port.gid_tbl_len} (>= 2)")
        gid = ipaddress.IPv6Address(str(ctx.query_gid(1, 0)))
        check(gid.ipv4_mapped == ipaddress.IPv4Address(ip), f"GID[0] {gid} is ::ffff:{ip}")
        with PD(ctx) as pd:
            with MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE) as mr:
                check(mr.length == 8192 and mr.lkey != 0, f"MR of 8192 bytes, lkey {mr.lkey:#x}")
            with CQ(ctx, 16) as cq:
                check(cq.cqe >= 16, f"CQ of {cq.cqe} entries")
    try:
        Mlx5Context(Mlx5DVContextAttr(), name=name)
        check(False, "Mlx5Context refuses the device")
    except PyverbsUserError as err:
        check("not an MLX5 device" in str(err), f"Mlx5Context refuses the device: {err}")
    with EfaContext(name=name) as efa:
        try:
            efa.query_efa_device()
            check(False, "EfaContext.query_efa_device fails")
        except PyverbsRDMAError as err:
            check(err.error_code == errno.EOPNOTSUPP, f"EfaContext.query_efa_device fails: {err}")


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "imports" and len(sys.argv) == 3:
        imports(sys.argv[2])
    elif mode == "failures" and len(sys.argv) == 2:
        failures_of_stubs()
    elif mode == "device" and len(sys.argv) == 4:
        device(sys.argv[2], sys.argv[3])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(f"{mode}: {len(failures)} failures", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
