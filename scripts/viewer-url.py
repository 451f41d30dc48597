#!/usr/bin/env python3
"""Prints the viewer's address with a fresh token: what a browser needs to watch and paint the
demo store on a gateway that requires tokens (deploy/compose.yaml does).

The token is an HS256 JWT signed with RECEPTIONIST_TOKEN_SECRET (the gateway's
`--token-secret`), granting reads of every store and topic and writes to the models of the
stores named by --write (the viewer paints with it). Standard library only.

Usage: RECEPTIONIST_TOKEN_SECRET=… scripts/viewer-url.py [--base URL] [--write STORE …] [--hours N]
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import sys
import time
import urllib.parse


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def token(secret: str, claims: dict) -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(signature)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:8080", help="the gateway (or its balancer) as the browser reaches it")
    parser.add_argument("--write", nargs="*", default=["tiles"], help="stores the viewer may paint (default: tiles)")
    parser.add_argument("--hours", type=float, default=8, help="how long the token lasts")
    parser.add_argument("--store", default="tiles", help="the store the viewer opens")
    args = parser.parse_args()
    secret = os.environ.get("RECEPTIONIST_TOKEN_SECRET")
    if not secret:
        sys.exit("set RECEPTIONIST_TOKEN_SECRET to the gateway's --token-secret")
    claims = {"sub": "viewer", "exp": int(time.time() + args.hours * 3600),
              "stores": ["*"], "topics": ["*"], "presence": ["*"], "write": args.write}
    query = urllib.parse.urlencode({"store": args.store, "token": token(secret, claims)})
    print(f"{args.base.rstrip('/')}/?{query}")


if __name__ == "__main__":
    main()
