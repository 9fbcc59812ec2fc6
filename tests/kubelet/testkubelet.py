# SPDX-License-Identifier: MIT
"""A test kubelet: the device-plugin side of the kubelet, from the
upstream api.proto beside this file (messages generated at build time
into build/tests/kubelet/; the gRPC services written over grpcio's
generic handlers).

It behaves as the kubelet's device manager of Kubernetes 1.28 to 1.33
does (pkg/kubelet/cm/devicemanager: plugin/v1beta1/server.go,
handler.go, client.go; manager.go; checkpoint/), written from that
behaviour, sharing nothing with the plugin under test:

  - serves Registration on <dir>/kubelet.sock; at start it removes
    everything in the directory but its checkpoint and directories
    (plugins must notice and register again);
  - Register: refuses a version other than v1beta1, a name that is not
    an extended resource name (IsExtendedResourceName, below), an
    endpoint that cannot be dialled; then dials the endpoint (blocking,
    10 s at most), calls GetDevicePluginOptions (no deadline) and keeps
    *that* reply as the plugin's options (not the request's); only then
    answers, and follows ListAndWatch. `register_delay` makes it answer
    that much later (a busy kubelet); `refuse` refuses every Register;
  - a second Register of a resource replaces the first client without
    closing it (as 1.28-1.33 do); the old client's lists are ignored;
  - when a ListAndWatch stream ends the client is forgotten and the
    resource's devices are Unhealthy: the kubelet never dials again, the
    plugin has to register again. drop_stream() ends one from the
    kubelet's side without touching any socket;
  - every ListAndWatch list is checked as the kubelet's devices map
    would need it (IDs unique and not empty, health Healthy or
    Unhealthy); what it would refuse is recorded in `errors`, and
    check() fails the test;
  - admit() allocates as the kubelet does at admission: only Healthy
    shares no other container holds, one container per Allocate call,
    exactly one container response back; the answer is written to the
    checkpoint file and replay() reads it back as the kubelet does when
    a container or the kubelet restarts.
"""

import base64
import json
import os
import stat
import sys
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "build" / "tests" / "kubelet"))
import api_pb2 as pb  # noqa: E402

VERSION = "v1beta1"
HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"
CHECKPOINT = "kubelet_internal_checkpoint"
DIAL_TIMEOUT = 10  # the kubelet's dial of a plugin's endpoint


# ---- names, as k8s.io/apimachinery validates them (written from its
# ---- rules, character by character)

LOWER_ALNUM = set("abcdefghijklmnopqrstuvwxyz0123456789")
ALNUM = LOWER_ALNUM | set("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def is_dns1123_subdomain(s):
    """At most 253 characters; dot-separated labels of lower-case
    letters, digits and '-', each beginning and ending with a letter or
    digit (no length limit of its own for a label)."""
    if not s or len(s) > 253:
        return False
    for label in s.split("."):
        if not label or label[0] not in LOWER_ALNUM or \
                label[-1] not in LOWER_ALNUM:
            return False
        if any(c not in LOWER_ALNUM and c != "-" for c in label):
            return False
    return True


def is_qualified_name(s):
    """[PREFIX/]NAME: PREFIX a DNS subdomain; NAME 1 to 63 characters of
    letters, digits, '-', '_' and '.', beginning and ending with a
    letter or digit."""
    parts = s.split("/")
    if len(parts) == 2:
        prefix, name = parts
        if not prefix or not is_dns1123_subdomain(prefix):
            return False
    elif len(parts) == 1:
        name = parts[0]
    else:
        return False
    if not name or len(name) > 63:
        return False
    if name[0] not in ALNUM or name[-1] not in ALNUM:
        return False
    return all(c in ALNUM or c in "-_." for c in name)


def is_extended_resource_name(name):
    """pkg/apis/core/v1/helper IsExtendedResourceName: not a native
    resource (those have no '/', or contain "kubernetes.io/"), not
    beginning with "requests.", and "requests." + name a qualified
    name."""
    if "/" not in name or "kubernetes.io/" in name:
        return False
    if name.startswith("requests."):
        return False
    return is_qualified_name("requests." + name)


# ---- one plugin's client, as the kubelet's endpoint has it

class Client:
    def __init__(self, kubelet, resource, endpoint):
        self.kubelet = kubelet
        self.resource = resource
        self.endpoint = endpoint
        self.options = None  # GetDevicePluginOptions' answer
        self.channel = grpc.insecure_channel(
            "unix:" + endpoint, options=[("grpc.enable_http_proxy", 0),
                                         ("grpc.default_authority",
                                          "localhost")])

        def uu(method, req_t, resp_t):
            return self.channel.unary_unary(
                f"/{VERSION}.DevicePlugin/{method}",
                request_serializer=req_t.SerializeToString,
                response_deserializer=resp_t.FromString)
        self.get_options = uu("GetDevicePluginOptions", pb.Empty,
                              pb.DevicePluginOptions)
        self.allocate = uu("Allocate", pb.AllocateRequest,
                           pb.AllocateResponse)
        self.preferred = uu("GetPreferredAllocation",
                            pb.PreferredAllocationRequest,
                            pb.PreferredAllocationResponse)
        self.list_and_watch = self.channel.unary_stream(
            f"/{VERSION}.DevicePlugin/ListAndWatch",
            request_serializer=pb.Empty.SerializeToString,
            response_deserializer=pb.ListAndWatchResponse.FromString)
        self.stream = None
        self.lists = 0  # ListAndWatch answers received
        self.ended = False
        self.dropped = False  # ended by drop_stream()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def connect(self):
        """client.Connect: a blocking dial (10 s at most), then the
        handler's GetDevicePluginOptions with no deadline."""
        grpc.channel_ready_future(self.channel).result(timeout=DIAL_TIMEOUT)
        self.options = self.get_options(pb.Empty())

    def _run(self):
        """client.Run: one ListAndWatch; when it ends, the client is
        disconnected for good."""
        k = self.kubelet
        try:
            self.stream = self.list_and_watch(pb.Empty())
            for resp in self.stream:
                k._update(self, resp)
        except grpc.RpcError as e:
            if not self.dropped:
                k._note(f"{self.resource}: ListAndWatch ended: "
                        f"{e.code().name} {e.details()}", error=False)
        except ValueError:  # closed before it began: the kubelet stopped
            pass
        finally:
            self.ended = True
            k._disconnected(self)

    def close(self):
        if self.stream is not None:
            self.stream.cancel()
        self.channel.close()


class Kubelet:
    def __init__(self, directory):
        self.dir = str(directory)
        self.sock = os.path.join(self.dir, "kubelet.sock")
        self.cond = threading.Condition()
        self.plugins = {}  # resource -> Client (the current one)
        self.stale = []  # clients a later Register replaced (left open)
        self.devices = {}  # resource -> {ID: health}
        self.topology = {}  # resource -> {ID: [NUMA node IDs] or None}
        self.updates = {}  # resource -> [[(ID, health)...], ...]
        self.registrations = []  # resource names, in order of answer
        self.register_calls = []  # resource names, in order of arrival
        self.errors = []  # what the kubelet would refuse
        self.notes = []
        self.allocated = {}  # resource -> {ID: (pod, container)}
        self.register_delay = 0.0
        self.refuse = None  # a reason: every Register is refused with it
        self.stopped = threading.Event()
        self.server = None

    # -- the kubelet's life

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        # As the device manager's server at start: everything in the
        # directory but its checkpoint and directories is removed.
        for f in os.listdir(self.dir):
            p = os.path.join(self.dir, f)
            if f == CHECKPOINT or stat.S_ISDIR(os.lstat(p).st_mode):
                continue
            os.unlink(p)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            f"{VERSION}.Registration", {
                "Register": grpc.unary_unary_rpc_method_handler(
                    self._register,
                    request_deserializer=pb.RegisterRequest.FromString,
                    response_serializer=pb.Empty.SerializeToString)}),))
        server.add_insecure_port("unix:" + self.sock)
        server.start()
        self.server = server
        self.stopped.clear()
        return self

    def stop(self):
        self.stopped.set()
        if self.server:
            self.server.stop(0)
            self.server = None
        with self.cond:
            clients = list(self.plugins.values()) + self.stale
            self.plugins, self.stale = {}, []
        for c in clients:
            c.dropped = True
            c.close()
        try:
            os.unlink(self.sock)
        except FileNotFoundError:
            pass

    def restart(self):
        """The kubelet restarts: its plugins' streams end, their devices
        are forgotten until they register again."""
        self.stop()
        with self.cond:
            self.devices.clear()
        time.sleep(0.2)
        return self.start()

    # -- Registration

    def _register(self, req, context):
        with self.cond:
            self.register_calls.append(req.resource_name)
            self.cond.notify_all()
        if self.refuse:
            context.abort(grpc.StatusCode.UNKNOWN, self.refuse)
        if req.version != VERSION:
            self._note(f"Register: version {req.version!r}")
            context.abort(grpc.StatusCode.UNKNOWN,
                          f"requested API version {req.version!r} is not "
                          f"supported by kubelet")
        if not is_extended_resource_name(req.resource_name):
            self._note(f"Register: invalid resource name "
                       f"{req.resource_name!r}")
            context.abort(grpc.StatusCode.UNKNOWN,
                          f"invalid name of device plugin socket: "
                          f"{req.resource_name!r}")
        c = Client(self, req.resource_name,
                   os.path.join(self.dir, req.endpoint))
        # As registerClient, before Connect: the new client replaces the
        # old at once, which stays open.
        with self.cond:
            old = self.plugins.get(req.resource_name)
            self.plugins[req.resource_name] = c
            if old:
                self.stale.append(old)
        try:
            c.connect()
        except (grpc.RpcError, grpc.FutureTimeoutError) as e:
            with self.cond:
                if self.plugins.get(req.resource_name) is c:
                    del self.plugins[req.resource_name]
            c.close()
            self._note(f"Register: cannot connect to {req.endpoint!r}: "
                       f"{e!r}", error=False)
            context.abort(grpc.StatusCode.UNKNOWN,
                          f"cannot connect to {req.endpoint!r}")
        if self.register_delay:
            self.stopped.wait(self.register_delay)
        with self.cond:
            self.registrations.append(req.resource_name)
            self.cond.notify_all()
        c.thread.start()
        return pb.Empty()

    # -- ListAndWatch

    def _note(self, msg, error=True):
        with self.cond:
            (self.errors if error else self.notes).append(msg)
            self.cond.notify_all()

    def _update(self, client, resp):
        ids = [d.ID for d in resp.devices]
        bad = [d.ID for d in resp.devices if d.health not in
               (HEALTHY, UNHEALTHY)]
        if len(set(ids)) != len(ids):
            self._note(f"{client.resource}: duplicate device IDs {ids}")
        if any(not i for i in ids):
            self._note(f"{client.resource}: empty device ID {ids}")
        if bad:
            self._note(f"{client.resource}: bad health for {bad}")
        with self.cond:
            client.lists += 1
            self.cond.notify_all()
            if self.plugins.get(client.resource) is not client:
                return
            self.devices[client.resource] = {d.ID: d.health
                                             for d in resp.devices}
            self.topology[client.resource] = {
                d.ID: ([n.ID for n in d.topology.nodes]
                       if d.HasField("topology") else None)
                for d in resp.devices}
            self.updates.setdefault(client.resource, []).append(
                [(d.ID, d.health) for d in resp.devices])
            self.cond.notify_all()

    def _disconnected(self, client):
        """disconnectClient: the client goes; its devices are Unhealthy
        until a plugin registers the resource again."""
        with self.cond:
            if self.plugins.get(client.resource) is client:
                del self.plugins[client.resource]
                d = self.devices.get(client.resource)
                if d:
                    self.devices[client.resource] = {
                        i: UNHEALTHY for i in d}
            self.cond.notify_all()

    def drop_stream(self, resource):
        """End resource's ListAndWatch from the kubelet's side (an
        HTTP/2 error, a kubelet hiccup); no socket is touched."""
        c = self.listed(resource)
        with self.cond:
            c.dropped = True
        c.stream.cancel()
        self.wait(lambda: c.ended, f"{resource}'s stream to end", 30)
        return c

    def listed(self, resource, timeout=60):
        """The current client of resource, once it has had a list."""
        def ready():
            c = self.plugins.get(resource)
            return c is not None and c.lists > 0 and c.stream is not None
        self.wait(ready, f"{resource} to be registered and listed", timeout)
        with self.cond:
            return self.plugins[resource]

    def registered(self, resource):
        """The current client of resource, None when none."""
        with self.cond:
            return self.plugins.get(resource)

    def wait(self, pred, what, timeout=60):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"timed out waiting for {what}: devices "
                        f"{self.devices}, registrations "
                        f"{self.registrations}, errors {self.errors}, "
                        f"notes {self.notes}")
                self.cond.wait(min(left, 0.5))

    def health(self, resource):
        """{ID: health} as last listed, None when never listed."""
        with self.cond:
            d = self.devices.get(resource)
            return dict(d) if d is not None else None

    def n_updates(self, resource):
        with self.cond:
            return len(self.updates.get(resource, []))

    def check(self):
        """Fail on anything the kubelet would have refused."""
        with self.cond:
            assert not self.errors, self.errors

    # -- admission, the checkpoint, a restart's replay

    def admit(self, resource, n, pod="pod", container="c"):
        """Admit one container asking for n shares of resource: n
        Healthy shares no container holds (AssertionError, as an
        admission failure, when there are fewer), one Allocate for
        them, its one container response checkpointed and returned."""
        with self.cond:
            c = self.plugins.get(resource)
            if c is None:
                raise AssertionError(f"{resource}: no plugin registered")
            taken = self.allocated.setdefault(resource, {})
            free = [i for i, h in self.devices.get(resource, {}).items()
                    if h == HEALTHY and i not in taken]
            if len(free) < n:
                raise AssertionError(
                    f"{resource}: requested number of devices unavailable "
                    f"({n} asked, {len(free)} free)")
            ids = sorted(free)[:n]
        resp = c.allocate(pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=ids)]), timeout=30)
        if len(resp.container_responses) != 1:
            self._note(f"{resource}: Allocate answered "
                       f"{len(resp.container_responses)} containers of 1")
            self.check()
        with self.cond:
            for i in ids:
                taken[i] = (pod, container)
        self._checkpoint(pod, container, resource, ids,
                         resp.container_responses[0])
        return resp.container_responses[0]

    def release(self, pod):
        with self.cond:
            for taken in self.allocated.values():
                for i in [i for i, pc in taken.items() if pc[0] == pod]:
                    del taken[i]

    def _checkpoint(self, pod, container, resource, ids, answer):
        path = os.path.join(self.dir, CHECKPOINT)
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            data = {"Data": {"PodDeviceEntries": []}}
        data["Data"]["PodDeviceEntries"].append({
            "PodUID": pod, "ContainerName": container,
            "ResourceName": resource, "DeviceIDs": {"-1": ids},
            "AllocResp": base64.b64encode(
                answer.SerializeToString()).decode()})
        tmp = path + ".tmp"
        Path(tmp).write_text(json.dumps(data))
        os.rename(tmp, path)

    def replay(self, pod, container, resource):
        """The ContainerAllocateResponse the checkpoint holds for the
        container, as the kubelet gives it to the runtime again when
        the container (or the kubelet) restarts: no plugin is asked."""
        data = json.loads(Path(self.dir, CHECKPOINT).read_text())
        (e,) = [e for e in data["Data"]["PodDeviceEntries"]
                if (e["PodUID"], e["ContainerName"], e["ResourceName"]) ==
                (pod, container, resource)]
        return pb.ContainerAllocateResponse.FromString(
            base64.b64decode(e["AllocResp"]))

    # -- what tests may still call directly

    def allocate(self, resource, *containers):
        """One Allocate per container (the kubelet never sends two in
        one call), each a list of device IDs; the answers as one
        AllocateResponse."""
        c = self.plugins[resource]
        out = pb.AllocateResponse()
        for ids in containers:
            resp = c.allocate(pb.AllocateRequest(container_requests=[
                pb.ContainerAllocateRequest(devices_ids=ids)]), timeout=30)
            if len(resp.container_responses) != 1:
                self._note(f"{resource}: Allocate answered "
                           f"{len(resp.container_responses)} containers "
                           f"of 1")
            out.container_responses.extend(resp.container_responses)
        self.check()
        return out
