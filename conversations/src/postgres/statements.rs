//! How the PostgreSQL store sends a statement: prepared once per connection and reused
//! (named statements, [`StatementMode::Prepared`], the default), or sent unnamed with each
//! execution ([`StatementMode::Unnamed`]), which a transaction pooler such as PgBouncer in
//! `pool_mode = transaction` needs: a named statement lives on one server connection, and
//! the pooler hands each transaction to whichever server connection is free
//! (`docs/deploy.md`, "Behind a connection pooler"). Either way the parameters' types are
//! sent with the statement and the parameters are bound, never spliced into the SQL, so
//! both modes run the same statements alike: an unnamed one costs the server a parse and a
//! plan per execution, still one round trip.

use async_trait::async_trait;
use deadpool_postgres::{ClientWrapper, Transaction};
use futures_util::TryStreamExt;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Error, Row};

/// How statements are sent to the server (`[store] prepared_statements`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatementMode {
    /// Each statement is prepared once per connection (a named statement, kept in the
    /// connection's cache) and then only executed: the least work for the server.
    #[default]
    Prepared,
    /// Each execution sends the statement unnamed with its parameters in one round trip,
    /// so nothing outlives the statement: for a transaction pooler (PgBouncer in
    /// `pool_mode = transaction`), where named statements fail.
    Unnamed,
}

/// One statement: its SQL, and the types of its parameters `$1`, `$2`, … in order.
#[derive(Debug)]
pub(crate) struct Sql {
    /// The SQL text.
    pub(crate) text: &'static str,
    /// The type of each parameter.
    pub(crate) types: &'static [Type],
}

/// Parameters of a statement, in order.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// A connection (or a transaction on one) that runs [`Sql`] in a [`StatementMode`].
#[async_trait]
pub(crate) trait Run: Sync {
    /// Every row the statement returns.
    async fn rows(
        &self,
        mode: StatementMode,
        sql: &Sql,
        params: Params<'_>,
    ) -> Result<Vec<Row>, Error>;

    /// The one row the statement returns (an error if it returns none or several).
    async fn one(&self, mode: StatementMode, sql: &Sql, params: Params<'_>) -> Result<Row, Error>;

    /// The row the statement returns, if any (an error if it returns several).
    async fn opt(
        &self,
        mode: StatementMode,
        sql: &Sql,
        params: Params<'_>,
    ) -> Result<Option<Row>, Error>;

    /// How many rows the statement changed.
    async fn count(&self, mode: StatementMode, sql: &Sql, params: Params<'_>)
        -> Result<u64, Error>;
}

/// The parameters with their types, as the unnamed statements take them.
fn typed<'a>(sql: &Sql, params: Params<'a>) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    debug_assert_eq!(sql.types.len(), params.len(), "{}", sql.text);
    params
        .iter()
        .zip(sql.types)
        .map(|(param, ty)| (*param, ty.clone()))
        .collect()
}

/// Implements [`Run`] for a deadpool client or transaction: both keep a statement cache
/// (`prepare_typed_cached`) and deref to a tokio-postgres type with the `query_typed` family.
macro_rules! run_on {
    ($($client:tt)*) => {
        #[async_trait]
        impl Run for $($client)* {
            async fn rows(
                &self,
                mode: StatementMode,
                sql: &Sql,
                params: Params<'_>,
            ) -> Result<Vec<Row>, Error> {
                match mode {
                    StatementMode::Prepared => {
                        let statement = self.prepare_typed_cached(sql.text, sql.types).await?;
                        self.query(&statement, params).await
                    }
                    StatementMode::Unnamed => self.query_typed(sql.text, &typed(sql, params)).await,
                }
            }

            async fn one(
                &self,
                mode: StatementMode,
                sql: &Sql,
                params: Params<'_>,
            ) -> Result<Row, Error> {
                match mode {
                    StatementMode::Prepared => {
                        let statement = self.prepare_typed_cached(sql.text, sql.types).await?;
                        self.query_one(&statement, params).await
                    }
                    StatementMode::Unnamed => {
                        self.query_typed_one(sql.text, &typed(sql, params)).await
                    }
                }
            }

            async fn opt(
                &self,
                mode: StatementMode,
                sql: &Sql,
                params: Params<'_>,
            ) -> Result<Option<Row>, Error> {
                match mode {
                    StatementMode::Prepared => {
                        let statement = self.prepare_typed_cached(sql.text, sql.types).await?;
                        self.query_opt(&statement, params).await
                    }
                    StatementMode::Unnamed => {
                        self.query_typed_opt(sql.text, &typed(sql, params)).await
                    }
                }
            }

            async fn count(
                &self,
                mode: StatementMode,
                sql: &Sql,
                params: Params<'_>,
            ) -> Result<u64, Error> {
                match mode {
                    StatementMode::Prepared => {
                        let statement = self.prepare_typed_cached(sql.text, sql.types).await?;
                        self.execute(&statement, params).await
                    }
                    StatementMode::Unnamed => {
                        let rows = self.query_typed_raw(sql.text, typed(sql, params)).await?;
                        let mut rows = std::pin::pin!(rows);
                        while rows.try_next().await?.is_some() {}
                        Ok(rows.rows_affected().unwrap_or(0))
                    }
                }
            }
        }
    };
}

run_on!(ClientWrapper);
run_on!(Transaction<'_>);
