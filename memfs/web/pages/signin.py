"""Signing in and out of the Memory tab in a browser: ``/login`` and ``/logout``.

``GET /login`` shows a form with one field, "Token", and a double-submit
secret (the ``memfs_login`` cookie and the same value in the form; see
:mod:`memfs.web.sessions`). ``POST /login`` asks the sign-in throttle
(:mod:`memfs.core.signin`) first: a client over its failures gets 429 with
``Retry-After`` and its token is not looked at. A token the store does not
resolve is a failure: counted, audited (``sign-in-failed``) and answered 401
with the form again. A good one is audited (``sign-in``), clears the
client's failures, starts a session and sends the browser on (to ``next``
if it is a path of this site). ``POST /logout`` (a form with the session's
CSRF secret) ends the session.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from memfs.core.members import looks_like_token
from memfs.core.signin import SigninThrottle, Verdict, client_key, throttle_key
from memfs.web.pages.common import (
    SECURITY_HEADERS,
    SignedInPage,
    done,
    form_of,
    posted_form,
    render,
    sessions_of,
    store_of,
)
from memfs.web.sessions import LOGIN_COOKIE, SESSION_COOKIE, new_secret, same_secret
from memfs.web.signin_gate import ClientGate

HOME = "/map"


def _next(value: object) -> str:
    # Only a path of this site: never another origin (``//host``) or a scheme.
    if not isinstance(value, str) or not value.startswith("/") or value.startswith("//"):
        return HOME
    if "\\" in value or not all(c.isprintable() for c in value):
        return HOME
    return value


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def _login_form(
    request: Request, *, status: int = 200, error: str | None = None, retry_after: int = 0
) -> Response:
    secret = new_secret()
    headers = {"Retry-After": str(retry_after)} if retry_after else {}
    response = render(
        None,
        request,
        "login.html",
        status=status,
        headers=headers,
        login_secret=secret,
        next=_next(request.query_params.get("next")),
        error=error,
    )
    response.set_cookie(
        LOGIN_COOKIE,
        secret,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
        path="/login",
    )
    return response


def signin_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/login")
    async def login_page(request: Request) -> Response:
        return _login_form(request)

    @router.post("/login")
    async def login(request: Request) -> Response:
        throttle: SigninThrottle = request.app.state.memfs_throttle
        gate: ClientGate = request.app.state.memfs_signin_gate
        host = request.client.host if request.client else None
        client, counted = client_key(host), throttle_key(host)

        def refused(verdict: Verdict) -> Response:
            return _login_form(
                request,
                status=429,
                error=f"Too many failed sign-ins: try again in {verdict.retry_after} seconds.",
                retry_after=verdict.retry_after,
            )

        # Asked before the form is read (a throttled client's body is not),
        # and again before its token is: another try may have failed meanwhile.
        if not (verdict := throttle.check(counted)).allowed:
            return refused(verdict)
        form = await posted_form(request)
        if not same_secret(request.cookies.get(LOGIN_COOKIE, ""), form.get("login")):
            return _login_form(request, status=403, error="The sign-in form expired: try again.")
        token = form.get("token")
        token = token.strip() if isinstance(token, str) else ""
        store = store_of(request)
        async with gate.one_at_a_time(counted):
            if not (verdict := throttle.check(counted)).allowed:
                return refused(verdict)
            who = await store.resolve_token(token) if looks_like_token(token) else None
            after = throttle.failed(counted) if who is None else verdict
        if who is None:
            await store.record_signin(None, client=client)
            wait = "" if after.allowed else f" Try again in {after.retry_after} seconds."
            return _login_form(
                request,
                status=401,
                error="That token is unknown or revoked." + wait,
                retry_after=0 if after.allowed else after.retry_after,
            )
        await store.record_signin(who, client=client)
        session = sessions_of(request).start(token)
        response = RedirectResponse(
            _next(form.get("next")), status_code=303, headers=SECURITY_HEADERS
        )
        response.set_cookie(
            SESSION_COOKIE,
            session.id,
            httponly=True,
            samesite="strict",
            secure=_secure(request),
            path="/",
        )
        response.delete_cookie(LOGIN_COOKIE, path="/login")
        return response

    @router.post("/logout")
    async def logout(page: SignedInPage) -> Response:
        await form_of(page)
        sessions_of(page.request).end(page.session.id)
        response = done("/login", "signed-out")
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    @router.get("/")
    async def home(page: SignedInPage) -> Response:
        return RedirectResponse(HOME, status_code=303, headers=SECURITY_HEADERS)

    return router


__all__ = ["HOME", "signin_router"]
