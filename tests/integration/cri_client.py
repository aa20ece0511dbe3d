# SPDX-License-Identifier: Apache-2.0
"""A minimal Kubernetes CRI client for the tests (what a kubelet asks of containerd's CRI
plugin): gRPC over containerd's unix socket (Debian's python3-grpcio) with the messages
encoded and decoded here in protobuf's wire format, by the field numbers of the CRI API
(k8s.io/cri-api, runtime.v1). Only the calls and fields tests/integration/test_oci_cri.py
needs."""

import grpc

# NamespaceMode (runtime.v1): POD shares the pod sandbox's, CONTAINER its own, NODE the host's.
POD, CONTAINER, NODE, TARGET = 0, 1, 2, 3
# ContainerState
CONTAINER_CREATED, CONTAINER_RUNNING, CONTAINER_EXITED, CONTAINER_UNKNOWN = 0, 1, 2, 3


def _varint(n):
    if n < 0:
        n += 1 << 64  # int64/int32 negatives: ten bytes, two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def msg(*fields):
    """A message from (field number, value) pairs: int/bool as varint, str/bytes as bytes,
    a nested message as the bytes msg() returned, a list as a repeated field, a dict as a
    map<string,string>; None values are left out."""
    out = bytearray()
    for num, value in fields:
        if value is None:
            continue
        if isinstance(value, dict):
            value = [msg((1, k), (2, v)) for k, v in value.items()]
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, bool) or isinstance(v, int):
                out += _varint(num << 3) + _varint(int(v))
            else:
                b = v.encode() if isinstance(v, str) else bytes(v)
                out += _varint(num << 3 | 2) + _varint(len(b)) + b
    return bytes(out)


def parse(data):
    """{field number: [values]}: varints as int, length-delimited as bytes (nested messages
    are parsed again by the caller); fixed-width fields as their raw bytes."""
    fields, i = {}, 0

    def varint():
        nonlocal i
        shift = n = 0
        while True:
            b = data[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    while i < len(data):
        key = varint()
        num, wire = key >> 3, key & 7
        if wire == 0:
            v = varint()
        elif wire == 2:
            n = varint()
            v = bytes(data[i:i + n])
            i += n
        elif wire == 1:
            v, i = bytes(data[i:i + 8]), i + 8
        elif wire == 5:
            v, i = bytes(data[i:i + 4]), i + 4
        else:
            raise ValueError(f"wire type {wire} of field {num}")
        fields.setdefault(num, []).append(v)
    return fields


def first(fields, num, default=None):
    return fields.get(num, [default])[0]


def text(fields, num):
    return first(fields, num, b"").decode()


def int32(n):
    return n - (1 << 64) if n >= 1 << 63 else n


class CRI:
    """runtime.v1.RuntimeService and ImageService on containerd's socket."""

    def __init__(self, sock, timeout=120):
        self.channel = grpc.insecure_channel(f"unix://{sock}")
        self.timeout = timeout
        self.made = []  # ids of the pods and containers this client created

    def close(self):
        self.channel.close()

    def call(self, service, method, body, timeout=None):
        rpc = self.channel.unary_unary(f"/runtime.v1.{service}/{method}")
        return parse(rpc(body, timeout=timeout or self.timeout))

    def runtime(self, method, body, timeout=None):
        return self.call("RuntimeService", method, body, timeout)

    def version(self):
        f = self.runtime("Version", msg((1, "v1")))
        return {"version": text(f, 1), "runtime_name": text(f, 2),
                "runtime_version": text(f, 3), "runtime_api_version": text(f, 4)}

    def list_images(self):
        f = self.call("ImageService", "ListImages", b"")
        return [[t.decode() for t in parse(img).get(2, [])] for img in f.get(1, [])]

    @staticmethod
    def pod_config(name, uid, hostname, namespace="default", log_dir=None):
        """A PodSandboxConfig as a kubelet sends it for a pod with its own network, pid
        namespace per container (no shareProcessNamespace) and its own IPC."""
        ns = msg((1, POD), (2, CONTAINER), (3, POD))
        return msg((1, msg((1, name), (2, uid), (3, namespace), (4, 0))), (2, hostname),
                   (3, log_dir), (8, msg((2, msg((1, ns))))))

    def run_pod(self, config, handler):
        pod_id = text(self.runtime("RunPodSandbox", msg((1, config), (2, handler))), 1)
        self.made.append(pod_id)
        return pod_id

    def pod_status(self, pod_id):
        f = parse(first(self.runtime("PodSandboxStatus", msg((1, pod_id))), 1))
        net = parse(first(f, 5, b""))
        return {"id": text(f, 1), "state": first(f, 3, 0), "ip": text(net, 1),
                "runtime_handler": text(f, 9)}

    def create_container(self, pod_id, pod_config, name, image, args, pid_mode=CONTAINER,
                         target_id=None):
        ns = msg((1, POD), (2, pid_mode), (3, POD), (4, target_id))
        config = msg((1, msg((1, name), (2, 0))), (2, msg((1, image))), (4, list(args)),
                     (11, f"{name}.log"), (15, msg((2, msg((3, ns))))))
        f = self.runtime("CreateContainer", msg((1, pod_id), (2, config), (3, pod_config)))
        self.made.append(text(f, 1))
        return text(f, 1)

    def start_container(self, cid):
        self.runtime("StartContainer", msg((1, cid)))

    def exec_sync(self, cid, cmd, timeout=60):
        f = self.runtime("ExecSync", msg((1, cid), (2, list(cmd)), (3, timeout)),
                         timeout=timeout + 30)
        return (int32(first(f, 3, 0)), first(f, 1, b"").decode(), first(f, 2, b"").decode())

    def container_status(self, cid):
        f = parse(first(self.runtime("ContainerStatus", msg((1, cid))), 1))
        return {"id": text(f, 1), "state": first(f, 3, 0), "exit_code": int32(first(f, 7, 0)),
                "reason": text(f, 10), "message": text(f, 11)}

    def stop_container(self, cid, timeout=10):
        self.runtime("StopContainer", msg((1, cid), (2, timeout)))

    def remove_container(self, cid):
        self.runtime("RemoveContainer", msg((1, cid)))

    def stop_pod(self, pod_id):
        self.runtime("StopPodSandbox", msg((1, pod_id)))

    def remove_pod(self, pod_id):
        self.runtime("RemovePodSandbox", msg((1, pod_id)))
