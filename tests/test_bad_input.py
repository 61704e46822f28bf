"""Bad input gets a clear error and loses nothing: the CLI, the config and the Memory tab's API.

Each test pins a defect a hostile review found: a traceback, a 500, a
silent default or a renamed file where a clear error belongs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest
from click.testing import CliRunner

from memfs.cli import main
from memfs.core.errors import ConfigError
from memfs.core.models import MAX_LIMIT, Limits
from memfs.core.signin import SigninLimits
from memfs.stores.base import ReviewingStore
from memfs.web.api import MAX_REVISION_CHARS, MAX_VERSION_CHARS
from memfs.web.app import web_app
from memfsd.config import load_config
from tests.test_cli_manage import db, memfs_cli  # noqa: F401 (db is a fixture)
from tests.test_daemon_posix import CTX, make
from tests.web_world import RULES, new_store, org_memory

# -- the CLI: every bad argument is one line and its exit code, never a traceback -------


def assert_clear_cli_error(result: Any, exit_code: int) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == exit_code, result.output
    assert "Traceback" not in result.output
    assert "memfs: error:" in result.output


def test_an_actor_id_that_is_not_utf8_is_a_clear_error_not_a_traceback(db: Path) -> None:  # noqa: F811
    # `--as "$(printf 'a\xffb')"`: Python hands click 'a\udcffb'. `--org` of the
    # same bytes is InvalidName (exit 2); `--as` crashed with pydantic's
    # ValidationError for By (exit 1) from Acting.__init__.
    result = CliRunner().invoke(
        main,
        ["review", "list", "--store", f"sqlite://{db}", "--org", "bank_17", "--as", "a\udcffb"],
    )
    assert_clear_cli_error(result, 2)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@[::1/db",  # urlsplit's ValueError("Invalid IPv6 URL")
        "sqlite:///tmp/memfs-\udcff.db",  # a non-UTF-8 path: UnicodeEncodeError at connect
    ],
)
def test_a_malformed_store_url_is_a_config_error_not_a_traceback(tmp_path: Path, url: str) -> None:
    # The daemon's config names the key (store: value error, ...); the people's
    # commands and `memfs db` crashed with a traceback and exit 1.
    for args in (
        ["files", "rules", "--org", "o1", "--as", "ada", "--store", url],
        ["db", "status", "--store", url],
    ):
        result = CliRunner().invoke(main, args, env={"MEMFS_STATE_DIR": str(tmp_path)})
        assert_clear_cli_error(result, 78)


def test_put_under_a_large_max_file_bytes_reads_only_what_the_file_holds(
    db: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    # A config the daemon accepts: files up to 1 TiB. `memfs put` read
    # `max_file_bytes + 1` at once, which allocates that much up front:
    # MemoryError (and OverflowError past 2**63) for a 6-byte file.
    config = tmp_path / "memfs.toml"
    config.write_text("[limits]\nmax_file_bytes = 1099511627776\nmax_space_bytes = 1099511627776\n")
    assert load_config(config, env={}).limits.max_file_bytes == 1 << 40
    source = tmp_path / "new.md"
    source.write_bytes(b"hello\n")
    result = CliRunner().invoke(
        main,
        [
            *("put", "lending-rules", "new.md", str(source), "--config", str(config)),
            *("--store", f"sqlite://{db}", "--org", "bank_17", "--as", "ada"),
        ],
    )
    assert result.exception is None, repr(result.exception)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["size"] == 6


# -- the daemon's configuration: a wrong type is a ConfigError naming the key ----------


@pytest.mark.parametrize(
    "line",
    [
        "[limits]\nmax_files = true",  # became max_files = 1
        "[limits]\nmax_file_bytes = true",
        '[limits]\nmax_space_bytes = "64"',  # a string: no MEMFS_* variable sets a limit
        "control_max_body_bytes = true",  # a 1-byte control API: every turn start 413
        "web_max_body_bytes = true",
        "store_batch_max = true",
        "web_read_timeout_seconds = true",
    ],
)
def test_a_boolean_or_string_for_a_numeric_limit_is_a_config_error(
    tmp_path: Path, line: str
) -> None:
    # store_pool_size = true and forget_poll_seconds = true are refused ("must
    # be a whole number, not true or false"); the other limits took true as 1.
    config = tmp_path / "memfs.toml"
    config.write_text(line + "\n")
    with pytest.raises(ConfigError):
        load_config(config, env={})


def test_an_infinite_web_read_timeout_is_a_config_error(tmp_path: Path) -> None:
    # forget_poll_seconds = inf is refused ("must be a finite number of
    # seconds"); web_read_timeout_seconds = inf was accepted, which turns the
    # slow-client bound off while the config says it is set.
    config = tmp_path / "memfs.toml"
    config.write_text("web_read_timeout_seconds = inf\n")
    with pytest.raises(ConfigError, match="web_read_timeout_seconds"):
        load_config(config, env={})


async def test_limits_of_max_limit_are_kept_and_one_more_is_a_config_error_naming_the_key(
    tmp_path: Path,
) -> None:
    config = tmp_path / "memfs.toml"
    names = (
        "max_file_bytes",
        "max_files",
        "max_space_bytes",
        "journal_bytes",
        "disk_reserve_bytes",
    )
    config.write_text("[limits]\n" + "".join(f"{name} = {MAX_LIMIT}\n" for name in names))
    limits = load_config(config, env={}).limits
    assert [getattr(limits, name) for name in names] == [MAX_LIMIT] * len(names)
    _overlay, ops = make(tmp_path, limits=limits)
    data = await ops.statfs(CTX)  # statvfs fields are 64-bit: reported, not EIO
    assert (data.f_files, data.f_blocks) == (MAX_LIMIT, MAX_LIMIT // 4096)
    for name in names:
        config.write_text(f"[limits]\n{name} = {MAX_LIMIT + 1}\n")
        with pytest.raises(ConfigError, match=f"limits.{name}"):
            load_config(config, env={})


async def test_limits_too_large_for_statfs_are_refused_or_reported(tmp_path: Path) -> None:
    # [limits] max_files = 18446744073709551616 was accepted; `df` in the mount
    # then got EIO (statvfs fields are 64-bit: OverflowError, logged as a bug).
    try:
        limits = Limits(max_files=2**64, max_space_bytes=2**80)
    except pydantic.ValidationError:
        return  # refused where it is set: fine
    _overlay, ops = make(tmp_path, limits=limits)
    data = await ops.statfs(CTX)
    assert data.f_files > 0 and data.f_blocks > 0


# -- the Memory tab's API: bad bodies are 400, never 500 --------------------------------


@dataclass
class Web:
    store: ReviewingStore
    client: httpx.AsyncClient
    member: dict[str, str]
    change: str


@pytest.fixture
async def web(tmp_path: Path) -> AsyncIterator[Web]:
    made = await org_memory(new_store("sqlite", tmp_path))
    app = web_app(made.store, signin=SigninLimits(signin_failures=1000))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://memfs"
    ) as client:
        yield Web(
            made.store,
            client,
            {
                "Authorization": f"Bearer {made.tokens['member']}",
                "content-type": "application/json",
            },
            made.change,
        )
    await made.store.aclose()


def assert_bad_request(response: httpx.Response) -> None:
    assert response.status_code == 400, response.text
    assert response.json()["error"] in ("BadRequest", "InvalidName"), response.text


async def test_put_of_content_holding_a_lone_surrogate_is_400_not_500(web: Web) -> None:
    # "\ud800" is valid JSON and no UTF-8 text: content.encode() raised
    # UnicodeEncodeError, answered 500 InternalError.
    response = await web.client.put(
        f"/api/v1/spaces/{RULES.space}/files/a.md",
        headers=web.member,
        content=b'{"content": "\\ud800"}',
    )
    assert_bad_request(response)
    assert (await web.store.files(RULES))["a.md"] == b"one\n"  # as it was


async def test_review_edit_of_content_holding_a_lone_surrogate_is_400_not_500(web: Web) -> None:
    response = await web.client.post(
        f"/api/v1/review/{web.change}/edit",
        headers=web.member,
        content=b'{"path": "x.md", "content": "\\ud800"}',
    )
    assert_bad_request(response)


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (b'{"content": "two", "content": "three"}', "content"),
        (b'{"content": "two", "why": {"by": "u_a", "by": "u_b"}}', "by"),
    ],
)
async def test_web_api_refuses_a_repeated_json_key_at_any_depth_with_400(
    web: Web, body: bytes, key: str
) -> None:
    # json.loads kept the last of a repeated key: the file took "three", whatever
    # a proxy or a log that read the first "content" saw.
    url = f"/api/v1/spaces/{RULES.space}/files/a.md"
    refused = await web.client.put(url, headers=web.member, content=body)
    assert_bad_request(refused)
    assert f'the key "{key}" appears twice in one object' in refused.json()["detail"]
    assert (await web.store.files(RULES))["a.md"] == b"one\n"  # as it was
    taken = await web.client.put(url, headers=web.member, content=b'{"content": "two"}')
    assert taken.status_code == 200, taken.text
    assert (await web.store.files(RULES))["a.md"] == b"two"


async def test_put_of_a_path_with_a_newline_is_invalid_name_not_not_found(web: Web) -> None:
    # docs/web.md: control characters in a new name are 400 InvalidName. The
    # route's {path:path} does not match a newline, so it answered 404.
    response = await web.client.put(
        f"/api/v1/spaces/{RULES.space}/files/a%0Ab.md",
        headers=web.member,
        content=b'{"content": "x"}',
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "InvalidName"


@pytest.mark.parametrize("escaped", ["a%FF.md", "%ED%A0%80.md"])
async def test_put_of_a_path_that_is_not_utf8_is_refused_not_renamed(
    web: Web, escaped: str
) -> None:
    # The mount refuses a name that is not UTF-8 (EINVAL) and the CLI says
    # "file path is not valid UTF-8". The API decoded the bytes with
    # replacement and stored the file under another name ('a\ufffd.md').
    response = await web.client.put(
        f"/api/v1/spaces/{RULES.space}/files/{escaped}",
        headers=web.member,
        content=b'{"content": "x"}',
    )
    assert_bad_request(response)
    assert not [path for path in await web.store.files(RULES) if "\ufffd" in path]


async def test_a_restore_naming_a_revision_past_its_length_limit_is_400(web: Web) -> None:
    url = f"/api/v1/spaces/{RULES.space}/files/a.md/restore"
    at = await web.client.post(url, headers=web.member, json={"revision": "9" * MAX_REVISION_CHARS})
    assert at.status_code == 404, at.text  # read, and no such revision
    past = await web.client.post(
        url, headers=web.member, json={"revision": "9" * (MAX_REVISION_CHARS + 1)}
    )
    assert_bad_request(past)


async def test_a_decision_naming_a_version_past_its_length_limit_is_400(web: Web) -> None:
    url = f"/api/v1/review/{web.change}/approve"
    at = await web.client.post(url, headers=web.member, json={"version": "0" * MAX_VERSION_CHARS})
    assert at.status_code == 409, at.text  # read, and not the version shown
    past = await web.client.post(
        url, headers=web.member, json={"version": "0" * (MAX_VERSION_CHARS + 1)}
    )
    assert_bad_request(past)
    assert (await web.store.get_change(web.change)).state == "waiting"
