"""The gRPC adapter (SPEC §10): service ``erstwhile.semantic.v1.Semantic``.

    proto/erstwhile/semantic/v1/semantic.proto     the contract, in the repository
    proto/mindd/semantic/v1/semantic.proto         the earlier API's, served as an alias
    _generated/                                    their stubs (scripts/gen-proto)
    convert.py                                     messages ↔ domain, once each way
    status.py                                      error code → gRPC status, the table
    servicer.py                                    auth, one Caller call per RPC
    alias.py                                       the earlier API's path, answered by ours
    server.py                                      the server: health, reflection, stop

This package is the only code that imports the generated stubs; clients written in
Python may use them from here::

    from erstwhile.adapters.grpc import semantic_pb2, semantic_pb2_grpc
"""

from erstwhile.adapters.grpc._generated import semantic_pb2, semantic_pb2_grpc

__all__ = ["semantic_pb2", "semantic_pb2_grpc"]
