"""What every page of the Memory tab shares: who is signed in, rendering, forms, their CSRF check.

A page handler takes :data:`SignedInPage` (a :class:`Page`: the person as
the store holds them now, their :class:`~memfs.engine.acting.Acting`, and
their browser session's CSRF secret) and answers :func:`render` or
:func:`done`. A browser with no live session, or whose token no longer
resolves, is sent to ``/login`` (:class:`SignInRequired`). Every form post
is read by :func:`posted_form` (urlencoded, %-escaped UTF-8, else 400), and
a signed-in page's through :func:`form_of`, which refuses a missing or wrong
CSRF secret with 403 before anything of the form is acted on.

Errors on a page are pages too (``install_page_errors``): the JSON API under
``/api/v1`` keeps its RFC 9457 problems, everything else gets ``error.html``
with the same status. Every page answer carries a Content-Security-Policy
that allows nothing but memfs itself: no script, style or image of another
origin can load, and a form can post only here.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from memfs.api.control import problem, unescaped_text
from memfs.core.errors import BadRequest, MemfsError, NoIdentity, PermissionDenied
from memfs.core.members import Member
from memfs.core.models import Limits
from memfs.core.roles import allowed
from memfs.engine.acting import Acting, act_as
from memfs.stores.base import ManagedStore
from memfs.web.sessions import SESSION_COOKIE, BrowserSession, SessionTable, same_secret

API_PREFIX = "/api/v1"

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        # No page has a script or an image of its own (the Life chart is inline SVG).
        "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

# What a form post reports on the page it lands on (``?done=KEY``): a fixed
# set, so a link cannot make a memfs page say anything else.
DONE: Mapping[str, str] = {
    "approved": "Approved.",
    "rejected": "Rejected.",
    "edited": "Your edit is live.",
    "saved": "Saved.",
    "added": "Added.",
    "forgotten": "Forgotten (kept in history: it can be restored).",
    "restored": "Restored.",
    "review-set": "The space's review is set.",
    "opened": "Opened (this look is in the audit log).",
    "person-file-forgotten": "That file of the person is forgotten.",
    "person-forgotten": "This person's memory is forgotten.",
    "signed-out": "Signed out.",
}

# Pages in the navigation bar: (path, label, the act a role needs to see it).
NAV: tuple[tuple[str, str, str], ...] = (
    ("/map", "Memory map", "read"),
    ("/org", "Org memory", "read"),
    ("/review", "Review", "read"),
    ("/inbox", "Inbox", "read"),
    ("/people", "People", "open"),
)


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("memfs.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["path_url"] = lambda value: quote(str(value), safe="/")
    env.filters["seg_url"] = lambda value: quote(str(value), safe="")
    return env


TEMPLATES = _environment()


class SignInRequired(NoIdentity):
    """No live browser session: the browser is sent to ``/login``."""


@dataclass(frozen=True)
class Page:
    """A signed-in person on a page: who they are now, their hands, and their form secret."""

    who: Member
    me: Acting
    session: BrowserSession
    request: Request

    def may(self, act: str) -> bool:
        return allowed(self.who.role, act)


def sessions_of(request: Request) -> SessionTable:
    table: SessionTable = request.app.state.memfs_sessions
    return table


def store_of(request: Request) -> ManagedStore:
    store: ManagedStore = request.app.state.memfs_store
    return store


async def signed_in_page(request: Request) -> Page:
    sessions = sessions_of(request)
    session = sessions.get(request.cookies.get(SESSION_COOKIE))
    if session is None:
        raise SignInRequired("sign in to see this page")
    who = await store_of(request).resolve_token(session.token)
    if who is None:
        sessions.end(session.id)  # the token was revoked or its member removed
        raise SignInRequired("your token no longer signs in: sign in again")
    limits: Limits = request.app.state.memfs_limits
    me = act_as(store_of(request), who.id, who.role, org=who.org, limits=limits)
    return Page(who=who, me=me, session=session, request=request)


SignedInPage = Annotated[Page, Depends(signed_in_page)]


async def posted_form(request: Request) -> FormData:
    """The form posted to a page, once its text is known to be what was sent (else 400).

    Its text must be %-escaped UTF-8: Starlette decodes it with replacement,
    so a name sent as ``a%FF.md`` would be taken as ``a\ufffd.md``, a name
    nobody sent. A multipart body is refused whole: no page takes a file, and
    Starlette reads a part that is not UTF-8 as latin-1, another name again.
    The media type is read by the parser Starlette reads it with, so no
    spelling of it (case, spaces, parameters) is parsed there and missed here.
    """
    media_type, _ = parse_options_header(request.headers.get("content-type"))
    if media_type == b"multipart/form-data":
        raise BadRequest("memfs pages take forms as application/x-www-form-urlencoded only")
    if media_type == b"application/x-www-form-urlencoded":
        body = await request.body()
        # A byte past ASCII is never sent by a browser (it %-escapes them) and
        # Starlette reads it as latin-1: raw UTF-8 "é" would become "Ã©".
        if not body.isascii() or unescaped_text(body) is None:
            raise BadRequest("the form's text is not %-escaped UTF-8")
    return await request.form()


async def form_of(page: Page) -> FormData:
    """The posted form (:func:`posted_form`), once its CSRF secret matched the session's
    (else 403, nothing of it acted on)."""
    form = await posted_form(page.request)
    if not same_secret(page.session.csrf, form.get("csrf")):
        raise PermissionDenied("this form's CSRF token is missing or wrong: reload the page")
    return form


def field(form: FormData, name: str, *, default: str | None = None) -> str:
    """A text field of ``form``; ``BadRequest`` (400) if it is missing and has no default."""
    value = form.get(name, default)
    if not isinstance(value, str):
        raise BadRequest(f"the form needs a text field {name!r}")
    return value


def text_of(form: FormData, name: str) -> str:
    """A textarea's text. Browsers send every line break of a textarea as CRLF (the
    HTML form encoding), so CRLF is read back as the LF the file was shown with."""
    return field(form, name).replace("\r\n", "\n")


def fields(form: FormData, name: str) -> list[str]:
    return [value for value in form.getlist(name) if isinstance(value, str)]


def render(
    page: Page | None,
    request: Request,
    template: str,
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    done = request.query_params.get("done")
    body = TEMPLATES.get_template(template).render(
        page=page,
        who=None if page is None else page.who,
        csrf=None if page is None else page.session.csrf,
        nav=[] if page is None else [(p, label) for p, label, act in NAV if page.may(act)],
        here=request.url.path,
        done=DONE.get(done or ""),
        **context,
    )
    return HTMLResponse(body, status_code=status, headers={**SECURITY_HEADERS, **(headers or {})})


def done(path: str, key: str, **query: str) -> RedirectResponse:
    """After a form post: see the page ``path`` again (303), saying ``DONE[key]``."""
    assert key in DONE, key
    target = f"{path}?{urlencode({**query, 'done': key})}"
    return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)


def file_url(space: str, path: str) -> str:
    return f"/org/{quote(space, safe='')}/files/{quote(path, safe='/')}"


def _page_error(request: Request, status: int, error: str, detail: str) -> Response:
    title = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    return render(
        None, request, "error.html", status=status, title=title, error=error, detail=detail
    )


INTERNAL_DETAIL = "memfs failed to answer this; what went wrong is in the server's log"


def internal_error(scope: Scope, exc: Exception) -> Response:
    """What escaped a route, once logged: a 500 page (a problem under ``/api/v1``).

    It says nothing of the error itself: its text may name a file, a path
    on the server or a person, and this app is served to a network.
    """
    request = Request(scope)
    if _is_api(request):
        return problem(500, "InternalError", INTERNAL_DETAIL, MemfsError.exit_code)
    return _page_error(request, 500, "InternalError", INTERNAL_DETAIL)


def _is_api(request: Request) -> bool:
    return request.url.path == API_PREFIX or request.url.path.startswith(API_PREFIX + "/")


def install_page_errors(app: FastAPI) -> None:
    """Errors outside ``/api/v1`` answer as pages; inside it they stay problems."""

    async def delegate(previous: Any, request: Request, exc: Exception) -> Response:
        answer = previous(request, exc)
        if inspect.isawaitable(answer):
            answer = await answer
        assert isinstance(answer, Response)
        return answer

    is_api = _is_api

    previous_memfs = app.exception_handlers[MemfsError]
    previous_bad = app.exception_handlers[RequestValidationError]
    previous_http = app.exception_handlers[StarletteHTTPException]

    @app.exception_handler(MemfsError)
    async def _memfs_error(request: Request, exc: Exception) -> Response:
        if is_api(request):
            return await delegate(previous_memfs, request, exc)
        assert isinstance(exc, MemfsError)
        if isinstance(exc, SignInRequired):
            target = "/login"
            if request.method == "GET" and request.url.path not in ("/", "/login"):
                target += "?" + urlencode({"next": request.url.path})
            return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
        return _page_error(request, exc.http_status, type(exc).__name__, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: Exception) -> Response:
        if is_api(request):
            return await delegate(previous_bad, request, exc)
        return _page_error(request, 400, "BadRequest", "the form or address is not one we know")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: Exception) -> Response:
        if is_api(request):
            return await delegate(previous_http, request, exc)
        assert isinstance(exc, StarletteHTTPException)
        phrase = HTTPStatus(exc.status_code).phrase
        return _page_error(request, exc.status_code, phrase, f"{request.method} {request.url.path}")


__all__ = [
    "DONE",
    "NAV",
    "SECURITY_HEADERS",
    "TEMPLATES",
    "Page",
    "SignInRequired",
    "SignedInPage",
    "done",
    "field",
    "fields",
    "file_url",
    "form_of",
    "install_page_errors",
    "internal_error",
    "posted_form",
    "render",
    "signed_in_page",
    "text_of",
]
