//! `[store]`: where conversations are kept. The embedded SQLite file under the storage
//! folder (the default), or a PostgreSQL database shared by several hosts, reached with a
//! URL that must hold no password (it comes from the environment variable `password_env`
//! names), a pool size, connect and query time-outs, TLS options and whether statements are
//! prepared (`prepared_statements = false` behind a transaction pooler). Also how long a
//! run's lease on its conversation lasts unless renewed (`run_lease_secs`), whether a run's
//! events are published for other hosts to follow (`share_runs`, PostgreSQL only) and how
//! long a search may take (`search_timeout_secs`), either backend.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rojos_conversations::{PostgresOptions, PostgresTls, StatementMode, UrlError};

use super::{
    keys::{invalid, seconds_key, ConfigError, EnvLookup},
    raw::RawStore,
};

/// The conversation store a host opens.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    /// One SQLite file, `<storage>/rojos.db`.
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// How long a search may take (`store.search_timeout_secs`).
        search_timeout: Duration,
    },
    /// A PostgreSQL database (the password, if any, already read from the environment).
    Postgres(Box<PostgresOptions>),
}

/// `[store]` validated; `storage` is the resolved storage folder, `resolve` makes a
/// path from the file absolute.
pub(super) fn parse_store(
    raw: &RawStore,
    storage: &Path,
    env: EnvLookup<'_>,
    resolve: &dyn Fn(&Path) -> PathBuf,
) -> Result<StoreConfig, ConfigError> {
    match raw.backend.as_deref().unwrap_or("sqlite") {
        "sqlite" => {
            if let Some(key) = postgres_only_key(raw) {
                return Err(invalid(
                    format!("store.{key}"),
                    "only used with backend = \"postgres\"",
                ));
            }
            Ok(StoreConfig::Sqlite {
                path: storage.join("rojos.db"),
                search_timeout: parse_search_timeout(raw)?,
            })
        }
        "postgres" => Ok(StoreConfig::Postgres(Box::new(parse_postgres(
            raw, env, resolve,
        )?))),
        other => Err(invalid(
            "store.backend",
            format!("unknown backend \"{other}\": expected \"sqlite\" or \"postgres\""),
        )),
    }
}

/// `store.run_lease_secs`: how long a run lease lasts unless renewed, so how long a
/// conversation stays locked after its host died mid-run (default 30 s).
pub(super) fn parse_run_lease(raw: &RawStore) -> Result<Duration, ConfigError> {
    seconds_key(
        "store.run_lease_secs",
        raw.run_lease_secs,
        Duration::from_secs(30),
        3600.0,
    )
}

/// `store.share_runs`: whether a run's events are published to the PostgreSQL store so that
/// another host follows or stops it (default true). False: a run is followed and stopped only
/// on its own host, as with SQLite, and costs the database nothing while it streams. Set only
/// with backend = "postgres" (`parse_store` refuses it otherwise).
pub(super) fn parse_share_runs(raw: &RawStore) -> bool {
    raw.share_runs.unwrap_or(true)
}

/// `store.search_timeout_secs`: how long a conversation search may take before it is
/// stopped (default 10 s, at most 600).
fn parse_search_timeout(raw: &RawStore) -> Result<Duration, ConfigError> {
    seconds_key(
        "store.search_timeout_secs",
        raw.search_timeout_secs,
        Duration::from_secs(10),
        600.0,
    )
}

fn postgres_only_key(raw: &RawStore) -> Option<&'static str> {
    [
        ("url", raw.url.is_some()),
        ("password_env", raw.password_env.is_some()),
        ("pool_size", raw.pool_size.is_some()),
        ("connect_timeout_secs", raw.connect_timeout_secs.is_some()),
        ("query_timeout_secs", raw.query_timeout_secs.is_some()),
        ("tls", raw.tls.is_some()),
        ("ca_file", raw.ca_file.is_some()),
        ("prepared_statements", raw.prepared_statements.is_some()),
        ("share_runs", raw.share_runs.is_some()),
    ]
    .into_iter()
    .find_map(|(key, set)| set.then_some(key))
}

fn parse_postgres(
    raw: &RawStore,
    env: EnvLookup<'_>,
    resolve: &dyn Fn(&Path) -> PathBuf,
) -> Result<PostgresOptions, ConfigError> {
    let Some(url) = raw.url.as_deref() else {
        return Err(invalid(
            "store.url",
            "required with backend = \"postgres\" (postgres://user@host:port/database)",
        ));
    };
    let mut options = PostgresOptions::from_url(url).map_err(|e| match e {
        UrlError::HasPassword => invalid(
            "store.url",
            "a password inside the url is refused: put it in an environment variable and name \
             that variable in store.password_env",
        ),
        other => invalid("store.url", other.to_string()),
    })?;
    if let Some(var) = &raw.password_env {
        let password = env(var).ok_or_else(|| {
            invalid(
                "store.password_env",
                format!("environment variable {var} is not set"),
            )
        })?;
        options = options.with_password(&password);
    }
    options.pool_size = match raw.pool_size {
        Some(0) => return Err(invalid("store.pool_size", "must be at least 1")),
        Some(size) => size,
        None => options.pool_size,
    };
    options.connect_timeout = seconds_key(
        "store.connect_timeout_secs",
        raw.connect_timeout_secs,
        Duration::from_secs(5),
        600.0,
    )?;
    options.query_timeout = seconds_key(
        "store.query_timeout_secs",
        raw.query_timeout_secs,
        Duration::from_secs(10),
        600.0,
    )?;
    options.tls = parse_tls(raw, resolve)?;
    options.statements = match raw.prepared_statements {
        Some(false) => StatementMode::Unnamed,
        Some(true) | None => StatementMode::Prepared,
    };
    options.search_timeout = parse_search_timeout(raw)?;
    Ok(options)
}

fn parse_tls(
    raw: &RawStore,
    resolve: &dyn Fn(&Path) -> PathBuf,
) -> Result<PostgresTls, ConfigError> {
    let ca_file = raw.ca_file.as_deref().map(resolve);
    match (raw.tls.as_deref().unwrap_or("disable"), ca_file) {
        ("verify-full", ca_file) => Ok(PostgresTls::VerifyFull { ca_file }),
        (_, Some(_)) => Err(invalid(
            "store.ca_file",
            "only used with tls = \"verify-full\"",
        )),
        ("disable", None) => Ok(PostgresTls::Disable),
        ("require", None) => Ok(PostgresTls::Require),
        (other, None) => Err(invalid(
            "store.tls",
            format!(
                "unknown mode \"{other}\": expected \"disable\", \"require\" or \"verify-full\""
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str, env: EnvLookup<'_>) -> Result<StoreConfig, ConfigError> {
        let raw: RawStore = toml::from_str(toml_text).unwrap();
        parse_store(&raw, Path::new("/srv/storage"), env, &|p| {
            Path::new("/etc/rojos").join(p)
        })
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_default_is_the_sqlite_file_under_storage() {
        let StoreConfig::Sqlite {
            path,
            search_timeout,
        } = parse("", &no_env).unwrap()
        else {
            panic!("expected sqlite");
        };
        assert_eq!(path, Path::new("/srv/storage/rojos.db"));
        assert_eq!(search_timeout, Duration::from_secs(10));
    }

    #[test]
    fn postgres_takes_its_password_from_the_environment_and_never_shows_it() {
        let env = |name: &str| (name == "PG_PASSWORD").then(|| "hunter22-secret".to_owned());
        let text = "backend = \"postgres\"\nurl = \"postgres://rojos@db:5432/chats\"\n\
                    password_env = \"PG_PASSWORD\"\npool_size = 4\nconnect_timeout_secs = 2\n\
                    query_timeout_secs = 3\ntls = \"verify-full\"\nca_file = \"ca.pem\"\n\
                    prepared_statements = false\nsearch_timeout_secs = 4";
        let StoreConfig::Postgres(options) = parse(text, &env).unwrap() else {
            panic!("expected postgres");
        };
        assert_eq!(options.database(), "postgres://rojos@db:5432/chats");
        assert_eq!(
            (
                options.pool_size,
                options.connect_timeout,
                options.query_timeout
            ),
            (4, Duration::from_secs(2), Duration::from_secs(3))
        );
        assert_eq!(
            options.tls,
            PostgresTls::VerifyFull {
                ca_file: Some(PathBuf::from("/etc/rojos/ca.pem"))
            }
        );
        assert_eq!(options.statements, StatementMode::Unnamed);
        assert_eq!(options.search_timeout, Duration::from_secs(4));
        assert!(!format!("{options:?}").contains("hunter22"));
    }

    #[test]
    fn the_run_lease_lasts_30_seconds_unless_set_within_an_hour() {
        let lease = |text: &str| parse_run_lease(&toml::from_str(text).unwrap());
        assert_eq!(lease("").unwrap(), Duration::from_secs(30));
        assert_eq!(
            lease("run_lease_secs = 2.5").unwrap(),
            Duration::from_millis(2500)
        );
        for wrong in ["run_lease_secs = 0", "run_lease_secs = 3601"] {
            assert_eq!(
                lease(wrong).unwrap_err().to_string(),
                "store.run_lease_secs: must be between 0 and 3600 seconds"
            );
        }
    }

    #[test]
    fn runs_are_shared_unless_share_runs_is_false() {
        let share = |text: &str| parse_share_runs(&toml::from_str(text).unwrap());
        assert!(share(""));
        assert!(share("share_runs = true"));
        assert!(!share("share_runs = false"));
    }

    #[test]
    fn a_password_in_the_url_is_refused_without_repeating_it() {
        let text = "backend = \"postgres\"\nurl = \"postgres://rojos:hunter22@db/chats\"";
        let err = parse(text, &no_env).unwrap_err().to_string();
        assert_eq!(
            err,
            "store.url: a password inside the url is refused: put it in an environment variable \
             and name that variable in store.password_env"
        );
    }

    #[test]
    fn wrong_store_settings_name_their_key() {
        let cases = [
            ("backend = \"mysql\"", "store.backend: unknown backend \"mysql\": expected \"sqlite\" or \"postgres\""),
            ("url = \"postgres://rojos@db/chats\"", "store.url: only used with backend = \"postgres\""),
            ("backend = \"postgres\"", "store.url: required with backend = \"postgres\" (postgres://user@host:port/database)"),
            ("backend = \"postgres\"\nurl = \"postgres://rojos@db/c\"\npassword_env = \"NOPE\"", "store.password_env: environment variable NOPE is not set"),
            ("backend = \"postgres\"\nurl = \"postgres://rojos@db/c\"\ntls = \"on\"", "store.tls: unknown mode \"on\": expected \"disable\", \"require\" or \"verify-full\""),
            ("backend = \"postgres\"\nurl = \"postgres://rojos@db/c\"\nca_file = \"x.pem\"", "store.ca_file: only used with tls = \"verify-full\""),
            ("backend = \"postgres\"\nurl = \"postgres://rojos@db/c\"\npool_size = 0", "store.pool_size: must be at least 1"),
            ("prepared_statements = false", "store.prepared_statements: only used with backend = \"postgres\""),
            ("share_runs = false", "store.share_runs: only used with backend = \"postgres\""),
            ("search_timeout_secs = 0", "store.search_timeout_secs: must be between 0 and 600 seconds"),
        ];
        for (text, expected) in cases {
            assert_eq!(
                parse(text, &no_env).unwrap_err().to_string(),
                expected,
                "{text}"
            );
        }
    }
}
