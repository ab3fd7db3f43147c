"""Object-store settings: one set of ``storage_options`` (delta-rs's keys) made into what each reader and
writer takes, so that the table's own credentials, endpoint and region reach all of them.

* delta-rs takes the options as they are (`DeltaTableHandle`);
* pyarrow (footers, the extended-stats sidecar, staged-file listing) gets an ``S3FileSystem`` built from
  them (`arrow_filesystem`), where ``FileSystem.from_uri`` would read the environment only;
* Spark's Hadoop S3A connector gets per-bucket settings (``fs.s3a.bucket.<bucket>.*``, `hadoop_conf`), so
  tables in different buckets may use different endpoints and credentials in one session.

Only S3 (``s3://`` / ``s3a://``) options are translated; on Azure and GCS the Hadoop settings are passed
through ``spark.conf`` as the connector documents them (docs/CLUSTERS.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlparse

import pyarrow.fs as pafs

S3 = frozenset({"s3", "s3a"})


def scheme_of(uri: str) -> str:
    return urlparse(uri).scheme.lower() if "://" in uri else ""


def _options(options: Mapping[str, str]) -> dict[str, str]:
    return {k.upper(): str(v) for k, v in options.items()}


def _endpoint(options: Mapping[str, str]) -> str | None:
    return options.get("AWS_ENDPOINT_URL") or options.get("AWS_ENDPOINT") or options.get("ENDPOINT")


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def arrow_filesystem(uri: str, storage_options: Mapping[str, str]) -> tuple[pafs.FileSystem, str]:
    """pyarrow's file system for `uri` and the path of `uri` in it."""
    scheme = scheme_of(uri)
    if scheme not in S3:
        return pafs.FileSystem.from_uri(uri)
    options = _options(storage_options)
    parsed = urlparse(uri)
    root = f"{parsed.netloc}{parsed.path}".rstrip("/")
    endpoint = _endpoint(options)
    arguments: dict[str, object] = {}
    if endpoint:
        endpoint_url = urlparse(endpoint)
        arguments["endpoint_override"] = endpoint_url.netloc or endpoint
        arguments["scheme"] = endpoint_url.scheme or ("http" if _true(options.get("AWS_ALLOW_HTTP")) else "https")
    if options.get("AWS_ACCESS_KEY_ID"):
        arguments["access_key"] = options["AWS_ACCESS_KEY_ID"]
        arguments["secret_key"] = options.get("AWS_SECRET_ACCESS_KEY", "")
        if options.get("AWS_SESSION_TOKEN"):
            arguments["session_token"] = options["AWS_SESSION_TOKEN"]
    region = options.get("AWS_REGION") or options.get("AWS_DEFAULT_REGION")
    if region:
        arguments["region"] = region
    if not arguments:
        return pafs.FileSystem.from_uri("s3://" + root)  # the environment's credentials, as delta-rs reads them
    return pafs.S3FileSystem(**arguments), root


def hadoop_conf(uri: str, storage_options: Mapping[str, str]) -> dict[str, str]:
    """Spark settings that give Hadoop's S3A connector the options of the table at `uri`, for its bucket
    only. Empty for other stores; without options the connector's own credential chain decides."""
    if scheme_of(uri) not in S3:
        return {}
    options = _options(storage_options)
    prefix = f"spark.hadoop.fs.s3a.bucket.{urlparse(uri).netloc}."
    # S3A buffers uploads on local disk through a checksummed LocalFileSystem by default, which the
    # raw local file system the embedded session uses (no .crc files) is not: buffer off-heap instead
    conf: dict[str, str] = {prefix + "fast.upload.buffer": "bytebuffer"}
    endpoint = _endpoint(options)
    if endpoint:
        conf[prefix + "endpoint"] = endpoint
        conf[prefix + "connection.ssl.enabled"] = str(not endpoint.startswith("http://")).lower()
        if not _true(options.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")):
            conf[prefix + "path.style.access"] = "true"  # what S3-compatible endpoints serve
    for key, name in (("AWS_ACCESS_KEY_ID", "access.key"), ("AWS_SECRET_ACCESS_KEY", "secret.key")):
        if options.get(key):
            conf[prefix + name] = options[key]
    if options.get("AWS_SESSION_TOKEN"):
        conf[prefix + "session.token"] = options["AWS_SESSION_TOKEN"]
        conf[prefix + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    region = options.get("AWS_REGION") or options.get("AWS_DEFAULT_REGION")
    if region:
        conf[prefix + "endpoint.region"] = region
    return conf
