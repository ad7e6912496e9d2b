#!/usr/bin/env python3
"""Registers buffers through libibverbs, one after the other (each kept), the way an application
does: private anonymous memory, ibv_reg_mr with local write. Whichever libibverbs.so.1 the loader
finds is used (rnic-run puts ours first). Prints one line per size, "SIZE ok" or "SIZE ERRNAME"
(ibv_reg_mr's errno); exit 0, or 1 when the device cannot be opened.
Usage: memlock_probe.py DEVICE SIZE [SIZE]..."""
import ctypes
import errno
import mmap
import sys

dev_name, sizes = sys.argv[1], [int(s) for s in sys.argv[2:]]
ibv = ctypes.CDLL("libibverbs.so.1", use_errno=True)
vp = ctypes.c_void_p
for fn, res, args in (("ibv_get_device_list", ctypes.POINTER(vp), [ctypes.POINTER(ctypes.c_int)]),
                      ("ibv_get_device_name", ctypes.c_char_p, [vp]),
                      ("ibv_open_device", vp, [vp]),
                      ("ibv_alloc_pd", vp, [vp]),
                      ("ibv_reg_mr", vp, [vp, vp, ctypes.c_size_t, ctypes.c_int])):
    getattr(ibv, fn).restype, getattr(ibv, fn).argtypes = res, args

n = ctypes.c_int()
devices = ibv.ibv_get_device_list(ctypes.byref(n))
dev = next((devices[i] for i in range(n.value) if ibv.ibv_get_device_name(devices[i]).decode() == dev_name), None)
ctx = ibv.ibv_open_device(dev) if dev else None
pd = ibv.ibv_alloc_pd(ctx) if ctx else None
if not pd:
    print(f"cannot open {dev_name}: {errno.errorcode.get(ctypes.get_errno(), '?')}", flush=True)
    sys.exit(1)
IBV_ACCESS_LOCAL_WRITE = 1
kept = []
for size in sizes:
    buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    ctypes.set_errno(0)
    mr = ibv.ibv_reg_mr(pd, addr, size, IBV_ACCESS_LOCAL_WRITE)
    print(f"{size} ok" if mr else f"{size} {errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())}", flush=True)
    kept.append(buf)
