//! `--store`: which conversation store the host under test uses. SQLite is the host's default
//! (`<storage>/rojos.db`, no `[store]` section); PostgreSQL is a throwaway cluster this
//! process starts (Debian's `postgresql` package, the same `PgCluster` the end-to-end tests
//! use), one fresh database per host, its password handed to the host through the
//! environment (`store.password_env`), never written in the config. The cluster's server
//! processes are on the same machine, so their CPU time is read too: what the store costs.

use std::{path::Path, time::Duration};

use anyhow::Context;
use rojos_conversations::test_cluster::{ClusterOptions, PgCluster};

use crate::procfs::{processes, stat_of};

/// The environment variable the generated `[store]` names for the PostgreSQL password.
pub(crate) const PASSWORD_VAR: &str = "ROJOS_BENCH_PG_PASSWORD";

/// The `--store` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StoreChoice {
    /// The embedded SQLite file (the default).
    Sqlite,
    /// A throwaway PostgreSQL cluster.
    Postgres,
    /// SQLite, then PostgreSQL, compared side by side.
    Both,
}

impl StoreChoice {
    /// The backends to run, in order.
    pub(crate) fn backends(self) -> &'static [Backend] {
        match self {
            StoreChoice::Sqlite => &[Backend::Sqlite],
            StoreChoice::Postgres => &[Backend::Postgres],
            StoreChoice::Both => &[Backend::Sqlite, Backend::Postgres],
        }
    }
}

/// One conversation store backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// `[store] backend = "sqlite"` (the default).
    Sqlite,
    /// `[store] backend = "postgres"`.
    Postgres,
}

impl Backend {
    /// The name printed beside the figures.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        }
    }
}

/// What a host needs to use a store: its `[store]` section and its environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoreSetup {
    /// Appended to the generated `rojos.toml` (empty for the default SQLite store).
    pub(crate) config: String,
    /// Set in the host's environment.
    pub(crate) env: Vec<(&'static str, String)>,
}

/// A backend ready for hosts; a PostgreSQL cluster is stopped and deleted on drop.
#[derive(Debug)]
pub(crate) struct Store {
    /// Which backend.
    pub(crate) backend: Backend,
    cluster: Option<PgCluster>,
}

impl Store {
    /// Readies `backend`: for PostgreSQL, starts a throwaway cluster (a few seconds).
    pub(crate) async fn start(backend: Backend) -> anyhow::Result<Store> {
        let cluster = match backend {
            Backend::Sqlite => None,
            // Durable, as the SQLite file is: a fair comparison, not the tests' unsynced cluster.
            Backend::Postgres => Some(
                tokio::task::spawn_blocking(|| {
                    PgCluster::start_with(ClusterOptions {
                        durable: true,
                        ..ClusterOptions::default()
                    })
                })
                .await?
                .context("cannot start a throwaway PostgreSQL cluster for --store postgres")?,
            ),
        };
        Ok(Store { backend, cluster })
    }

    /// The setup of a new host: with PostgreSQL, on a fresh empty database.
    pub(crate) async fn setup(&self) -> anyhow::Result<StoreSetup> {
        let Some(cluster) = &self.cluster else {
            return Ok(StoreSetup::default());
        };
        let database = tokio::task::block_in_place(|| cluster.create_database())
            .context("cannot create a database in the throwaway PostgreSQL cluster")?;
        Ok(postgres_setup(&cluster.url(&database), cluster.password()))
    }

    /// CPU time the PostgreSQL server has used so far: the postmaster, its running backends
    /// and workers, and those that ended. None with SQLite (its work is the host's) or when
    /// `/proc` cannot tell.
    pub(crate) fn server_cpu(&self) -> Option<Duration> {
        let cluster = self.cluster.as_ref()?;
        // The cluster's folder holds the CA file and, under data/, the postmaster's pid.
        let data = cluster.ca_file().parent()?.join("data");
        server_cpu_of(&data).ok()
    }
}

/// The CPU time of the postmaster of the cluster in `data` and of its children.
fn server_cpu_of(data: &Path) -> anyhow::Result<Duration> {
    let pid_file = std::fs::read_to_string(data.join("postmaster.pid"))?;
    let postmaster: u32 = pid_file
        .lines()
        .next()
        .context("empty postmaster.pid")?
        .trim()
        .parse()?;
    let own = stat_of(&format!("/proc/{postmaster}/stat"))?;
    let mut total = own.cpu + own.reaped_children_cpu;
    for (_, stat) in processes()? {
        if stat.parent == postmaster {
            total += stat.cpu;
        }
    }
    Ok(total)
}

/// The `[store]` section for a PostgreSQL database at `url` (no password in it) and the
/// environment that carries `password`.
fn postgres_setup(url: &str, password: String) -> StoreSetup {
    StoreSetup {
        config: format!(
            "\n[store]\nbackend = \"postgres\"\nurl = {url:?}\npassword_env = \"{PASSWORD_VAR}\"\n"
        ),
        env: vec![(PASSWORD_VAR, password)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_postgres_password_goes_through_the_environment_only() {
        let setup = postgres_setup(
            "postgres://rojos@127.0.0.1:5433/test_0",
            "s3cret-pw".to_owned(),
        );
        assert!(!setup.config.contains("s3cret-pw"), "{}", setup.config);
        assert!(
            setup
                .config
                .contains("url = \"postgres://rojos@127.0.0.1:5433/test_0\""),
            "{}",
            setup.config
        );
        assert!(
            setup
                .config
                .contains("password_env = \"ROJOS_BENCH_PG_PASSWORD\""),
            "{}",
            setup.config
        );
        assert_eq!(
            setup.env,
            vec![(PASSWORD_VAR, "s3cret-pw".to_owned())],
            "the host gets the password"
        );
    }

    /// Needs Debian's `postgresql` package, as the host's PostgreSQL tests do.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_postgres_servers_cpu_counts_its_ended_backends() {
        let sqlite = Store::start(Backend::Sqlite)
            .await
            .expect("no cluster needed");
        assert_eq!(sqlite.server_cpu(), None);
        assert!(sqlite.setup().await.expect("no setup").config.is_empty());

        let store = Store::start(Backend::Postgres)
            .await
            .expect("a throwaway cluster (apt-get install -y postgresql)");
        let setup = store.setup().await.expect("a database");
        assert!(setup.config.contains("/test_0\""), "{}", setup.config);
        let before = store.server_cpu().expect("the server's CPU is readable");
        let cluster = store.cluster.as_ref().expect("a cluster");
        // A backend busy for a while (about a second of CPU), then ended with its psql.
        cluster
            .psql(
                "postgres",
                "SELECT count(*) FROM generate_series(1, 5000000) AS a(x) WHERE x::text LIKE '%7%'",
            )
            .expect("psql");
        // The ended backend's CPU is counted once the server has reaped it, which may come a
        // moment after psql returns: wait for that (generously), then check the amount.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut after = store.server_cpu().expect("the server's CPU is readable");
        while after < before + Duration::from_millis(100) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            after = store.server_cpu().expect("the server's CPU is readable");
        }
        assert!(
            after >= before + Duration::from_millis(100),
            "{before:?} → {after:?}"
        );
    }

    #[test]
    fn both_runs_sqlite_then_postgres() {
        assert_eq!(StoreChoice::Sqlite.backends(), [Backend::Sqlite]);
        assert_eq!(StoreChoice::Postgres.backends(), [Backend::Postgres]);
        assert_eq!(
            StoreChoice::Both.backends(),
            [Backend::Sqlite, Backend::Postgres]
        );
    }
}
