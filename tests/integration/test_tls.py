# SPDX-License-Identifier: MIT
"""REST over TLS (daemon.http.tls_cert / tls_key), and plain HTTP
refused on an address off the machine unless the operator says
`insecure = true`."""

import json
import subprocess

import pytest

from conftest import HEALTH, RDMAD, free_port

PROFILE = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = ( { name = "p"; device = "d0"; pd = ( { name = "a"; } ); } );
"""


@pytest.fixture
def cert(tmp_path):
    """A self-signed certificate for 127.0.0.1, and its key."""
    crt, key = tmp_path / "rdmad.crt", tmp_path / "rdmad.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec",
                    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(crt)],
                   check=True, capture_output=True)
    key.chmod(0o600)
    return crt, key


def curl(*args):
    return subprocess.run(["curl", "-sS", "--max-time", "20", *args],
                          capture_output=True, text=True)


def test_https_with_a_self_signed_certificate(rdmad, cert, tmp_path):
    crt, key = cert
    port = free_port()
    text = (f'daemon = {{ runtime_dir = "{tmp_path}"; http = {{ '
            f'listen = [ "127.0.0.1:{port}" ]; tls_cert = "{crt}"; '
            f'tls_key = "{key}"; }}; }};\n' + PROFILE)
    d = rdmad(text, wait=False)
    url = f"https://127.0.0.1:{port}"
    for _ in range(600):
        r = curl("--cacert", str(crt), url + "/v1/health")
        if r.returncode == 0:
            break
        assert d.proc.poll() is None, d.log()
        __import__("time").sleep(0.1)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == HEALTH
    assert "(HTTPS)" in d.log()
    r = curl("--cacert", str(crt), url + "/v1/profiles/p")
    assert r.returncode == 0 and json.loads(r.stdout)["name"] == "p"
    # Errors are JSON over TLS too.
    r = curl("--cacert", str(crt), url + "/v1/%ff")
    assert json.loads(r.stdout)["error"]["code"] == "not_found"
    # Without the CA, curl does not trust it; plain HTTP gets no answer.
    assert curl(url + "/v1/health").returncode != 0
    assert curl(f"http://127.0.0.1:{port}/v1/health").returncode != 0


def check(write_conf, text):
    path = write_conf(text)
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    return path, r


def test_plaintext_on_a_non_loopback_address_is_refused(write_conf,
                                                        tmp_path, cert):
    port = free_port()
    text = (f'daemon = {{\n  runtime_dir = "{tmp_path}";\n  http = {{\n'
            f'    listen = [ "127.0.0.1:{port}", "0.0.0.0:{port + 1}" ];\n'
            f'  }};\n}};\n' + PROFILE)
    path, r = check(write_conf, text)
    assert r.returncode == 78, r.stdout + r.stderr
    assert f"{path}:4: daemon.http: 'listen' = \"0.0.0.0:{port + 1}\" " \
           "is not a loopback address" in r.stderr
    # The same at start: nothing listens.
    r = subprocess.run([str(RDMAD), "-c", str(path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 78
    assert f"{path}:4:" in r.stderr

    # Loopback, IPv6 loopback and unix sockets need nothing.
    path, r = check(write_conf, text.replace(
        f'"0.0.0.0:{port + 1}"', f'"[::1]:{port + 1}", "unix:/run/x.sock"'))
    assert r.returncode == 0, r.stderr

    # The operator may say so ...
    path, r = check(write_conf, text.replace("  };\n}", "    insecure = "
                                             "true;\n  };\n}"))
    assert r.returncode == 0, r.stderr
    # ... or use TLS.
    crt, key = cert
    path, r = check(write_conf, text.replace(
        "  };\n}", f'    tls_cert = "{crt}"; tls_key = "{key}";\n  }};\n}}'))
    assert r.returncode == 0, r.stderr
    # A certificate needs its key.
    path, r = check(write_conf, text.replace(
        "  };\n}", f'    tls_cert = "{crt}";\n  }};\n}}'))
    assert r.returncode == 78
    assert "'tls_cert' and 'tls_key' go together" in r.stderr
