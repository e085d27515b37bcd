#!/usr/bin/python3
"""A real S3 server for the remote tier: scripts/rgw.sh starts a one-node
Ceph RADOS Gateway, and requests signed by Amphora's SigV4 code
(amphora_sigv4_sign) are accepted by it -- keys that need encoding, query
parameters, a range read, a put-if-absent (If-None-Match: *) answered 412
the second time -- while a request signed with the wrong secret is refused.
boto3 (Debian's python3-boto3) creates the bucket and reads back what our
requests wrote.

Run as:
    /usr/bin/python3 tests/python/test_rgw.py --signer build/bin/amphora_sigv4_sign --rgw scripts/rgw.sh
"""

import datetime
import hashlib
import http.client
import os
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

SIGNER = ""
RGW = ""
BUCKET = "amphora-test"


class RgwTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="amphora-rgw-")
        os.rmdir(cls.dir)  # rgw.sh makes it
        out = subprocess.run([RGW, "up", cls.dir], capture_output=True, text=True, timeout=180)
        if out.returncode != 0:
            raise RuntimeError(f"rgw.sh up failed: {out.stderr}")
        cls.env = dict(line.split("=", 1) for line in out.stdout.split())
        cls.endpoint = urllib.parse.urlparse(cls.env["AMPHORA_TEST_S3_ENDPOINT"])
        import boto3
        import botocore.config
        cls.s3 = boto3.client("s3", endpoint_url=cls.env["AMPHORA_TEST_S3_ENDPOINT"],
                              aws_access_key_id=cls.env["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=cls.env["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1",
                              config=botocore.config.Config(s3={"addressing_style": "path"}))
        cls.s3.create_bucket(Bucket=BUCKET)

    @classmethod
    def tearDownClass(cls):
        cls.s3.close()
        subprocess.run([RGW, "down", cls.dir], timeout=60)

    def send(self, method, path, body=b"", query=(), headers=(), secret=None):
        """Sends a request signed by amphora_sigv4_sign; returns (status, body)."""
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        payload = hashlib.sha256(body).hexdigest()
        host = f"{self.endpoint.hostname}:{self.endpoint.port}"
        signed = [("host", host), ("x-amz-date", now), ("x-amz-content-sha256", payload), *headers]
        env = dict(os.environ, AWS_ACCESS_KEY_ID=self.env["AWS_ACCESS_KEY_ID"],
                   AWS_SECRET_ACCESS_KEY=secret or self.env["AWS_SECRET_ACCESS_KEY"])
        env.pop("AWS_SESSION_TOKEN", None)
        env.pop("AWS_PROFILE", None)
        args = [SIGNER, method, path, now, payload] + [f"q:{n}={v}" for n, v in query] + \
               [f"h:{n}:{v}" for n, v in signed]
        authorization = subprocess.run(args, capture_output=True, text=True, check=True, env=env).stdout.strip()
        target = urllib.parse.quote(path, safe="/-_.~")
        if query:
            target += "?" + "&".join(f"{urllib.parse.quote(n, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
                                     for n, v in query)
        conn = http.client.HTTPConnection(self.endpoint.hostname, self.endpoint.port, timeout=30)
        try:
            conn.request(method, target, body=body,
                         headers={**{n: v for n, v in signed if n != "host"}, "Authorization": authorization})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def test_signed_requests_are_accepted(self):
        key = "dir/file with spaces+plus~tilde$dollar.bin"
        status, _ = self.send("PUT", f"/{BUCKET}/{key}", b"0123456789")
        self.assertEqual(status, 200)
        self.assertEqual(self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read(), b"0123456789")
        status, body = self.send("GET", f"/{BUCKET}/{key}", headers=[("range", "bytes=2-5")])
        self.assertEqual((status, body), (206, b"2345"))
        status, body = self.send("GET", f"/{BUCKET}", query=[("prefix", "dir/"), ("list-type", "2")])
        self.assertEqual(status, 200)
        self.assertIn(b"file with spaces+plus~tilde$dollar.bin", body)

    def test_put_if_absent_answers_412_once_the_key_exists(self):
        key = "names/model/1.json"
        first, _ = self.send("PUT", f"/{BUCKET}/{key}", b'{"v": 1}', headers=[("if-none-match", "*")])
        second, _ = self.send("PUT", f"/{BUCKET}/{key}", b'{"v": 2}', headers=[("if-none-match", "*")])
        self.assertEqual((first, second), (200, 412))
        self.assertEqual(self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read(), b'{"v": 1}')

    def test_a_wrong_secret_is_refused(self):
        status, body = self.send("GET", f"/{BUCKET}", secret="not-the-secret")
        self.assertEqual(status, 403)
        self.assertIn(b"SignatureDoesNotMatch", body)


def main():
    global SIGNER, RGW
    args = sys.argv[1:]
    for flag in ("--signer", "--rgw"):
        if flag in args:
            i = args.index(flag)
            value = os.path.abspath(args[i + 1])
            del args[i:i + 2]
            if flag == "--signer":
                SIGNER = value
            else:
                RGW = value
    if not SIGNER or not RGW:
        sys.exit("usage: test_rgw.py --signer PATH --rgw scripts/rgw.sh")
    unittest.main(argv=[sys.argv[0]] + args)


if __name__ == "__main__":
    main()
