//! One connection of the store and its prepared statements: each SQL text is prepared once
//! per connection and then only executed, which halves the round trips of a store call.

use std::cell::RefCell;
use std::collections::HashMap;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Error, Row, Statement};

/// A connection with a cache of prepared statements, used by one worker lane at a time.
pub(super) struct Conn {
    client: Client,
    statements: RefCell<HashMap<String, Statement>>,
}

impl Conn {
    /// Wraps a connected client.
    pub(super) fn new(client: Client) -> Conn {
        Conn {
            client,
            statements: RefCell::new(HashMap::new()),
        }
    }

    /// Whether the connection is gone (the server or the network closed it).
    pub(super) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// The prepared statement of `sql`, preparing it on first use.
    async fn statement(&self, sql: &str) -> Result<Statement, Error> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql).await?;
        self.statements
            .borrow_mut()
            .insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    /// Runs `sql` (no parameters, several statements allowed, not prepared).
    pub(super) async fn batch_execute(&self, sql: &str) -> Result<(), Error> {
        self.client.batch_execute(sql).await
    }

    /// Runs `sql`; returns how many rows it changed.
    pub(super) async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Error> {
        let statement = self.statement(sql).await?;
        self.client.execute(&statement, params).await
    }

    /// Runs `sql`; returns its rows.
    pub(super) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.client.query(&statement, params).await
    }

    /// Runs `sql`, which returns exactly one row.
    pub(super) async fn query_one(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        let statement = self.statement(sql).await?;
        self.client.query_one(&statement, params).await
    }

    /// Runs `sql`, which returns at most one row.
    pub(super) async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.client.query_opt(&statement, params).await
    }
}
