//! [`BindingStore`] over PostgreSQL: `bindings`, `subagents` (the link's state is a column,
//! so stopping is one conditional update) and `targets`. Spawning and finishing a sub-agent
//! write `pending` (and `dedupe`) in the same transaction as the link.

use chela_channel::Conversation;
use tokio_postgres::Row;

use super::conn::Conn;

use super::queue::{enqueue_marked, enqueue_plain};
use super::{PgStore, big, bigs, pg_err, transaction};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{
    Binding, BindingStore, PendingTurn, StoreFuture, SubagentLink, SubagentState,
};

/// A state as stored.
fn state_name(state: SubagentState) -> &'static str {
    match state {
        SubagentState::Running => "running",
        SubagentState::Stopped => "stopped",
        SubagentState::Done => "done",
    }
}

/// A row of `child, state, link` as the child's key and its link (the column's state wins).
fn link_of(row: &Row) -> Result<(String, SubagentLink), StoreError> {
    let mut link: SubagentLink = decode("subagents", row.get::<_, &[u8]>(2))?;
    link.state = match row.get::<_, &str>(1) {
        "running" => SubagentState::Running,
        "stopped" => SubagentState::Stopped,
        _ => SubagentState::Done,
    };
    Ok((row.get(0), link))
}

impl BindingStore for PgStore {
    fn get_binding(&self, key: &str) -> Result<Option<Binding>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |c| async move {
            let row = c
                .query_opt(
                    "SELECT binding FROM bindings WHERE session_key = $1",
                    &[&key],
                )
                .await
                .map_err(pg_err)?;
            row.map(|r| decode("bindings", r.get::<_, &[u8]>(0)))
                .transpose()
        })
    }

    fn put_binding<'a>(&'a self, binding: &'a Binding) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let (key, bytes) = (binding.session_key.clone(), encode(binding)?);
            self.call(move |c| async move {
                c.execute(
                    "INSERT INTO bindings (session_key, binding) VALUES ($1, $2) \
                     ON CONFLICT (session_key) DO UPDATE SET binding = EXCLUDED.binding",
                    &[&key, &bytes],
                )
                .await
                .map_err(pg_err)?;
                Ok(())
            })
            .await
        })
    }

    fn remove_binding<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Binding>> {
        let key = key.to_owned();
        Box::pin(self.call(move |c| async move {
            let row = c
                .query_opt(
                    "DELETE FROM bindings WHERE session_key = $1 RETURNING binding",
                    &[&key],
                )
                .await
                .map_err(pg_err)?;
            row.map(|r| decode("bindings", r.get::<_, &[u8]>(0)))
                .transpose()
        }))
    }

    fn list_bindings(&self) -> Result<Vec<Binding>, StoreError> {
        self.blocking(move |c| async move {
            let rows = c
                .query("SELECT binding FROM bindings ORDER BY session_key", &[])
                .await
                .map_err(pg_err)?;
            rows.iter()
                .map(|r| decode("bindings", r.get::<_, &[u8]>(0)))
                .collect()
        })
    }

    fn spawn_subagent<'a>(
        &'a self,
        child: &'a str,
        link: &'a SubagentLink,
        first: &'a PendingTurn,
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let (link_bytes, turn) = (encode(link)?, encode(first)?);
            let (child, parent) = (child.to_owned(), link.parent.clone());
            let (created, state) = (big(link.created_ms), state_name(link.state));
            let key = first.session_key.clone();
            self.call(move |c| async move {
                transaction(&c, async |c: &Conn| {
                    c.execute(
                        "INSERT INTO subagents (child, parent, created_ms, state, link) \
                         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (child) DO UPDATE SET \
                         parent = EXCLUDED.parent, created_ms = EXCLUDED.created_ms, \
                         state = EXCLUDED.state, link = EXCLUDED.link",
                        &[&child, &parent, &created, &state, &link_bytes],
                    )
                    .await
                    .map_err(pg_err)?;
                    enqueue_plain(c, &key, &turn).await
                })
                .await
            })
            .await
        })
    }

    fn subagent(&self, child: &str) -> Result<Option<SubagentLink>, StoreError> {
        let child = child.to_owned();
        self.blocking(move |c| async move {
            let row = c
                .query_opt(
                    "SELECT child, state, link FROM subagents WHERE child = $1",
                    &[&child],
                )
                .await
                .map_err(pg_err)?;
            Ok(row.as_ref().map(link_of).transpose()?.map(|(_, link)| link))
        })
    }

    fn subagents_of(&self, parent: &str) -> Result<Vec<(String, SubagentLink)>, StoreError> {
        let parent = parent.to_owned();
        self.blocking(move |c| async move {
            let rows = c
                .query(
                    "SELECT child, state, link FROM subagents WHERE parent = $1 \
                     ORDER BY created_ms, child",
                    &[&parent],
                )
                .await
                .map_err(pg_err)?;
            rows.iter().map(link_of).collect()
        })
    }

    fn stop_subagent(&self, child: &str) -> Result<bool, StoreError> {
        let child = child.to_owned();
        self.blocking(move |c| async move {
            let n = c
                .execute(
                    "UPDATE subagents SET state = 'stopped' WHERE child = $1 AND state = 'running'",
                    &[&child],
                )
                .await
                .map_err(pg_err)?;
            Ok(n == 1)
        })
    }

    fn finish_subagent<'a>(
        &'a self,
        child: &'a str,
        seqs: &'a [u64],
        follow_up: Option<(&'a str, &'a PendingTurn)>,
    ) -> StoreFuture<'a, Option<u64>> {
        Box::pin(async move {
            let follow_up = match follow_up {
                Some((mark, turn)) => {
                    Some((mark.to_owned(), turn.session_key.clone(), encode(turn)?))
                }
                None => None,
            };
            let (child, seqs) = (child.to_owned(), bigs(seqs));
            self.call(move |c| async move {
                transaction(&c, async |c: &Conn| {
                    finish_in(c, &child, &seqs, follow_up).await
                })
                .await
            })
            .await
        })
    }

    fn set_target(&self, key: &str, to: &Conversation) -> Result<(), StoreError> {
        let (key, bytes) = (key.to_owned(), encode(to)?);
        self.blocking(move |c| async move {
            c.execute(
                "INSERT INTO targets (session_key, conversation) VALUES ($1, $2) \
                 ON CONFLICT (session_key) DO UPDATE SET conversation = EXCLUDED.conversation \
                 WHERE targets.conversation <> EXCLUDED.conversation",
                &[&key, &bytes],
            )
            .await
            .map_err(pg_err)?;
            Ok(())
        })
    }

    fn target(&self, key: &str) -> Result<Option<Conversation>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |c| async move {
            let row = c
                .query_opt(
                    "SELECT conversation FROM targets WHERE session_key = $1",
                    &[&key],
                )
                .await
                .map_err(pg_err)?;
            row.map(|r| decode("targets", r.get::<_, &[u8]>(0)))
                .transpose()
        })
    }
}

/// Inside a transaction: [`BindingStore::finish_subagent`]. An unknown child fails, which
/// rolls everything back; a child settled before only loses its pending turns.
async fn finish_in(
    c: &Conn,
    child: &str,
    seqs: &[i64],
    follow_up: Option<(String, String, Vec<u8>)>,
) -> Result<Option<u64>, StoreError> {
    c.execute("DELETE FROM pending WHERE seq = ANY($1)", &[&seqs])
        .await
        .map_err(pg_err)?;
    let row = c
        .query_opt(
            "SELECT state FROM subagents WHERE child = $1 FOR UPDATE",
            &[&child],
        )
        .await
        .map_err(pg_err)?
        .ok_or_else(|| StoreError::UnknownSession(child.to_owned()))?;
    let state: String = row.get(0);
    if state == "done" {
        return Ok(None);
    }
    c.execute(
        "UPDATE subagents SET state = 'done' WHERE child = $1",
        &[&child],
    )
    .await
    .map_err(pg_err)?;
    match follow_up {
        Some((mark, key, turn)) if state == "running" => {
            enqueue_marked(c, &mark, &key, &turn).await
        }
        _ => Ok(None),
    }
}
