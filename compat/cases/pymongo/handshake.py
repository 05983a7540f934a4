"""pymongo connects, negotiates each wire compressor, and runs ping through it.

Source: https://pymongo.readthedocs.io/en/stable/api/pymongo/mongo_client.html (compressors)
"""
import os

import pymongo
from pymongo.errors import OperationFailure

URI = os.environ["EBB_URI"]


def compressed_bytes(client, name):
    status = client.admin.command("serverStatus")
    return status["network"]["compression"][name]["decompressor"]["bytesIn"]


for compressor in [None, "snappy", "zlib", "zstd"]:
    kwargs = {"compressors": compressor} if compressor else {}
    with pymongo.MongoClient(URI, **kwargs) as client:
        assert client.admin.command("ping")["ok"] == 1.0
        hello = client.admin.command("hello")
        if compressor:
            assert hello.get("compression") == [compressor], hello
            before = compressed_bytes(client, compressor)
            for _ in range(5):
                client.admin.command("ping")
            after = compressed_bytes(client, compressor)
            assert after > before, f"{compressor}: no compressed traffic ({before} -> {after})"
        else:
            assert "compression" not in hello, hello
        assert client.server_info()["version"].count(".") == 2
    print(f"ping with compressor={compressor}: ok")

with pymongo.MongoClient(URI) as client:
    try:
        client.admin.command("frobnicate")
        raise AssertionError("unknown command succeeded")
    except OperationFailure as e:
        assert e.code == 59, e.details
        assert e.details["codeName"] == "CommandNotFound", e.details
        assert "no such command: 'frobnicate'" in e.details["errmsg"], e.details
    assert client.admin.command("ping")["ok"] == 1.0
    assert client.list_database_names() == []
print("handshake.py: all checks passed")
# expect: handshake.py: all checks passed
