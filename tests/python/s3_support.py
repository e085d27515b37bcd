"""The S3 server a remote-tier test runs against (tests/with_rgw.sh sets
AMPHORA_TEST_S3_ENDPOINT, AMPHORA_TEST_S3_BUCKET and the test keys), and a
boto3 client for it, so a test can look at the bucket as another tool does."""

import os

ENDPOINT = os.environ.get("AMPHORA_TEST_S3_ENDPOINT", "")
BUCKET = os.environ.get("AMPHORA_TEST_S3_BUCKET", "amphora")


def require_gateway():
    if not ENDPOINT:
        raise RuntimeError("run under tests/with_rgw.sh: AMPHORA_TEST_S3_ENDPOINT is not set")


def s3_client():
    import boto3
    import botocore.config
    return boto3.client("s3", endpoint_url=ENDPOINT, aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1",
                        config=botocore.config.Config(s3={"addressing_style": "path"}))
