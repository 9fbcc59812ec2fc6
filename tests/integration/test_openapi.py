# SPDX-License-Identifier: MIT
"""The OpenAPI document (daemon/api/openapi.json, GET /v1/openapi.json):
it is what the daemon serves, the official OpenAPI 3.0 schema accepts it,
it names exactly the routes of daemon/api/api.c, and every route's real
answers, on rxe, for success and errors, match its schemas."""

import http.client
import json
import os
import re
import warnings

import jsonschema

import test_model
from conftest import ROOT
from rdmadproto import ATTACH, ATTACHED, Client

DOC_FILE = ROOT / "daemon" / "api" / "openapi.json"
# The OpenAPI Initiative's JSON Schema of OpenAPI 3.0 documents (see
# tests/openapi/README).
OAS_SCHEMA = ROOT / "tests" / "openapi" / "oas-3.0-schema.json"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch",
           "trace")


def load_doc():
    return json.loads(DOC_FILE.read_text())


def as_json_schema(s):
    """OpenAPI 3.0's schema objects are JSON Schema but for nullable:
    {"type": t, "nullable": true} is {"type": [t, "null"]}."""
    if isinstance(s, list):
        return [as_json_schema(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {k: as_json_schema(v) for k, v in s.items()}
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


class Checker:
    """Validates answers against the document's schemas, resolving
    $ref with the document as the root, and records which operations
    and statuses were seen."""

    def __init__(self, doc):
        self.doc = doc
        self.root = as_json_schema(doc)
        with warnings.catch_warnings():
            # jsonschema >= 4.18 prefers the referencing library, which
            # Debian 12's 4.10 does not have.
            warnings.simplefilter("ignore", DeprecationWarning)
            self.resolver = jsonschema.RefResolver("", self.root)
        self.seen = set()

    def deref(self, node):
        while "$ref" in node:
            _, node = self.resolver.resolve(node["$ref"])
        return node

    def response(self, method, template, status):
        """The response object documented for status, or None."""
        if template is None:
            return None
        op = self.root["paths"][template][method.lower()]
        r = op["responses"].get(str(status))
        return self.deref(r) if r is not None else None

    def validate(self, body, response, what):
        media = response["content"]
        if "application/json" not in media:
            return
        schema = media["application/json"]["schema"]
        errors = list(jsonschema.Draft4Validator(
            schema, resolver=self.resolver).iter_errors(body))
        assert not errors, (what, [f"{list(e.path)}: {e.message}"
                                   for e in errors[:5]], body)

    def check(self, method, template, status, headers, raw, what):
        if status == 405:
            # No operation of the path has the method: an Error, with
            # Allow. OpenAPI has no place for a path's answer to the
            # methods it lacks: the document's info says it.
            response = {"content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/Error"}}}}
            assert headers.get("Allow"), what
        elif template is None:
            assert status == 404, what
            response = self.deref({"$ref": "#/components/responses/NotFound"})
        else:
            response = self.response(method, template, status)
            assert response is not None, \
                f"{what}: status {status} is not documented"
            self.seen.add((method.lower(), template, status))
        ctype = headers.get("Content-Type", "")
        if "text/event-stream" in response["content"] and status == 200:
            assert ctype == "text/event-stream", what
            return None
        if "text/plain" in response["content"] and status == 200:
            assert ctype.startswith("text/plain"), what
            assert raw.decode()
            return None
        assert ctype == "application/json", (what, ctype)
        body = json.loads(raw)
        self.validate(body, response, what)
        if status == 401:
            assert headers.get("WWW-Authenticate") == 'Bearer realm="rdmad"'
        if status >= 400 and template is not None and \
                "selftest" not in template:
            assert "error" in body, what
        return body


def call(d, method, path, body=None, token=True, raw=None):
    """(status, headers, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
    headers = {}
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
    if data is not None:
        headers["Content-Type"] = "application/json"
    tok = d.token if token is True else token or None
    if tok:
        headers["Authorization"] = f"Bearer {tok}"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    out = r.status, dict(r.getheaders()), r.read()
    conn.close()
    return out


def exercise(ck, d, method, path, template, expect, body=None, token=True,
             raw=None):
    status, headers, data = call(d, method, path, body, token, raw)
    what = f"{method} {path}"
    assert status == expect, (what, status, data[:500])
    return ck.check(method, template, status, headers, data, what)


# ---- the document itself ----


def test_document_is_valid_openapi_3_0():
    doc = load_doc()
    assert doc["openapi"].startswith("3.0.")
    schema = json.loads(OAS_SCHEMA.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    errors = list(jsonschema.Draft4Validator(
        schema, format_checker=jsonschema.FormatChecker()).iter_errors(doc))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    # Every $ref resolves, and every response schema is a valid schema.
    ck = Checker(doc)

    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                ck.deref(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc)
    for name, s in ck.root["components"]["schemas"].items():
        jsonschema.Draft4Validator.check_schema(s)


def api_routes():
    """(method, segments after /v1, mutating) of api.c's route table."""
    text = (ROOT / "daemon" / "api" / "api.c").read_text()
    table = re.search(r"routes\[\] = \{(.*?)\n\};", text, re.S).group(1)
    out = []
    # { method, { segments }, handler, mutating[, scoped] }
    for m in re.finditer(r'\{ "(\w+)", \{ ([^}]*) \},\s+\w+, (true|false)'
                         r'(?:,\s+(?:true|false))? \}', table):
        segs = tuple("*" if s.strip() == "ANY" else json.loads(s.strip())
                     for s in m.group(2).split(","))
        out.append((m.group(1).lower(), segs, m.group(3) == "true"))
    assert len(out) == table.count("\n\t{ "), "a route the regex missed"
    return out


def doc_operations(doc):
    """(method, segments after /v1 with parameters as '*', secured) of
    the document's /v1 operations."""
    out = []
    for path, item in doc["paths"].items():
        if not path.startswith("/v1/"):
            continue
        segs = tuple("*" if re.fullmatch(r"\{\w+\}", s) else s
                     for s in path[4:].split("/"))
        # http.c serves the event stream itself (as /metrics).
        if path == "/v1/events":
            continue
        for method, op in item.items():
            if method in METHODS:
                out.append((method, segs, bool(op.get("security")), path))
    return out


def test_document_names_every_route_of_api_c():
    doc = load_doc()
    routes = api_routes()
    ops = doc_operations(doc)
    # Each route, as the document writes it, with its authentication.
    for method, segs, mutating in routes:
        match = [o for o in ops if o[0] == method and o[1] == segs]
        assert match, f"{method.upper()} /v1/{'/'.join(segs)} is undocumented"
        assert all(o[2] == mutating for o in match), (method, segs)

    # Each documented operation is answered by a route (a literal of the
    # document, e.g. .../qp/{name}, may stand where api.c matches any).
    def answers(route, op):
        return route[0] == op[0] and len(route[1]) == len(op[1]) and all(
            r == "*" or r == o for r, o in zip(route[1], op[1]))
    for op in ops:
        assert any(answers(r, op) for r in routes), \
            f"{op[0].upper()} {op[3]} has no route in api.c"
        assert op[2] == any(answers(r, op) and r[2] for r in routes), op
    # http.c serves /metrics itself.
    assert "get" in doc["paths"]["/metrics"]


# ---- every route, for real ----


def no_token_daemon(rdmad, tmp_path):
    """A daemon without daemon.http.token_file: changes over REST off."""
    from conftest import free_port
    port = free_port()
    run = tmp_path / "notoken"
    run.mkdir()
    return rdmad(f'daemon = {{ runtime_dir = "{run}"; http = {{ listen = '
                 f'[ "127.0.0.1:{port}" ]; }}; }};\n'
                 'devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );'
                 '\nprofiles = ( { name = "p"; device = "d0"; '
                 'pd = ( { name = "a"; } ); } );\n')


def test_every_route_answers_as_documented(rdmad, tmp_path):
    doc = load_doc()
    ck = Checker(doc)
    d = rdmad(test_model.KINDS)
    ex = lambda *a, **k: exercise(ck, d, *a, **k)  # noqa: E731

    # (a) The served document is the file, on REST and the control socket.
    served = ex("GET", "/v1/openapi.json", "/v1/openapi.json", 200)
    assert served == doc
    c = Client(d.sock)
    assert c.request("GET", "/v1/openapi.json") == (200, doc)
    # A client session with an attachment, for /v1/sessions.
    t, att, fds = c.call(ATTACH, {"profile": "all", "mode": "local"})
    for fd in fds:
        os.close(fd)

    ex("GET", "/v1/health", "/v1/health", 200)
    ex("GET", "/v1/version", "/v1/version", 200)
    # The event stream: its head and first event, then we hang up.
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
    conn.request("GET", "/v1/events")
    r = conn.getresponse()
    first = r.readline() + r.readline()
    ck.check("GET", "/v1/events", r.status, dict(r.getheaders()), b"",
             "GET /v1/events")
    assert first.startswith(b"event: subscribed\n"), first
    conn.close()
    devices = ex("GET", "/v1/devices", "/v1/devices", 200)
    assert {"rxe0", "rxe1"} <= {x["name"] for x in devices}
    for dev in ("rxe0", "rxe1"):
        ex("GET", f"/v1/devices/{dev}", "/v1/devices/{ibdev}", 200)
        ex("GET", f"/v1/devices/{dev}/ports/1",
           "/v1/devices/{ibdev}/ports/{port}", 200)
        gids = ex("GET", f"/v1/devices/{dev}/ports/1/gids",
                  "/v1/devices/{ibdev}/ports/{port}/gids", 200)
        assert gids
    profiles = ex("GET", "/v1/profiles", "/v1/profiles", 200)
    assert [p["name"] for p in profiles] == ["all"]
    prof = ex("GET", "/v1/profiles/all", "/v1/profiles/{profile}", 200)
    kinds = set()
    for o in prof["objects"]:
        kinds.add(o["kind"])
        got = ex("GET", f"/v1/profiles/all/{o['kind']}/{o['name']}",
                 "/v1/profiles/{profile}/{kind}/{name}", 200)
        assert got["name"] == o["name"]
        if o["kind"] == "qp":
            ex("GET", f"/v1/profiles/all/qp/{o['name']}",
               "/v1/profiles/{profile}/qp/{name}", 200)
            if o["state"] == "ready":
                ex("GET", f"/v1/profiles/all/qp/{o['name']}/endpoint",
                   "/v1/profiles/{profile}/qp/{name}/endpoint", 200)
    # test_model's configuration has an object of every kind.
    assert kinds == set(doc["components"]["schemas"]["Object"]["properties"]
                        ["kind"]["enum"])
    orph = ex("GET", "/v1/profiles/all/orphans",
              "/v1/profiles/{profile}/orphans", 200)
    assert orph["profile"] == "all" and orph["orphans"] == []
    ex("GET", "/v1/profiles/nope/orphans", "/v1/profiles/{profile}/orphans",
       404)
    # A target's connections, with a peer connected (cmpeer.py), and
    # its revocation.
    conns = ex("GET", "/v1/profiles/all/target/t/connections",
               "/v1/profiles/{profile}/target/{name}/connections", 200)
    assert conns == []
    from cmpeer import Peer
    peer = Peer("192.0.2.1", 7471)
    try:
        conns = ex("GET", "/v1/profiles/all/target/t/connections",
                   "/v1/profiles/{profile}/target/{name}/connections", 200)
        assert len(conns) == 1, conns
        one = f"/v1/profiles/all/target/t/connections/{conns[0]['id']}"
        tmpl = "/v1/profiles/{profile}/target/{name}/connections/{id}"
        ex("DELETE", one, tmpl, 401, token=False)
        ex("DELETE", one, tmpl, 200)
        ex("DELETE", one, tmpl, 404)
    finally:
        peer.close()
    sessions = ex("GET", "/v1/sessions", "/v1/sessions", 200)
    assert sessions and (t != ATTACHED or any(
        s["attachments"] for s in sessions)), (att, sessions)
    ex("GET", "/v1/config", "/v1/config", 200)
    ex("GET", "/metrics", "/metrics", 200)

    # Migration: a QP starts with nothing armed (rxe, RoCE, takes no
    # alternate path: test_qp_endpoint.py); unauthenticated; unknown.
    tmpl = "/v1/profiles/{profile}/qp/{name}/migrate"
    ex("POST", "/v1/profiles/all/qp/q0/migrate", tmpl, 401, {},
       token=False)
    ex("POST", "/v1/profiles/all/qp/q0/migrate", tmpl, 409, {})
    ex("POST", "/v1/profiles/all/qp/nope/migrate", tmpl, 404, {})

    # Mutating routes: success.
    rep = ex("POST", "/v1/profiles/all/selftest",
             "/v1/profiles/{profile}/selftest", 200,
             {"a": "q0", "b": "q1", "mr": "r"})
    assert rep["ok"] is True
    rep = ex("POST", "/v1/profiles/all/selftest",
             "/v1/profiles/{profile}/selftest", 422,
             {"a": "q0", "b": "u0", "mr": "r"})
    assert rep["ok"] is False and rep["error"]
    qp = ex("PATCH", "/v1/profiles/all/qp/u0",
            "/v1/profiles/{profile}/qp/{name}", 200,
            {"state": "rts", "path": {"dqpn": 17, "mtu": 512}})
    assert qp["qp_state"] == "rts"
    qp = ex("PATCH", "/v1/profiles/all/qp/u0",
            "/v1/profiles/{profile}/qp/{name}", 200, {"state": "reset"})
    assert qp["qp_state"] == "reset"
    rel = ex("POST", "/v1/reload", "/v1/reload", 200, {})
    assert rel["status"] == "ok"
    d.settle()
    ex("POST", "/v1/reload", "/v1/reload", 200, {"force": False})
    d.settle()
    # A reload that changes something: the changes have their schema.
    conf = d.conf.read_text()
    d.conf.write_text(conf.replace('cqe = 64;', 'cqe = 32;'))
    rel = ex("POST", "/v1/reload", "/v1/reload", 200)
    assert rel["changes"], rel
    d.settle()

    # Errors.
    for path, template in (
            ("/v1/devices/nope", "/v1/devices/{ibdev}"),
            ("/v1/devices/rxe0/ports/9", "/v1/devices/{ibdev}/ports/{port}"),
            ("/v1/devices/rxe0/ports/x/gids",
             "/v1/devices/{ibdev}/ports/{port}/gids"),
            ("/v1/profiles/nope", "/v1/profiles/{profile}"),
            ("/v1/profiles/all/nope/x",
             "/v1/profiles/{profile}/{kind}/{name}"),
            ("/v1/profiles/all/mr/nope",
             "/v1/profiles/{profile}/{kind}/{name}"),
            ("/v1/profiles/all/qp/nope", "/v1/profiles/{profile}/qp/{name}"),
            ("/v1/profiles/all/qp/nope/endpoint",
             "/v1/profiles/{profile}/qp/{name}/endpoint")):
        ex("GET", path, template, 404)
    for path in ("/v1/nope", "/v1/health/", "/v1//health", "/nope",
                 "/v1/profiles/all/qp/q0/x"):
        ex("GET", path, None, 404)
    ex("PATCH", "/v1/profiles/nope/qp/x", "/v1/profiles/{profile}/qp/{name}",
       404, {"state": "rts"})
    ex("POST", "/v1/profiles/nope/selftest",
       "/v1/profiles/{profile}/selftest", 404, {"a": "q0", "b": "q1"})
    ex("POST", "/v1/profiles/all/selftest",
       "/v1/profiles/{profile}/selftest", 404, {"a": "q0", "b": "nope"})

    # 405: the methods a path has, in Allow.
    for method, path, allow in (
            ("DELETE", "/v1/health", "GET, HEAD"),
            ("POST", "/v1/profiles", "GET, HEAD"),
            ("GET", "/v1/reload", "POST"),
            ("GET", "/v1/profiles/all/selftest", "POST"),
            ("PATCH", "/v1/profiles/all/mr/r", "GET, HEAD"),
            ("DELETE", "/v1/profiles/all/qp/q0", "GET, HEAD, PATCH"),
            ("PUT", "/v1/openapi.json", "GET, HEAD"),
            ("POST", "/metrics", "GET, HEAD")):
        status, headers, data = call(d, method, path,
                                     {} if method != "GET" else None)
        assert status == 405, (method, path, status)
        assert headers["Allow"] == allow, (method, path, headers)
        ck.check(method, None, status, headers, data, f"{method} {path}")

    # 401 (a token is set, none or a wrong one given).
    for method, path, template, body in (
            ("POST", "/v1/reload", "/v1/reload", {}),
            ("PATCH", "/v1/profiles/all/qp/q0",
             "/v1/profiles/{profile}/qp/{name}", {"state": "rts"}),
            ("POST", "/v1/profiles/all/selftest",
             "/v1/profiles/{profile}/selftest", {"a": "q0", "b": "q1"})):
        ex(method, path, template, 401, body, token=False)
        ex(method, path, template, 401, body, token="wrong")

    # 400: bodies.
    ex("POST", "/v1/reload", "/v1/reload", 400, {"force": 1})
    ex("POST", "/v1/reload", "/v1/reload", 400, raw=b"hello")
    ex("POST", "/v1/reload", "/v1/reload", 400, raw=b"[]")
    ex("PATCH", "/v1/profiles/all/qp/q0", "/v1/profiles/{profile}/qp/{name}",
       400, {"state": "bogus"})
    ex("PATCH", "/v1/profiles/all/qp/q0", "/v1/profiles/{profile}/qp/{name}",
       400, {"state": "rts", "path": {"nope": 1}})
    ex("POST", "/v1/profiles/all/selftest",
       "/v1/profiles/{profile}/selftest", 400, {"a": "q0"})

    # 409: not ready (failed on rxe), and a reload that would remove all.
    ex("PATCH", "/v1/profiles/all/qp/xs", "/v1/profiles/{profile}/qp/{name}",
       409, {"state": "rts"})
    ex("GET", "/v1/profiles/all/qp/xs/endpoint",
       "/v1/profiles/{profile}/qp/{name}/endpoint", 409)
    ex("POST", "/v1/profiles/all/selftest",
       "/v1/profiles/{profile}/selftest", 409, {"a": "q0", "b": "xr"})
    conf = d.conf.read_text()
    d.conf.write_text(conf[:conf.index("profiles = (")])
    ex("POST", "/v1/reload", "/v1/reload", 409, {})

    # 422: a configuration with errors; nothing changes.
    d.conf.write_text(conf.replace('pd = "a"; memory = "m";',
                                   'pd = "nope"; memory = "m";'))
    err = ex("POST", "/v1/reload", "/v1/reload", 422, {})
    assert err["error"]["code"] == "config_invalid"
    assert err["error"]["errors"]
    d.conf.write_text(conf)

    # 413: a GET with a body, a body too large.
    ex("GET", "/v1/health", "/v1/health", 413, raw=b"{}")
    ex("GET", "/v1/profiles/all", "/v1/profiles/{profile}", 413, raw=b"{}")
    ex("POST", "/v1/reload", "/v1/reload", 413, raw=b" " * (100 * 1024))

    # HEAD answers every GET, without a body.
    status, headers, data = call(d, "HEAD", "/v1/openapi.json")
    assert status == 200 and data == b""
    assert headers["Content-Type"] == "application/json"

    # 403: changes over REST are off without a token file.
    d2 = no_token_daemon(rdmad, tmp_path)
    for method, path, template, body in (
            ("POST", "/v1/reload", "/v1/reload", {}),
            ("PATCH", "/v1/profiles/p/qp/q", "/v1/profiles/{profile}/qp/{name}",
             {"state": "rts"}),
            ("POST", "/v1/profiles/p/selftest",
             "/v1/profiles/{profile}/selftest", {"a": "x", "b": "y"})):
        status, headers, data = call(d2, method, path, body, token=False)
        assert status == 403, (method, path, status)
        ck.check(method, template, status, headers, data, f"{method} {path}")
    c.close()

    # Every operation of the document was seen succeeding, and every
    # error status this test can cause on rxe was seen where documented.
    ops = {(m, p) for p, item in doc["paths"].items() for m in item
           if m in METHODS}
    ok = {(m, p) for m, p, s in ck.seen if s == 200}
    # A migration succeeds only on an InfiniBand port (RoCE takes no
    # alternate path): tests/hw/test_apm_hw.py; here its errors were seen.
    hw_only = {("post", "/v1/profiles/{profile}/qp/{name}/migrate")}
    assert hw_only <= {(m, p) for m, p, _ in ck.seen}
    assert ops - hw_only == ok, (ops - hw_only) ^ ok
    statuses = {s for _, _, s in ck.seen}
    assert {200, 400, 401, 403, 404, 409, 413, 422} <= statuses


def test_document_is_shipped():
    """Installed by make install and the rdmad package, and referenced."""
    assert "$(DATADIR)/rdmad/openapi.json" in (ROOT / "Makefile").read_text()
    assert "usr/share/rdmad/openapi.json" in \
        (ROOT / "debian" / "rdmad.install").read_text().split()
    assert "openapi.json" in (ROOT / "man" / "rdmad.8").read_text()
    assert "openapi.json" in (ROOT / "README.md").read_text()
