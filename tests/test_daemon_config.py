"""The daemon's configuration: memfs.toml, MEMFS_* variables, flags, and the specs they build."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.core.errors import ConfigError
from memfs.core.models import By, Limits
from memfs.core.policy import resolve_by, resolve_ref
from memfs.core.specs import OrgMemory, UserMemory
from memfsd.config import DaemonConfig, ExtraBodyRule, load_config

REPO = Path(__file__).resolve().parent.parent
DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17", "role": "underwriter"}
CAROL = {"userId": "u_carol", "name": "Carol", "bankId": "bank_17", "role": "officer"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "memfs.toml"
    path.write_text(textwrap.dedent(text))
    return path


def config_error(tmp_path: Path, text: str, **kw: object) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), env={}, **kw)  # type: ignore[arg-type]
    return str(caught.value)


LOAN_DESK = """\
    mount_root = "/srv/memfs/mnt"
    state_dir = "/srv/memfs/state"

    [limits]
    max_file_bytes = 2048
    max_files = 50

    [[memory]]
    layer = "org"
    space = "lending-rules"
    org = "bankId"
    description = "The bank's lending rules."
    can_write = { role = ["underwriter"] }
    by = { id = "userId", label = "name" }

    [[memory]]
    layer = "user"
    description = "Your own preferences."
    """


def test_defaults_need_no_file() -> None:
    config = load_config(None, env={})
    assert config.mount_root == Path("/mnt/memfs")
    assert config.state_dir == Path("/var/lib/memfs")
    assert config.store == "sqlite:///var/lib/memfs/memfs.db"
    assert config.socket == Path("/var/lib/memfs/memfs.sock")
    assert config.limits == Limits()
    assert config.specs() == []


def test_file_sets_paths_limits_and_memory_tables(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, LOAN_DESK), env={})
    assert config.mount_root == Path("/srv/memfs/mnt")
    assert config.store == "sqlite:///srv/memfs/state/memfs.db"  # follows state_dir
    assert config.socket == Path("/srv/memfs/state/memfs.sock")
    assert config.limits == Limits(max_file_bytes=2048, max_files=50)
    rules, me = config.specs()
    assert isinstance(rules, OrgMemory)
    assert (rules.space, rules.path, rules.org, rules.commit) == (
        "lending-rules",
        "lending-rules",
        "bankId",
        "after-turn",
    )
    assert resolve_ref(rules, DANA).org == "bank_17"
    assert isinstance(me, UserMemory)
    assert (me.space, me.path, me.user, me.label) == ("me", "me", "userId", "name")
    assert me.description == "Your own preferences."


def test_env_overrides_file_and_flags_override_env(tmp_path: Path) -> None:
    path = write(tmp_path, LOAN_DESK)
    env = {
        "MEMFS_MOUNT_ROOT": "/env/mnt",
        "MEMFS_STATE_DIR": "/env/state",
        "MEMFS_STORE": "folder:///env/store",
    }
    from_env = load_config(path, env=env)
    assert from_env.mount_root == Path("/env/mnt")
    assert from_env.state_dir == Path("/env/state")
    assert from_env.store == "folder:///env/store"

    flags = load_config(
        path, env=env, overrides={"state_dir": Path("/flag/state"), "store": None, "app": None}
    )
    assert flags.state_dir == Path("/flag/state")
    assert flags.mount_root == Path("/env/mnt")  # no flag: the environment still wins
    assert flags.store == "folder:///env/store"  # a None override is "not given"


def test_empty_environment_variables_are_not_set(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, LOAN_DESK), env={"MEMFS_STATE_DIR": "", "MEMFS_STORE": ""})
    assert config.state_dir == Path("/srv/memfs/state")


def test_store_default_follows_the_state_dir_wherever_it_is_set() -> None:
    config = load_config(None, env={"MEMFS_STATE_DIR": "/data/memfs"})
    assert config.store == "sqlite:///data/memfs/memfs.db"


@pytest.mark.parametrize("source", ["file", "env", "flag"])
def test_a_postgresql_store_url_is_taken_from_the_file_the_environment_or_the_flag(
    tmp_path: Path, source: str
) -> None:
    url = "postgresql://memfs@db.internal/memfs"
    path = write(tmp_path, f'store = "{url}"\n') if source == "file" else None
    env = {"MEMFS_STORE": url} if source == "env" else {}
    overrides = {"store": url} if source == "flag" else None
    assert load_config(path, env=env, overrides=overrides).store == url


def test_bad_commit_mode_names_the_key(tmp_path: Path) -> None:
    message = config_error(
        tmp_path,
        """\
        [[memory]]
        layer = "user"

        [[memory]]
        layer = "org"
        space = "lending-rules"
        commit = "later"
        """,
    )
    assert message == (
        f"{tmp_path / 'memfs.toml'}: memory[1].commit: must be one of after-turn, manual, read-only"
    )


@pytest.mark.parametrize(
    ("text", "key", "hint"),
    [
        ('stat_dir = "/x"\n', "stat_dir", "did you mean 'state_dir'?"),
        ("[limits]\nmax_filez = 3\n", "limits.max_filez", "did you mean 'max_files'?"),
        (
            '[[memory]]\nlayer = "user"\ndescripton = "x"\n',
            "memory[0].descripton",
            "did you mean 'description'?",
        ),
        ('[[memory]]\nlayer = "org"\nspace = "r"\nby = { who = "x" }\n', "memory[0].by.who", ""),
        ('colour = "blue"\n', "colour", "known keys here: app, "),
    ],
)
def test_unknown_keys_are_refused_by_name(tmp_path: Path, text: str, key: str, hint: str) -> None:
    message = config_error(tmp_path, text)
    assert f": {key}: unknown key" in message
    assert hint in message


def test_relative_paths_are_refused_naming_where_they_came_from(tmp_path: Path) -> None:
    assert config_error(tmp_path, 'mount_root = "mnt"\n').endswith(
        "mount_root: must be an absolute path, not 'mnt'"
    )
    with pytest.raises(ConfigError, match=r"state_dir \(from MEMFS_STATE_DIR\): must be an abso"):
        load_config(None, env={"MEMFS_STATE_DIR": "state"})
    with pytest.raises(ConfigError, match=r"state_dir \(from the command line\): must be an abso"):
        load_config(None, env={}, overrides={"state_dir": "state"})


def test_state_dir_inside_the_mount_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"state_dir .*must not be inside mount_root"):
        load_config(None, env={"MEMFS_MOUNT_ROOT": "/srv/m", "MEMFS_STATE_DIR": "/srv/m/state"})


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("nope://x", "unknown store URL scheme"),
        ("sqlite://relative.db", "absolute path after three slashes"),
        ("folder:", "needs an absolute path"),
        ("postgresql://db/memfs?no_such_option=1", "not a PostgreSQL URL"),
    ],
)
def test_bad_store_url_names_the_key_and_opens_nothing(
    tmp_path: Path, url: str, reason: str
) -> None:
    message = config_error(tmp_path, f'store = "{url}"\n')
    assert ": store: " in message and reason in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memfs.toml"]


def test_bad_space_name_names_the_key(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[[memory]]\nlayer = "org"\nspace = "Lending Rules"\n')
    assert "memory[0].space: space names are 1-64 characters" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[[memory]]\nlayer = "org"\n', "memory[0].space: an org space needs a name"),
        ('[[memory]]\nspace = "x"\n', "memory[0].layer: is required"),
        ('[[memory]]\nlayer = "team"\n', "memory[0].layer: must be one of org, user"),
        ('[[memory]]\nlayer = "user"\npath = "a/b"\n', "memory[0].path: mount path may not"),
        (
            '[[memory]]\nlayer = "org"\nspace = "r"\nuser = "userId"\n',
            "memory[0].user: only user-layer spaces name a person",
        ),
        (
            '[[memory]]\nlayer = "user"\nby = { id = "userId" }\n',
            "memory[0].by: a person's own space is always written by them",
        ),
        (
            '[[memory]]\nlayer = "org"\nspace = "r"\ncan_write = ["underwriter"]\n',
            "memory[0].can_write: must be a table of extra-body fields",
        ),
        (
            '[[memory]]\nlayer = "org"\nspace = "r"\ncan_write = { role = "underwriter" }\n',
            "memory[0].can_write.role: must be a list",
        ),
        ('[[memory]]\nlayer = "org"\nspace = "r"\ncan_write = {}\n', "memory[0].can_write: name"),
        ('[memory]\nlayer = "org"\n', "memory: must be an array of tables: [[memory]]"),
        ("[limits]\nmax_file_bytes = 0\n", "limits.max_file_bytes: must be greater than 0"),
        ('[limits]\nmax_files = "many"\n', "limits.max_files: must be a whole number"),
        ('app = "no_colon"\n', "app: must be module:attribute"),
    ],
)
def test_table_mistakes_name_the_key(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in config_error(tmp_path, text)


def test_every_mistake_is_reported_at_once(tmp_path: Path) -> None:
    message = config_error(
        tmp_path,
        """\
        mount_root = "mnt"
        [[memory]]
        layer = "org"
        space = "r"
        commit = "later"
        """,
    )
    assert message.startswith("2 mistakes in the configuration:\n")
    assert "mount_root: must be an absolute path" in message
    assert "memory[0].commit: must be one of" in message


def test_invalid_toml_says_where(tmp_path: Path) -> None:
    message = config_error(tmp_path, 'mount_root = "/mnt/memfs"\nstore = \n')
    assert message.startswith(f"{tmp_path / 'memfs.toml'}: not valid TOML: ")
    assert "line 2" in message


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the config file: No such file") as caught:
        load_config(tmp_path / "absent.toml", env={})
    assert caught.value.exit_code == 78


def test_can_write_role_table_allows_only_listed_roles(tmp_path: Path) -> None:
    [rules, _] = load_config(write(tmp_path, LOAN_DESK), env={}).specs()
    assert rules.can_write is not None
    assert rules.can_write(DANA) is True
    assert rules.can_write(CAROL) is False
    assert rules.can_write({"userId": "u_x"}) is False  # no role at all: read-only
    assert repr(rules.can_write) == "ExtraBodyRule(role in ['underwriter'])"


def test_can_write_with_several_fields_needs_every_one_to_match() -> None:
    rule = ExtraBodyRule({"role": ["underwriter", "head"], "team": ["credit"]})
    assert rule({"role": "head", "team": "credit"}) is True
    assert rule({"role": "head", "team": "sales"}) is False
    assert rule({"role": ["officer", "underwriter"], "team": "credit"}) is True  # any of a list
    assert rule({"role": 3, "team": "credit"}) is False
    assert repr(rule) == "ExtraBodyRule(role in ['underwriter', 'head'] and team in ['credit'])"


def test_org_by_table_attributes_revisions_to_the_signed_in_person(tmp_path: Path) -> None:
    [rules, me] = load_config(write(tmp_path, LOAN_DESK), env={}).specs()
    assert resolve_by(rules, DANA) == By(id="u_dana", label="Dana", role="underwriter")
    assert resolve_by(rules, {}) is None
    assert resolve_by(me, DANA) == By(id="u_dana", label="Dana")


def test_two_tables_on_one_path_name_both(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, '[[memory]]\nlayer = "user"\n\n[[memory]]\nlayer = "user"\n'), env={}
    )
    with pytest.raises(ConfigError, match=r"memory\[1\]: mounts at path 'me', which memory\[0\]"):
        config.specs()


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh importable module name, so each test imports its own file."""
    name = f"memfs_test_app_{uuid.uuid4().hex[:8]}"
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def write_module(tmp_path: Path, name: str, body: str) -> None:
    (tmp_path / f"{name}.py").write_text("import memfs\n" + textwrap.dedent(body))


@pytest.mark.parametrize(
    ("attr", "body"),
    [
        ("SPECS", "SPECS = [memfs.org_memory(space='desk', can_write=lambda eb: True)]\n"),
        (
            "memory",
            "memory = memfs.Memory(memfs.open_store('memory://'), "
            "[memfs.org_memory(space='desk', can_write=lambda eb: True)])\n",
        ),
        (
            "make.specs",
            "class make:\n    @staticmethod\n    def specs():\n"
            "        return [memfs.org_memory(space='desk', can_write=lambda eb: True)]\n",
        ),
    ],
)
def test_app_option_loads_specs_from_python(
    tmp_path: Path, app_module: str, attr: str, body: str
) -> None:
    write_module(tmp_path, app_module, body)
    path = write(tmp_path, '[[memory]]\nlayer = "user"\n')
    config = load_config(path, env={}, overrides={"app": f"{app_module}:{attr}"})
    me, desk = config.specs()
    assert isinstance(me, UserMemory)
    assert isinstance(desk, OrgMemory) and desk.space == "desk"
    assert desk.can_write is not None and desk.can_write({}) is True  # a real callable


@pytest.mark.parametrize(
    ("attr", "body", "reason"),
    [
        ("SPECS", "", "has no attribute 'SPECS'"),
        ("SPECS", "SPECS = 'desk'\n", "must be a list of memory specs"),
        ("SPECS", "SPECS = [{'space': 'desk'}]\n", "SPECS[0] is {'space': 'desk'}, not a memory"),
        ("make", "def make():\n    raise RuntimeError('no db')\n", "raised RuntimeError: no db"),
        ("make", "async def make():\n    return []\n", "is async"),
        (
            "SPECS",
            "SPECS = [memfs.user_memory(), memfs.user_memory()]\n",
            "mounts at path 'me', which app",
        ),
    ],
)
def test_app_that_gives_no_specs_is_a_config_error(
    tmp_path: Path, app_module: str, attr: str, body: str, reason: str
) -> None:
    write_module(tmp_path, app_module, body)
    config = load_config(None, env={}, overrides={"app": f"{app_module}:{attr}"})
    with pytest.raises(ConfigError, match="app") as caught:
        config.specs()
    assert reason in str(caught.value)


def test_app_module_that_does_not_import_is_a_config_error() -> None:
    config = DaemonConfig(app="memfs_no_such_module_here:SPECS")
    with pytest.raises(ConfigError, match="app: cannot import 'memfs_no_such_module_here'"):
        config.specs()


def test_the_example_config_loads() -> None:
    config = load_config(REPO / "systemd" / "memfs.toml.example", env={})
    rules, me = config.specs()
    assert rules.can_write is not None and rules.can_write(DANA) and not rules.can_write(CAROL)
    assert (me.layer, me.path) == ("user", "me")
    assert config.socket == config.state_dir / "memfs.sock"


def test_org_review_defaults_to_person_and_can_be_set(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, LOAN_DESK), env={})
    [rules, _] = config.specs()
    assert isinstance(rules, OrgMemory) and rules.review == "person"
    after = LOAN_DESK.replace('can_write = { role = ["underwriter"] }', 'review = "after"')
    [rules, _] = load_config(write(tmp_path, after), env={}).specs()
    assert isinstance(rules, OrgMemory) and rules.review == "after"


def test_bad_review_mode_or_review_on_a_persons_space_names_the_key(tmp_path: Path) -> None:
    bad = LOAN_DESK.replace('can_write = { role = ["underwriter"] }', 'review = "sometimes"')
    assert "memory[0].review" in config_error(tmp_path, bad)
    personal = LOAN_DESK.replace('description = "Your own preferences."', 'review = "none"')
    assert "memory[1].review" in config_error(tmp_path, personal)


def test_seed_is_an_absolute_existing_folder_of_an_org_space(tmp_path: Path) -> None:
    folder = tmp_path / "seed"
    folder.mkdir()
    seeded = LOAN_DESK.replace('can_write = { role = ["underwriter"] }', f'seed = "{folder}"')
    [rules, _] = load_config(write(tmp_path, seeded), env={}).specs()
    assert isinstance(rules, OrgMemory) and str(rules.seed) == str(folder)
    missing = LOAN_DESK.replace(
        'can_write = { role = ["underwriter"] }', f'seed = "{tmp_path / "nope"}"'
    )
    assert "memory[0].seed" in config_error(tmp_path, missing)


def test_sync_on_close_is_off_unless_the_file_turns_it_on(tmp_path: Path) -> None:
    assert load_config(None, env={}).sync_on_close is False
    assert load_config(write(tmp_path, "sync_on_close = true\n"), env={}).sync_on_close is True
    message = config_error(tmp_path, 'sync_on_close = "sometimes"\n')
    assert "sync_on_close" in message


def test_control_max_body_bytes_defaults_to_1_mib_and_must_be_positive(tmp_path: Path) -> None:
    assert load_config(None, env={}).control_max_body_bytes == 1024 * 1024
    config = load_config(write(tmp_path, "control_max_body_bytes = 4096\n"), env={})
    assert config.control_max_body_bytes == 4096
    message = config_error(tmp_path, "control_max_body_bytes = 0\n")
    assert "control_max_body_bytes: must be greater than 0" in message
    example = (REPO / "systemd" / "memfs.toml.example").read_text()
    assert "# control_max_body_bytes = 1048576" in example


def test_an_apps_nested_dir_inside_a_memory_tables_folder_is_a_config_error(
    tmp_path: Path, app_module: str
) -> None:
    write_module(
        tmp_path,
        app_module,
        """
        async def load(ctx):
            return {}

        async def store(ctx, changes, cursor):
            return None

        SPECS = [memfs.persistent_dir(path="lending-rules/scratch", load=load, store=store)]
        """,
    )
    config = load_config(
        write(tmp_path, LOAN_DESK), env={}, overrides={"app": f"{app_module}:SPECS"}
    )
    with pytest.raises(ConfigError, match=r"inside the folder of memory\[0\]") as caught:
        config.specs()
    assert "'lending-rules/scratch'" in str(caught.value)


def test_an_apps_nested_dir_beside_the_tables_mounts(tmp_path: Path, app_module: str) -> None:
    write_module(
        tmp_path,
        app_module,
        """
        async def load(ctx):
            return {}

        async def store(ctx, changes, cursor):
            return None

        SPECS = [memfs.persistent_dir(path="persistent/user", load=load, store=store)]
        """,
    )
    config = load_config(
        write(tmp_path, LOAN_DESK), env={}, overrides={"app": f"{app_module}:SPECS"}
    )
    assert [spec.path for spec in config.specs()][-1] == "persistent/user"


def test_a_top_level_org_is_inherited_by_every_table_that_names_none(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        org = "bankId"

        [[memory]]
        layer = "org"
        space = "lending-rules"

        [[memory]]
        layer = "user"

        [[memory]]
        layer = "user"
        space = "elsewhere"
        org = "otherOrg"
        """,
    )
    rules, me, elsewhere = load_config(path, env={}).specs()
    assert resolve_ref(rules, DANA).org == "bank_17"
    assert resolve_ref(me, DANA).org == "bank_17"
    assert isinstance(elsewhere, UserMemory) and elsewhere.org == "otherOrg"


def test_an_apps_memory_brings_its_org_resolver_with_its_specs(
    tmp_path: Path, app_module: str
) -> None:
    write_module(
        tmp_path,
        app_module,
        "MEMORY = memfs.Memory(memfs.open_store('memory://'), "
        "[memfs.user_memory(), memfs.org_memory(space='desk')], org='bankId')\n",
    )
    config = load_config(None, env={}, overrides={"app": f"{app_module}:MEMORY"})
    assert {resolve_ref(spec, DANA).org for spec in config.specs()} == {"bank_17"}


def test_the_daemon_the_client_and_the_cli_default_to_one_state_dir_and_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memfs.cli_manage import default_store
    from memfs.client import default_socket
    from memfs.core import defaults

    config = load_config(None, env={})
    assert config.state_dir == Path(defaults.DEFAULT_STATE_DIR)
    assert config.socket == default_socket({})
    for name in ("MEMFS_STORE", "MEMFS_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert default_store() == config.store


# -- the Memory tab: web_listen, web_tls_cert, web_tls_key, web_max_body_bytes -----


def test_the_memory_tab_listens_on_loopback_8330_by_default_without_being_asked_for() -> None:
    config = load_config(None, env={})
    assert config.web_listen == "127.0.0.1:8330"
    assert config.web_tls_cert is None and config.web_tls_key is None
    assert config.web_max_body_bytes == 8 * 1024 * 1024
    assert config.web_required is False  # the default: a folder store leaves it off


@pytest.mark.parametrize(
    ("text", "env", "overrides"),
    [
        ('web_listen = ""\n', {}, {}),
        ("", {"MEMFS_WEB_LISTEN": ""}, {}),
        ('web_listen = "127.0.0.1:9000"\n', {}, {"web_listen": ""}),
    ],
    ids=["file", "empty variable", "flag"],
)
def test_an_empty_web_listen_from_any_source_turns_the_memory_tab_off(
    tmp_path: Path, text: str, env: dict[str, str], overrides: dict[str, str]
) -> None:
    config = load_config(write(tmp_path, text), env=env, overrides=overrides)
    assert config.web_listen == ""
    assert config.web_required is False


def test_an_empty_variable_other_than_memfs_web_listen_still_counts_as_not_set() -> None:
    config = load_config(None, env={"MEMFS_STORE": "", "MEMFS_WEB_TLS_CERT": ""})
    assert config.store.startswith("sqlite://") and config.web_tls_cert is None


@pytest.mark.parametrize(
    ("text", "env", "overrides"),
    [
        ('web_listen = "127.0.0.1:9000"\n', {}, {}),
        ("", {"MEMFS_WEB_LISTEN": "127.0.0.1:9000"}, {}),
        ("", {"MEMFS_WEB_LISTEN": "127.0.0.1:1"}, {"web_listen": "127.0.0.1:9000"}),
    ],
    ids=["file", "variable", "flag over variable"],
)
def test_a_given_web_listen_is_required_whichever_source_gives_it(
    tmp_path: Path, text: str, env: dict[str, str], overrides: dict[str, str]
) -> None:
    config = load_config(write(tmp_path, text), env=env, overrides=overrides)
    assert config.web_listen == "127.0.0.1:9000"
    assert config.web_required is True


@pytest.mark.parametrize("listen", ["0.0.0.0:8330", "[::]:8330", "10.1.2.3:443", "example.org:80"])
def test_a_non_loopback_web_listen_without_tls_is_a_config_error_naming_web_tls_cert(
    tmp_path: Path, listen: str
) -> None:
    message = config_error(tmp_path, f'web_listen = "{listen}"\n')
    assert message.startswith(f"{tmp_path / 'memfs.toml'}: web_listen: ")
    assert "web_tls_cert" in message and "web_tls_key" in message
    with pytest.raises(ConfigError, match=r"from MEMFS_WEB_LISTEN.*web_tls_cert"):
        load_config(None, env={"MEMFS_WEB_LISTEN": listen})


def test_a_non_loopback_web_listen_with_both_tls_files_is_accepted(tmp_path: Path) -> None:
    config = load_config(
        None,
        env={
            "MEMFS_WEB_LISTEN": "0.0.0.0:8443",
            "MEMFS_WEB_TLS_CERT": "/etc/memfs/cert.pem",
            "MEMFS_WEB_TLS_KEY": "/etc/memfs/key.pem",
        },
    )
    assert config.web_listen == "0.0.0.0:8443"
    assert (config.web_tls_cert, config.web_tls_key) == (
        Path("/etc/memfs/cert.pem"),
        Path("/etc/memfs/key.pem"),
    )


def test_one_tls_file_alone_is_a_config_error_saying_they_go_together(tmp_path: Path) -> None:
    message = config_error(tmp_path, 'web_tls_cert = "/etc/memfs/cert.pem"\n')
    assert "web_listen: web_tls_cert and web_tls_key go together" in message


def test_a_relative_tls_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    message = config_error(
        tmp_path, 'web_tls_cert = "cert.pem"\nweb_tls_key = "/etc/memfs/key.pem"\n'
    )
    assert "web_tls_cert: must be an absolute path, not 'cert.pem'" in message
    assert "web_listen" not in message  # one mistake, said once


@pytest.mark.parametrize("listen", ["8330", "localhost", "127.0.0.1:0", "127.0.0.1:70000"])
def test_a_malformed_web_listen_is_a_config_error_naming_the_key(
    tmp_path: Path, listen: str
) -> None:
    message = config_error(tmp_path, f'web_listen = "{listen}"\n')
    assert "web_listen: web_listen must be HOST:PORT" in message


def test_web_max_body_bytes_must_be_positive_and_is_in_the_example(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "web_max_body_bytes = 4096\n"), env={})
    assert config.web_max_body_bytes == 4096
    message = config_error(tmp_path, "web_max_body_bytes = 0\n")
    assert "web_max_body_bytes: must be greater than 0" in message
    example = (REPO / "systemd" / "memfs.toml.example").read_text()
    assert "# web_max_body_bytes = 8388608" in example
    assert "# web_read_timeout_seconds = 30" in example
    assert '# web_listen = "127.0.0.1:8330"' in example


def test_web_read_timeout_seconds_defaults_to_30_and_must_be_positive(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, ""), env={}).web_read_timeout_seconds == 30
    config = load_config(write(tmp_path, "web_read_timeout_seconds = 2.5\n"), env={})
    assert config.web_read_timeout_seconds == 2.5
    message = config_error(tmp_path, "web_read_timeout_seconds = 0\n")
    assert "web_read_timeout_seconds: must be greater than 0" in message
