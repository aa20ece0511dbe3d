# SPDX-License-Identifier: Apache-2.0
"""fake_isolad: a stand-in for a hostile or impersonated isolad on a unix socket, serving
crafted tar archives to `isola cp` and the SDKs' download_dir (tests/integration/test_cp_hostile.py).
It speaks only the daemon's wire (fs/stat and archive); it is a test double of the threat,
not of isola's own code."""
import io
import json
import os
import socketserver
import tarfile
import threading
from http.server import BaseHTTPRequestHandler


def tar_bytes(members):
    """members: list of (TarInfo, data bytes or None). Data is written even for entry types
    tarfile would not give data (a hard link "carrying data"), padded to 512 bytes."""
    out = io.BytesIO()
    for ti, data in members:
        if data is not None:
            ti.size = len(data)
        if data and not ti.isreg():
            # A pax extended header makes readers (libarchive) honour a link's data.
            ti.pax_headers = {"comment": "hostile"}
        hdr = bytearray(ti.tobuf(format=tarfile.PAX_FORMAT))
        if data and not ti.isreg():
            # tarfile writes size 0 for links: set it and the checksum of the entry's own
            # header (the last block) by hand.
            h = len(hdr) - 512
            hdr[h + 124:h + 136] = b"%011o\0" % len(data)
            hdr[h + 148:h + 156] = b" " * 8
            hdr[h + 148:h + 156] = b"%06o\0 " % sum(hdr[h:h + 512])
        out.write(bytes(hdr))
        if data:
            out.write(data)
            out.write(b"\0" * (-len(data) % 512))
    out.write(b"\0" * 1024)
    return out.getvalue()


def entry(name, kind="file", data=None, mode=0o644, link=None, devmajor=0, devminor=0):
    ti = tarfile.TarInfo(name)
    ti.mode = mode
    ti.mtime = 1700000000
    ti.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
               "hardlink": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE,
               "fifo": tarfile.FIFOTYPE}[kind]
    if link is not None:
        ti.linkname = link
    ti.devmajor, ti.devminor = devmajor, devminor
    return ti, data


class FakeIsolad:
    """Serves `body` (bytes) as the archive of any path; stat says the path is a directory.
    cut_after: send only that many bytes of the body in chunked encoding, then close the
    connection without the terminating chunk (a daemon breaking the stream off)."""

    def __init__(self, sock_path, body=b"", cut_after=None):
        self.sock_path, self.body, self.cut_after = sock_path, body, cut_after
        self.requests = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def address_string(self):
                return "unix"

            def send_json(self, code, obj):
                b = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(b)))
                self.end_headers()
                self.wfile.write(b)

            def do_GET(self):
                fake.requests.append(self.path)
                if "/fs/stat" in self.path:
                    return self.send_json(200, {"name": "out", "path": "/out", "type": "dir",
                                                "size": 0, "mode": 0o755, "mtime": 0})
                if "/archive" not in self.path:
                    return self.send_json(404, {"code": "not_found", "message": self.path})
                self.send_response(200)
                self.send_header("Content-Type", "application/x-tar")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                body = fake.body if fake.cut_after is None else fake.body[:fake.cut_after]
                for i in range(0, len(body), 16384):
                    c = body[i:i + 16384]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
                if fake.cut_after is None:
                    self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                self.close_connection = True

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        self.server = Server(sock_path, Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        try:
            os.unlink(self.sock_path)
        except FileNotFoundError:
            pass


def hostile_case(case, outside):
    """(body, cut_after) of a named hostile download aimed at the directory `outside`
    (for tests/sdk-js, which runs this file as a program)."""
    victim = os.path.join(outside, "victim.txt")
    top = [entry("out/", "dir", mode=0o755)]
    if case == "hardlink-with-data":
        return tar_bytes(top + [entry("out/x", "hardlink", data=b"PWNED", link="victim.txt")]), None
    if case == "tmp-symlink":
        return tar_bytes(top + [entry("out/x.isola-tmp", "symlink", link=victim),
                                entry("out/x", "file", data=b"PWNED")]), None
    if case == "symlink-then-file":
        return tar_bytes(top + [entry("out/esc", "symlink", link=outside),
                                entry("out/esc/pwned", "file", data=b"PWNED")]), None
    if case == "dotdot":
        return tar_bytes(top + [entry("out/../../victim.txt", "file", data=b"PWNED")]), None
    if case == "cut":
        body = tar_bytes(top + [entry(f"out/f{i}", "file", data=os.urandom(4096))
                                for i in range(200)])
        return body, len(body) // 2
    raise ValueError(case)


if __name__ == "__main__":
    import sys
    import time
    body, cut = hostile_case(sys.argv[2], sys.argv[3])
    FakeIsolad(sys.argv[1], body, cut)
    print("ready", flush=True)
    while True:
        time.sleep(3600)
