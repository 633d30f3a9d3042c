"""A real registry on loopback for the lock tests, and tiny OCI images pushed into it.

The registry is Debian's `docker-registry` (CNCF distribution 2.8, binary /usr/bin/docker-registry,
`docker-registry serve CONFIG.yml`), on 127.0.0.1 at a free port with a temporary storage directory,
started and stopped inside the test run. Optional authentication, as real registries do it:
- "basic": distribution's htpasswd backend (bcrypt entries from `htpasswd -B`, or python bcrypt);
- "token": distribution's token backend, with a token server in this process that checks Basic
  credentials and issues RS256 JWTs (signed by `openssl dgst`), so skopeo does the Bearer dance
  (401 with WWW-Authenticate: Bearer realm=…, then a token request) that nvcr.io and Docker Hub use.
Images are built with umoci (init, new, unpack, write a file, repack; `umoci config` sets the
architecture) and pushed with `skopeo copy`; an index of several platforms is written into the OCI
layout and pushed with `skopeo copy --all`.

.ci/install-registry.sh installs the binaries. Missing ones skip these tests, and fail them under
CI=true, where everything must run.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

BINARIES = ("docker-registry", "skopeo", "umoci")
START_TIMEOUT_S = 15
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def require(*binaries: str) -> None:
    """Skip (fail under CI=true) unless every binary is on PATH."""
    missing = [name for name in binaries if shutil.which(name) is None]
    if not missing:
        return
    message = f"not installed: {', '.join(missing)} (run .ci/install-registry.sh)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def run(*argv: str, cwd: Path | None = None) -> str:
    """Run a tool; its stdout, or an assertion error with its stderr."""
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}"
    return done.stdout


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _htpasswd_line(user: str, password: str) -> str:
    if shutil.which("htpasswd"):
        return run("htpasswd", "-Bbn", user, password).strip()
    try:
        import bcrypt  # type: ignore[import-not-found]
    except ImportError:
        require("htpasswd")  # skips, or fails under CI
        raise
    return f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt()).decode()}"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    """distribution's token protocol: GET /token?service=…&scope=… with Basic credentials -> {"token": JWT}."""

    def __init__(self, directory: Path, user: str, password: str, service: str, issuer: str) -> None:
        self.key, self.cert = directory / "token.key", directory / "token.pem"
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(self.key),
            "-out", str(self.cert), "-days", "2", "-subj", "/CN=megatron-compile test token issuer")
        der = subprocess.run(["openssl", "x509", "-in", str(self.cert), "-outform", "DER"],
                             capture_output=True, check=True).stdout
        self.x5c = base64.b64encode(der).decode()
        self.user, self.password, self.service, self.issuer = user, password, service, issuer
        self.requests: list[str] = []
        server = self
        expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                server.requests.append(self.path)
                if self.headers.get("Authorization") != expected:
                    self._answer(401, {"errors": [{"code": "UNAUTHORIZED", "message": "bad credentials"}]})
                    return
                scopes = " ".join(query.get("scope", [])).split()
                self._answer(200, {"token": server.sign(scopes), "expires_in": 300})

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.realm = f"http://127.0.0.1:{self.httpd.server_address[1]}/token"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def sign(self, scopes: list[str]) -> str:
        """An RS256 JWT granting every action asked for (the credentials were checked already)."""
        access = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.x5c]}
        claims = {"iss": self.issuer, "sub": self.user, "aud": self.service, "exp": now + 300,
                  "nbf": now - 10, "iat": now, "jti": uuid.uuid4().hex, "access": access}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)], input=signing_input.encode(),
                                   capture_output=True, check=True, timeout=30).stdout
        return f"{signing_input}.{_b64url(signature)}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Registry:
    """A running docker-registry on 127.0.0.1:PORT; `auth` is None, "basic" or "token"."""

    user = "alice"
    password = "s3cret-registry-pass"

    def __init__(self, directory: Path, auth: str | None = None) -> None:
        require(*BINARIES)
        self.directory = directory
        self.auth = auth
        self.token: TokenServer | None = None
        self.policy = directory / "policy.json"
        self.policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}]}))
        self.authfile: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._start()

    def _config(self, port: int) -> str:
        lines = [
            "version: 0.1",
            "log:",
            "  level: error",
            "storage:",
            "  filesystem:",
            f"    rootdirectory: {self.directory / 'storage'}",
            "http:",
            f"  addr: 127.0.0.1:{port}",
            "  secret: megatron-compile-test",
        ]
        if self.auth == "basic":
            htpasswd = self.directory / "htpasswd"
            htpasswd.write_text(_htpasswd_line(self.user, self.password) + "\n")
            lines += ["auth:", "  htpasswd:", "    realm: megatron-compile-test", f"    path: {htpasswd}"]
        elif self.auth == "token":
            require("openssl")
            self.token = TokenServer(self.directory, self.user, self.password, "megatron-compile-test", "test-issuer")
            lines += ["auth:", "  token:", f"    realm: {self.token.realm}", "    service: megatron-compile-test",
                      "    issuer: test-issuer", f"    rootcertbundle: {self.token.cert}"]
        return "\n".join(lines) + "\n"

    def _start(self) -> None:
        for _attempt in range(3):  # a free port can be taken between choosing and binding it
            port = free_port()
            config = self.directory / "config.yml"
            config.write_text(self._config(port))
            log = open(self.directory / "registry.log", "wb")
            self.process = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=log)
            log.close()
            if self._wait(port):
                self.host = f"127.0.0.1:{port}"
                if self.auth:
                    self.authfile = self.write_authfile(self.directory / "auth.json", self.password)
                return
            self.stop()
        raise AssertionError(f"docker-registry did not start: {(self.directory / 'registry.log').read_text()}")

    def _wait(self, port: int) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    def write_authfile(self, path: Path, password: str) -> Path:
        """A containers-auth.json for this registry (the form `skopeo login` writes)."""
        auth = base64.b64encode(f"{self.user}:{password}".encode()).decode()
        path.write_text(json.dumps({"auths": {self.host: {"auth": auth}}}))
        return path

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self.token is not None:
            self.token.stop()
            self.token = None

    # -- images --------------------------------------------------------------------------------

    def _layout(self) -> Path:
        layout = self.directory / f"oci-{uuid.uuid4().hex[:8]}"
        run("umoci", "init", "--layout", str(layout))
        return layout

    def _build(self, layout: Path, tag: str, content: str, architecture: str, variant: str | None = None) -> None:
        """One image in the layout: a file /megatron-compile-test holding `content`, for linux/ARCH."""
        image = f"{layout}:{tag}"
        bundle = layout.parent / f"{layout.name}-{tag}-bundle"
        run("umoci", "new", "--image", image)
        run("umoci", "unpack", "--rootless", "--image", image, str(bundle))
        (bundle / "rootfs" / "megatron-compile-test").write_text(content)
        run("umoci", "repack", "--image", image, str(bundle))
        shutil.rmtree(bundle)
        args = ["umoci", "config", "--image", image, "--os", "linux", "--architecture", architecture]
        run(*args)
        if variant:
            self._set_variant(layout, tag, variant)

    def _set_variant(self, layout: Path, tag: str, variant: str) -> None:
        # umoci 0.4.7 has no --variant: rewrite the config blob and its manifest in the layout.
        entry = self._descriptor(layout, tag)
        manifest = json.loads(self._blob(layout, entry["digest"]))
        config = json.loads(self._blob(layout, manifest["config"]["digest"]))
        config["variant"] = variant
        manifest["config"] = {**manifest["config"], **self._put(layout, json.dumps(config).encode())}
        new = self._put(layout, json.dumps(manifest).encode())
        index = json.loads((layout / "index.json").read_text())
        for item in index["manifests"]:
            if item is not None and item.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
                item.update(new)
        (layout / "index.json").write_text(json.dumps(index))

    @staticmethod
    def _blob(layout: Path, digest: str) -> bytes:
        return (layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes()

    @staticmethod
    def _put(layout: Path, data: bytes) -> dict:
        digest = hashlib.sha256(data).hexdigest()
        (layout / "blobs" / "sha256" / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    @staticmethod
    def _descriptor(layout: Path, tag: str) -> dict:
        index = json.loads((layout / "index.json").read_text())
        for item in index["manifests"]:
            if item.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
                return item
        raise AssertionError(f"{tag} is not in {layout}")

    def _copy(self, source: str, repo_tag: str, *extra: str) -> str:
        """skopeo copy into this registry; the digest of the manifest it wrote."""
        digestfile = self.directory / f"digest-{uuid.uuid4().hex[:8]}"
        argv = ["skopeo", "--policy", str(self.policy), "copy", "--quiet", "--dest-tls-verify=false",
                "--digestfile", str(digestfile), *extra]
        if self.authfile is not None:
            argv += ["--dest-authfile", str(self.authfile)]
        run(*argv, source, f"docker://{self.host}/{repo_tag}")
        return digestfile.read_text().strip()

    def push(self, repo_tag: str, content: str, architecture: str = "amd64") -> str:
        """Build a one-layer image holding `content` and push it as ns/repo:tag; its manifest digest."""
        layout = self._layout()
        self._build(layout, "image", content, architecture)
        return self._copy(f"oci:{layout}:image", repo_tag)

    def push_derived(self, base_repo_tag: str, repo_tag: str, content: str) -> str:
        """Pull base_repo_tag, add a layer holding `content` on top (as regctl image mod does), push as repo_tag."""
        layout = self._layout()
        source = ["skopeo", "--policy", str(self.policy), "copy", "--quiet", "--src-tls-verify=false"]
        if self.authfile is not None:
            source += ["--src-authfile", str(self.authfile)]
        run(*source, f"docker://{self.host}/{base_repo_tag}", f"oci:{layout}:image")
        image = f"{layout}:image"
        bundle = layout.parent / f"{layout.name}-bundle"
        run("umoci", "unpack", "--rootless", "--image", image, str(bundle))
        (bundle / "rootfs" / "megatron-compile-derived").write_text(content)
        run("umoci", "repack", "--image", image, str(bundle))
        shutil.rmtree(bundle)
        return self._copy(f"oci:{layout}:image", repo_tag)

    def push_index(self, repo_tag: str, content: str, platforms: list[str]) -> tuple[str, dict[str, str]]:
        """Push an OCI index with one image per os/arch[/variant]: (index digest, {platform: manifest digest})."""
        layout = self._layout()
        entries = []
        for number, platform in enumerate(platforms):
            os_name, architecture, *variant = platform.split("/")
            tag = f"p{number}"
            self._build(layout, tag, f"{content} {platform}", architecture, variant[0] if variant else None)
            descriptor = self._descriptor(layout, tag)
            entry_platform = {"architecture": architecture, "os": os_name, **({"variant": variant[0]} if variant else {})}
            entries.append({"mediaType": descriptor["mediaType"], "digest": descriptor["digest"],
                            "size": descriptor["size"], "platform": entry_platform})
        index_blob = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()
        ref = self._put(layout, index_blob)
        index = json.loads((layout / "index.json").read_text())
        index["manifests"].append({"mediaType": OCI_INDEX, **ref,
                                   "annotations": {"org.opencontainers.image.ref.name": "multi"}})
        (layout / "index.json").write_text(json.dumps(index))
        pushed = self._copy(f"oci:{layout}:multi", repo_tag, "--all")
        return pushed, {platform: entry["digest"] for platform, entry in zip(platforms, entries)}

    def inspect_digest(self, reference: str) -> str:
        """skopeo's own idea of a reference's digest (`skopeo inspect --format {{.Digest}}`)."""
        argv = ["skopeo", "inspect", "--tls-verify=false", "--format", "{{.Digest}}"]
        if self.authfile is not None:
            argv += ["--authfile", str(self.authfile)]
        return run(*argv, f"docker://{reference}").strip()


def registry_fixture(tmp_path_factory: pytest.TempPathFactory, auth: str | None) -> Iterator[Registry]:
    """Start a registry for a test module and stop it afterwards, whatever the tests did."""
    registry = Registry(tmp_path_factory.mktemp(f"registry-{auth or 'open'}"), auth)
    try:
        yield registry
    finally:
        registry.stop()
