//! How the PostgreSQL store reaches its server: [`PostgresOptions`] (parsed from a URL that
//! must not hold a password), the pool built from them, and how a database is named in
//! messages (`postgres://user@host:port/db`, never a password). TLS lives in `tls`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::Host;

use crate::error::StoreError;

use super::statements::StatementMode;
use super::tls::{self, PostgresTls};

/// Where the PostgreSQL store connects and how. The password, when set, is kept out of
/// `Debug`.
#[derive(Clone)]
pub struct PostgresOptions {
    pub(crate) config: tokio_postgres::Config,
    /// How many connections the pool keeps open at most. Default: 16.
    pub pool_size: usize,
    /// How long connecting (TCP, TLS and login) may take, and how long a call waits for a
    /// pooled connection. Default: 5 seconds.
    pub connect_timeout: Duration,
    /// How long one store or lease operation may wait for the server's answer before it
    /// fails as unavailable: a server that keeps the connection open but stops answering
    /// (hung, or its machine gone without a reset) is found out after this, not after the
    /// kernel's retransmissions give up a quarter of an hour later. Default: 10 seconds.
    pub query_timeout: Duration,
    /// TLS. Default: [`PostgresTls::Disable`].
    pub tls: PostgresTls,
    /// How statements are sent: [`StatementMode::Unnamed`] behind a transaction pooler
    /// (PgBouncer in `pool_mode = transaction`). Default: [`StatementMode::Prepared`].
    pub statements: StatementMode,
    /// How long a search may run on the server (`statement_timeout`), and wait for its
    /// turn: a quarter of `pool_size` searches run at once. Default: 10 seconds.
    pub search_timeout: Duration,
}

impl fmt::Debug for PostgresOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresOptions")
            .field("database", &describe(&self.config))
            .field(
                "password",
                &self.config.get_password().map(|_| "<redacted>"),
            )
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("query_timeout", &self.query_timeout)
            .field("tls", &self.tls)
            .field("statements", &self.statements)
            .field("search_timeout", &self.search_timeout)
            .finish()
    }
}

/// Why a database URL was refused. Messages never repeat the URL's text.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// The URL holds a password, which belongs in the environment.
    #[error("a password inside the url is refused: give it in an environment variable instead")]
    HasPassword,
    /// The URL cannot be read.
    #[error("not a PostgreSQL url (expected postgres://user@host:port/database): {reason}")]
    Invalid {
        /// What the parser said (it does not repeat the URL).
        reason: String,
    },
    /// A part the store needs is missing.
    #[error("the url names no {part} (expected postgres://user@host:port/database)")]
    Missing {
        /// `host`, `user` or `database`.
        part: &'static str,
    },
}

impl PostgresOptions {
    /// Options for `url` (`postgres://user@host[:port]/database`, or libpq's `key=value`
    /// form), with the defaults above.
    ///
    /// # Errors
    ///
    /// [`UrlError`]: it cannot be parsed, lacks a host, user or database, or holds a
    /// password.
    pub fn from_url(url: &str) -> Result<Self, UrlError> {
        let config = tokio_postgres::Config::from_str(url).map_err(|e| UrlError::Invalid {
            reason: e.to_string(),
        })?;
        if config.get_password().is_some() {
            return Err(UrlError::HasPassword);
        }
        if config.get_hosts().is_empty() {
            return Err(UrlError::Missing { part: "host" });
        }
        if config.get_user().is_none() {
            return Err(UrlError::Missing { part: "user" });
        }
        if config.get_dbname().is_none() {
            return Err(UrlError::Missing { part: "database" });
        }
        Ok(Self {
            config,
            pool_size: 16,
            connect_timeout: Duration::from_secs(5),
            query_timeout: Duration::from_secs(10),
            tls: PostgresTls::Disable,
            statements: StatementMode::Prepared,
            search_timeout: Duration::from_secs(10),
        })
    }

    /// The same options with the password to log in with.
    pub fn with_password(mut self, password: &str) -> Self {
        self.config.password(password);
        self
    }

    /// The database as messages name it: `postgres://user@host:port/database`.
    pub fn database(&self) -> String {
        describe(&self.config)
    }

    /// The client configuration with the time-out and TLS mode applied.
    pub(crate) fn client_config(&self) -> tokio_postgres::Config {
        let mut config = self.config.clone();
        // Keepalives notice a server that vanished without closing the connection (a host
        // lost, a cut network) in about half a minute instead of the kernel's two hours.
        config
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(15))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(3)
            // Sent data unacknowledged this long closes the connection (TCP_USER_TIMEOUT), so
            // a connection to a vanished server is not handed out again.
            .tcp_user_timeout(self.query_timeout)
            .connect_timeout(self.connect_timeout)
            .ssl_mode(tls::ssl_mode(&self.tls))
            .application_name("rojos");
        config
    }
}

/// A pool of at most `pool_size` connections, opened when first needed. A connection the
/// server closed (a restart, a network cut) is dropped when it is next taken from the pool
/// and a new one is made, so the store recovers by itself when the database is back.
pub(crate) fn pool(options: &PostgresOptions) -> Result<Pool, StoreError> {
    let action = || format!("connect to {}", options.database());
    let connector = tls::connector(&options.tls).map_err(|e| StoreError::backend(action(), e))?;
    let manager = Manager::from_config(
        options.client_config(),
        connector,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(options.pool_size.max(1))
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(options.connect_timeout))
        .create_timeout(Some(options.connect_timeout))
        .recycle_timeout(Some(options.connect_timeout))
        .build()
        .map_err(|e| StoreError::backend(action(), e))
}

/// `postgres://user@host:port/database`, from a parsed configuration.
pub(crate) fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => String::new(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{}@{host}:{port}/{}",
        config.get_user().unwrap_or(""),
        config.get_dbname().unwrap_or("")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_with_a_password_is_refused_without_repeating_it() {
        let err = PostgresOptions::from_url("postgres://rojos:hunter22@db:5432/rojos").unwrap_err();
        assert!(matches!(err, UrlError::HasPassword));
        assert!(!err.to_string().contains("hunter22"));
        let err =
            PostgresOptions::from_url("host=db user=rojos dbname=x password=hunter22").unwrap_err();
        assert!(matches!(err, UrlError::HasPassword));
    }

    #[test]
    fn a_url_names_its_database_without_the_password_given_later() {
        let options = PostgresOptions::from_url("postgres://rojos@db.internal:6432/chats")
            .unwrap()
            .with_password("hunter22");
        assert_eq!(
            options.database(),
            "postgres://rojos@db.internal:6432/chats"
        );
        let debug = format!("{options:?}");
        assert!(!debug.contains("hunter22"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
    }

    #[test]
    fn a_url_without_user_or_database_is_refused_naming_the_part() {
        let err = PostgresOptions::from_url("postgres://db/chats").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the url names no user (expected postgres://user@host:port/database)"
        );
        let err = PostgresOptions::from_url("postgres://rojos@db").unwrap_err();
        assert!(matches!(err, UrlError::Missing { part: "database" }));
    }
}
