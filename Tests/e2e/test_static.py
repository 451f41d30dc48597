"""Static files served from the public directory."""

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import (
    RawConnection,
    ServerProcess,
    assert_json_error,
    assert_standard_headers,
    curl,
    http_client_request,
    http_request,
)

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) + b"\x00\r\n\x00"

# path inside the public directory -> (content, expected Content-Type)
FILES = {
    "index.html": (b"<!doctype html><title>Home</title><p>Welcome</p>\n", "text/html; charset=utf-8"),
    "style.css": (b"body { color: #333; }\n", "text/css; charset=utf-8"),
    "app.js": (b"console.log('receptionist');\n", "text/javascript; charset=utf-8"),
    "data.json": (b'{"answer": 42}\n', "application/json"),
    "pixel.png": (PNG_BYTES, "image/png"),
    "notes.txt": ("plain text \u2713\n".encode(), "text/plain; charset=utf-8"),
    "blob.xyz": (b"\x00\x01\x02unknown", "application/octet-stream"),
    "a/inner.txt": (b"nested file\n", "text/plain; charset=utf-8"),
    "hello world.txt": (b"spaced name\n", "text/plain; charset=utf-8"),
}

SECRET = b"secret outside the public directory\n"

# Hidden files a deploy leaves in a public directory: none is served. `.well-known` is (RFC 8615).
HIDDEN = [".env", ".git/config", "a/.secret.txt", "a/.cache/inner.txt"]
WELL_KNOWN = (".well-known/security.txt", b"Contact: mailto:security@example.com\n")


@dataclass
class Site:
    server: ServerProcess
    public: Path


@pytest.fixture(scope="module")
def site(tmp_path_factory, module_servers) -> Site:
    root = tmp_path_factory.mktemp("site")
    public = root / "public"
    for name, (content, _) in FILES.items():
        target = public / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    for name in HIDDEN:
        (public / name).parent.mkdir(parents=True, exist_ok=True)
        (public / name).write_bytes(SECRET)
    (public / WELL_KNOWN[0]).parent.mkdir(parents=True, exist_ok=True)
    (public / WELL_KNOWN[0]).write_bytes(WELL_KNOWN[1])
    # Targets a naive server could reach by escaping the public directory.
    (root / "x").write_bytes(SECRET)
    (root / "outside").mkdir()
    (root / "outside" / "secret.txt").write_bytes(SECRET)
    os.symlink("../outside/secret.txt", public / "relative-link.txt")
    os.symlink(root / "outside" / "secret.txt", public / "absolute-link.txt")
    os.symlink("../outside", public / "linked-dir")
    os.symlink("../../outside/secret.txt", public / "a" / "nested-link.txt")
    return Site(module_servers(public=public), public)


def normalized_type(value):
    return "".join((value or "").split()).lower()


def etag_of(site: Site, path: str) -> str:
    resp = http_client_request(site.server.port, "GET", path)
    assert resp.status == 200
    return resp.header("ETag")


# ---- Content and headers -----------------------------------------------

@pytest.mark.parametrize("name", list(FILES))
def test_files_are_served_with_content_type(site, name):
    content, content_type = FILES[name]
    resp = http_client_request(site.server.port, "GET", "/" + name.replace(" ", "%20"))
    assert resp.status == 200, resp.body
    assert resp.body == content
    assert normalized_type(resp.header("Content-Type")) == normalized_type(content_type)
    assert resp.header("Content-Length") == str(len(content))
    assert_standard_headers(resp)


@pytest.mark.parametrize("fetch", ["http.client", "curl"])
def test_root_serves_index_html(site, fetch):
    port = site.server.port
    resp = http_client_request(port, "GET", "/") if fetch == "http.client" else curl(port, "/")
    assert resp.status == 200
    assert resp.body == FILES["index.html"][0]
    assert normalized_type(resp.header("Content-Type")) == "text/html;charset=utf-8"


def test_static_responses_carry_cache_headers(site):
    first = http_client_request(site.server.port, "GET", "/style.css")
    second = http_client_request(site.server.port, "GET", "/style.css")
    etag = first.header("ETag")
    assert etag and len(etag) > 2 and etag.startswith('"') and etag.endswith('"'), etag
    assert second.header("ETag") == etag, "ETag must be stable for unchanged content"
    assert (first.header("Cache-Control") or "").replace(" ", "").lower() == "no-cache"


def test_query_string_is_not_part_of_the_path(site):
    resp = http_client_request(site.server.port, "GET", "/style.css?v=123")
    assert resp.status == 200
    assert resp.body == FILES["style.css"][0]


def test_head_on_static_file_matches_get(site):
    with RawConnection(site.server.port) as conn:
        conn.send(http_request("HEAD", "/pixel.png"))
        head = conn.read_response("HEAD")
        conn.send(http_request("GET", "/pixel.png"))
        get = conn.read_response()
    assert head.status == get.status == 200
    assert get.body == PNG_BYTES
    for name in ("Content-Length", "Content-Type", "ETag", "Cache-Control"):
        assert head.header(name) == get.header(name), name


def test_missing_file_is_json_404(site):
    assert_json_error(http_client_request(site.server.port, "GET", "/nope.css"), 404, "not_found")
    assert_json_error(curl(site.server.port, "/a/nope.txt"), 404, "not_found")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
@pytest.mark.parametrize("path", ["/", "/style.css"])
def test_other_methods_on_static_paths_are_405(site, method, path):
    with RawConnection(site.server.port) as conn:
        conn.send(http_request(method, path, body=b"payload"))
        assert_json_error(conn.read_response(), 405, "method_not_allowed")
        conn.send(http_request("GET", path))
        assert conn.read_response().status == 200


# ---- Conditional requests ----------------------------------------------

@pytest.mark.parametrize("form", ["exact", "star", "list", "weak"])
def test_if_none_match_gives_304(site, form):
    etag = etag_of(site, "/app.js")
    value = {"exact": etag, "star": "*", "list": f'"not-it", {etag}, "other"', "weak": f"W/{etag}"}[form]
    with RawConnection(site.server.port) as conn:
        conn.send(http_request("GET", "/app.js", {"If-None-Match": value}))
        resp = conn.read_response()
        assert resp.status == 304
        assert resp.header("ETag") == etag
        assert resp.header("Date") and resp.header("Connection")
        assert resp.header("Content-Length") is None, resp.headers
        # Any body bytes after the 304 head would corrupt the next response.
        conn.send(http_request("GET", "/healthz"))
        assert conn.read_response().json() == {"status": "ok"}


def test_if_none_match_on_head_gives_304(site):
    etag = etag_of(site, "/data.json")
    with RawConnection(site.server.port) as conn:
        conn.send(http_request("HEAD", "/data.json", {"If-None-Match": etag}))
        resp = conn.read_response("HEAD")
        assert resp.status == 304
        assert resp.header("ETag") == etag


def test_if_none_match_mismatch_gives_full_body(site):
    resp = http_client_request(site.server.port, "GET", "/app.js", {"If-None-Match": '"something-else"'})
    assert resp.status == 200
    assert resp.body == FILES["app.js"][0]


def test_etag_from_one_file_does_not_match_another(site):
    resp = http_client_request(site.server.port, "GET", "/notes.txt",
                               {"If-None-Match": etag_of(site, "/style.css")})
    assert resp.status == 200
    assert resp.body == FILES["notes.txt"][0]


def test_if_none_match_via_curl(site):
    etag = etag_of(site, "/style.css")
    resp = curl(site.server.port, "/style.css", "--header", f"If-None-Match: {etag}")
    assert resp.status == 304
    assert resp.body == b""
    assert resp.header("ETag") == etag


# ---- Path safety -------------------------------------------------------

TRAVERSALS = [
    "/../x",
    "/%2e%2e/x",
    "/%2E%2E/x",
    "/.%2e/x",
    "/a/%2E%2E/%2e%2e/x",
    "/a/../../x",
    "/a/../index.html",
    "/a%00b",
    "/index.html%00.txt",
    "/..%2fx",
    "/%2e%2e%2fx",
    "/a/..%2f..%2fx",
    "/a%2f..%2f..%2fx",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_traversal_is_rejected_over_raw_socket(site, path):
    with RawConnection(site.server.port) as conn:
        conn.send(http_request("GET", path))
        resp = conn.read_response()
        assert SECRET not in resp.body
        assert_json_error(resp, 400, "bad_request")
        assert resp.connection() == "close"
        conn.expect_closed()


@pytest.mark.parametrize("path", TRAVERSALS)
def test_traversal_is_rejected_via_curl(site, path):
    resp = curl(site.server.port, path, "--path-as-is")
    assert SECRET not in resp.body
    assert_json_error(resp, 400, "bad_request")


@pytest.mark.parametrize("path", [
    "/relative-link.txt",
    "/absolute-link.txt",
    "/linked-dir/secret.txt",
    "/a/nested-link.txt",
])
def test_symlinks_leaving_public_dir_are_not_served(site, path):
    resp = http_client_request(site.server.port, "GET", path)
    assert SECRET not in resp.body
    assert_json_error(resp, 404, "not_found")


@pytest.mark.parametrize("name", HIDDEN)
def test_hidden_files_are_not_served(site, name):
    resp = http_client_request(site.server.port, "GET", "/" + name)
    assert SECRET not in resp.body
    assert_json_error(resp, 404, "not_found")


def test_well_known_files_are_served(site):
    resp = http_client_request(site.server.port, "GET", "/" + WELL_KNOWN[0])
    assert resp.status == 200
    assert resp.body == WELL_KNOWN[1]
