# SPDX-License-Identifier: MIT
"""A test kubelet: the device-plugin side of the kubelet, from the
upstream api.proto beside this file (messages generated at build time
into build/tests/kubelet/; the gRPC services written over grpcio's
generic handlers).

It does what the kubelet's device manager does with a plugin:
  - serves Registration on <dir>/kubelet.sock; at start it removes every
    other socket in the directory (the kubelet does: plugins must notice
    and register again);
  - Register: refuses a version other than v1beta1, a resource name that
    is not an extended resource name, an endpoint that is not a socket
    in the directory; then dials the endpoint, calls
    GetDevicePluginOptions and follows ListAndWatch;
  - every ListAndWatch list is checked as the kubelet's devices map
    would need it (IDs unique and not empty, health Healthy or
    Unhealthy); what it would refuse is recorded in `errors`, and
    check() fails the test;
  - allocate() and preferred() call Allocate and GetPreferredAllocation
    as the kubelet does at admission (one container request per
    container; as many responses back).
"""

import os
import re
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
HEALTH = ("Healthy", "Unhealthy")

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_QUALIFIED = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def extended_resource_name(name):
    """k8s.io/kubernetes' IsExtendedResourceName: DOMAIN/NAME outside
    the kubernetes.io domain, "requests." + NAME a qualified name."""
    domain, sep, short = name.partition("/")
    if not sep or "/" in short:
        return False
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return False
    if len(domain) > 253 or not _SUBDOMAIN.match(domain):
        return False
    full = "requests." + short
    return len(full) <= 63 + len("requests.") and \
        len(short) <= 63 and bool(_QUALIFIED.match(short))


class Plugin:
    """One registered plugin as the kubelet's endpoint sees it."""

    def __init__(self, kubelet, req):
        self.kubelet = kubelet
        self.resource = req.resource_name
        self.endpoint = os.path.join(kubelet.dir, req.endpoint)
        self.options = req.options
        self.channel = grpc.insecure_channel(
            "unix:" + self.endpoint, options=[("grpc.enable_http_proxy", 0)])

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
        self.ended = False
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        k = self.kubelet
        try:
            self.get_options(pb.Empty(), timeout=10)
            self.stream = self.list_and_watch(pb.Empty())
            for resp in self.stream:
                k._update(self, resp)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                k._note(f"{self.resource}: ListAndWatch ended: "
                        f"{e.code().name} {e.details()}", error=False)
        finally:
            self.ended = True
            with k.cond:
                k.cond.notify_all()

    def close(self):
        if self.stream is not None:
            self.stream.cancel()
        self.channel.close()


class Kubelet:
    def __init__(self, directory):
        self.dir = str(directory)
        self.sock = os.path.join(self.dir, "kubelet.sock")
        self.cond = threading.Condition()
        self.plugins = {}  # resource -> Plugin (the current one)
        self.devices = {}  # resource -> {ID: health}
        self.updates = {}  # resource -> [[(ID, health)...], ...]
        self.registrations = []  # resource names, in order
        self.errors = []  # what the kubelet would refuse
        self.notes = []
        self.server = None

    # -- the kubelet's life

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        # As the kubelet's device manager at start: the directory is
        # emptied of everything but what is not a file (checkpoints
        # are kept; sockets go).
        for f in os.listdir(self.dir):
            p = os.path.join(self.dir, f)
            if stat.S_ISSOCK(os.lstat(p).st_mode):
                os.unlink(p)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            f"{VERSION}.Registration", {
                "Register": grpc.unary_unary_rpc_method_handler(
                    self._register,
                    request_deserializer=pb.RegisterRequest.FromString,
                    response_serializer=pb.Empty.SerializeToString)}),))
        server.add_insecure_port("unix:" + self.sock)
        server.start()
        self.server = server
        return self

    def stop(self):
        if self.server:
            self.server.stop(0)
            self.server = None
        with self.cond:
            plugins, self.plugins = list(self.plugins.values()), {}
        for p in plugins:
            p.close()
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
        if req.version != VERSION:
            self._note(f"Register: version {req.version!r}")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"unsupported version {req.version!r}")
        if not extended_resource_name(req.resource_name):
            self._note(f"Register: invalid resource name "
                       f"{req.resource_name!r}")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"invalid resource name {req.resource_name!r}")
        ep = req.endpoint
        path = os.path.join(self.dir, ep)
        if not ep or "/" in ep or not os.path.exists(path) or \
                not stat.S_ISSOCK(os.stat(path).st_mode):
            self._note(f"Register: endpoint {ep!r} is not a socket in "
                       f"{self.dir}")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"bad endpoint {ep!r}")
        p = Plugin(self, req)
        with self.cond:
            old = self.plugins.get(req.resource_name)
            self.plugins[req.resource_name] = p
            self.registrations.append(req.resource_name)
            self.cond.notify_all()
        if old:
            old.close()
        p.thread.start()
        return pb.Empty()

    # -- ListAndWatch

    def _note(self, msg, error=True):
        with self.cond:
            (self.errors if error else self.notes).append(msg)
            self.cond.notify_all()

    def _update(self, plugin, resp):
        ids = [d.ID for d in resp.devices]
        bad = [d.ID for d in resp.devices if d.health not in HEALTH]
        if len(set(ids)) != len(ids):
            self._note(f"{plugin.resource}: duplicate device IDs {ids}")
        if any(not i or len(i) > 63 for i in ids):
            self._note(f"{plugin.resource}: empty or long device ID {ids}")
        if bad:
            self._note(f"{plugin.resource}: bad health for {bad}")
        with self.cond:
            if self.plugins.get(plugin.resource) is not plugin:
                return
            self.devices[plugin.resource] = {d.ID: d.health
                                             for d in resp.devices}
            self.updates.setdefault(plugin.resource, []).append(
                [(d.ID, d.health) for d in resp.devices])
            self.cond.notify_all()

    def wait(self, pred, what, timeout=60):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"timed out waiting for {what}: devices "
                        f"{self.devices}, errors {self.errors}, notes "
                        f"{self.notes}")
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

    # -- admission

    def allocate(self, resource, *containers):
        """Allocate for containers, each a list of device IDs; returns
        the AllocateResponse (checked: one response per container)."""
        p = self.plugins[resource]
        resp = p.allocate(pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=ids)
            for ids in containers]), timeout=30)
        if len(resp.container_responses) != len(containers):
            self._note(f"{resource}: Allocate answered "
                       f"{len(resp.container_responses)} containers of "
                       f"{len(containers)}")
        self.check()
        return resp

    def preferred(self, resource, available, must, size):
        p = self.plugins[resource]
        if not p.options.get_preferred_allocation_available:
            raise AssertionError(f"{resource}: no GetPreferredAllocation")
        resp = p.preferred(pb.PreferredAllocationRequest(
            container_requests=[pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=available, must_include_deviceIDs=must,
                allocation_size=size)]), timeout=30)
        (c,) = resp.container_responses
        return list(c.deviceIDs)
