"""Token management on one store (SPEC §11): create, list, disable, and authenticate
a secret. :class:`erstwhile.service.Service` hands it out as ``service.access``; the
capability checks in front of the service are :mod:`erstwhile.access`'s."""

from __future__ import annotations

import secrets
from collections.abc import Iterable

from erstwhile.domain.auth import Token, capabilities_for, digest, new_secret
from erstwhile.domain.errors import InvalidInput, NotFound, Unauthenticated
from erstwhile.domain.records import validate_namespace
from erstwhile.domain.time import now_us
from erstwhile.store.base import Store

TOKEN_ID_PREFIX = "tok_"


class Access:
    """Token management on one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create_token(
        self,
        *,
        name: str | None = None,
        read_only: bool = False,
        admin: bool = False,
        namespaces: Iterable[str] = (),
    ) -> tuple[Token, str]:
        """Creates a token; returns it and its secret, which is not kept anywhere."""
        if read_only and admin:
            raise InvalidInput("a token cannot be both read-only and admin; choose one")
        scope = frozenset(validate_namespace(ns) for ns in namespaces)
        token_id = TOKEN_ID_PREFIX + secrets.token_hex(6)
        name = (name or "").strip() or token_id
        secret = new_secret()
        token = Token(
            id=token_id,
            name=name,
            digest=digest(secret),
            capabilities=capabilities_for(read_only=read_only, admin=admin),
            namespaces=scope,
            created_at=now_us(),
        )
        self.store.token_create(token)
        return token, secret

    def tokens(self) -> list[Token]:
        return self.store.tokens()

    def disable(self, token_id: str) -> None:
        if not self.store.token_disable(token_id):
            raise NotFound(f"token {token_id!r} does not exist; `erstwhile token list` shows them")

    def authenticate(self, secret: str | None) -> Token:
        """The enabled token whose secret this is, or :class:`Unauthenticated`."""
        if not secret:
            raise Unauthenticated(
                "this server needs a token: send 'Authorization: Bearer <token>' "
                "(create one with `erstwhile token create`)"
            )
        token = self.store.token_by_digest(digest(secret))
        if token is None:
            raise Unauthenticated("the token is not known to this server")
        if token.disabled:
            raise Unauthenticated(f"token {token.id} has been disabled")
        return token
