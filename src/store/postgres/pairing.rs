//! [`PairingStore`] and [`CursorStore`] over PostgreSQL: `pairing_codes`,
//! `pairing_approved`, `pairing_owners`; `cursors` and `group_history`. Issuing a code and
//! making an owner take an advisory lock (per channel account, per channel), so several
//! processes keep the limits: at most [`MAX_PENDING`](crate::store::ports::MAX_PENDING) codes per
//! account, one owner made by pairing.

use super::conn::Conn;

use super::{PgStore, big, pg_err, transaction};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{
    CODE_TTL_MS, CursorStore, PairingOutcome, PairingRequest, PairingStore, StoreFuture, new_code,
    pending_outcome,
};

/// The first key of the advisory lock that serializes the writers of `group_history`
/// ("chgh"; the second is the schema's hash). Not `lock.rs`'s ("chla"), which the store
/// holds for as long as it is open.
const GROUP_HISTORY_LOCK: i32 = 0x6368_6768;

/// Takes the transaction's advisory lock named `name`.
async fn lock(c: &Conn, name: &str) -> Result<(), StoreError> {
    c.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&name])
        .await
        .map_err(pg_err)?;
    Ok(())
}

/// Removes expired codes; returns the valid requests, by channel and code.
async fn valid_requests(c: &Conn, now_ms: u64) -> Result<Vec<PairingRequest>, StoreError> {
    let oldest = big(now_ms.saturating_sub(CODE_TTL_MS));
    c.execute(
        "DELETE FROM pairing_codes WHERE created_ms < $1",
        &[&oldest],
    )
    .await
    .map_err(pg_err)?;
    let rows = c
        .query(
            "SELECT request FROM pairing_codes ORDER BY channel, code",
            &[],
        )
        .await
        .map_err(pg_err)?;
    rows.iter()
        .map(|r| decode("pairing", r.get::<_, &[u8]>(0)))
        .collect()
}

/// Removes and returns the request of `code` on `channel`, if there and not expired.
async fn take_request(
    c: &Conn,
    channel: &str,
    code: &str,
    now_ms: u64,
) -> Result<Option<PairingRequest>, StoreError> {
    let row = c
        .query_opt(
            "DELETE FROM pairing_codes WHERE channel = $1 AND code = $2 RETURNING request",
            &[&channel, &code],
        )
        .await
        .map_err(pg_err)?;
    let Some(row) = row else { return Ok(None) };
    let request: PairingRequest = decode("pairing", row.get::<_, &[u8]>(0))?;
    Ok((now_ms.saturating_sub(request.created_ms) <= CODE_TTL_MS).then_some(request))
}

impl PairingStore for PgStore {
    fn request_pairing(
        &self,
        channel: &str,
        account: &str,
        sender_id: &str,
        sender_name: &str,
        now_ms: u64,
    ) -> Result<PairingOutcome, StoreError> {
        let request = PairingRequest {
            code: new_code(),
            channel: channel.into(),
            account: account.into(),
            sender_id: sender_id.into(),
            sender_name: sender_name.into(),
            created_ms: now_ms,
        };
        self.blocking(move |c| async move {
            transaction(&c, async |c: &Conn| {
                lock(c, &format!("pairing:{}:{}", request.channel, request.account)).await?;
                let pending = valid_requests(c, now_ms).await?;
                let (channel, account) = (&request.channel, &request.account);
                if let Some(outcome) =
                    pending_outcome(&pending, channel, account, &request.sender_id, now_ms)
                {
                    return Ok(outcome);
                }
                c.execute(
                    "INSERT INTO pairing_codes (channel, code, account, sender_id, created_ms, request) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (channel, code) DO UPDATE SET \
                     account = EXCLUDED.account, sender_id = EXCLUDED.sender_id, \
                     created_ms = EXCLUDED.created_ms, request = EXCLUDED.request",
                    &[
                        &request.channel,
                        &request.code,
                        &request.account,
                        &request.sender_id,
                        &big(now_ms),
                        &encode(&request)?,
                    ],
                )
                .await
                .map_err(pg_err)?;
                Ok(PairingOutcome::New(request.code))
            })
            .await
        })
    }

    fn pairing_requests(&self, now_ms: u64) -> Result<Vec<PairingRequest>, StoreError> {
        self.blocking(move |c| async move { valid_requests(&c, now_ms).await })
    }

    fn approve_pairing<'a>(
        &'a self,
        channel: &'a str,
        code: &'a str,
        now_ms: u64,
        may_make_owner: bool,
    ) -> StoreFuture<'a, Option<(PairingRequest, bool)>> {
        let (channel, code) = (channel.to_owned(), code.trim().to_uppercase());
        Box::pin(self.call(move |c| async move {
            transaction(&c, async |c: &Conn| {
                let Some(request) = take_request(c, &channel, &code, now_ms).await? else {
                    return Ok(None);
                };
                c.execute(
                    "INSERT INTO pairing_approved (channel, account, sender_id, approved_ms) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                    &[&channel, &request.account, &request.sender_id, &big(now_ms)],
                )
                .await
                .map_err(pg_err)?;
                lock(c, &format!("owner:{channel}")).await?;
                let has_owner = c
                    .query_opt(
                        "SELECT 1 FROM pairing_owners WHERE channel = $1 LIMIT 1",
                        &[&channel],
                    )
                    .await
                    .map_err(pg_err)?
                    .is_some();
                let becomes_owner = may_make_owner && !has_owner;
                if becomes_owner {
                    c.execute(
                        "INSERT INTO pairing_owners (channel, sender_id, since_ms) VALUES ($1, $2, $3)",
                        &[&channel, &request.sender_id, &big(now_ms)],
                    )
                    .await
                    .map_err(pg_err)?;
                }
                Ok(Some((request, becomes_owner)))
            })
            .await
        }))
    }

    fn reject_pairing<'a>(
        &'a self,
        channel: &'a str,
        code: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, Option<PairingRequest>> {
        let (channel, code) = (channel.to_owned(), code.trim().to_uppercase());
        Box::pin(self.call(move |c| async move { take_request(&c, &channel, &code, now_ms).await }))
    }

    fn is_paired(&self, channel: &str, account: &str, sender_id: &str) -> Result<bool, StoreError> {
        let (channel, account, sender) =
            (channel.to_owned(), account.to_owned(), sender_id.to_owned());
        self.blocking(move |c| async move {
            let row = c
                .query_opt(
                    "SELECT 1 FROM pairing_approved WHERE channel = $1 AND account = $2 AND sender_id = $3",
                    &[&channel, &account, &sender],
                )
                .await
                .map_err(pg_err)?;
            Ok(row.is_some())
        })
    }

    fn is_paired_owner(&self, channel: &str, sender_id: &str) -> Result<bool, StoreError> {
        let (channel, sender) = (channel.to_owned(), sender_id.to_owned());
        self.blocking(move |c| async move {
            let row = c
                .query_opt(
                    "SELECT 1 FROM pairing_owners WHERE channel = $1 AND sender_id = $2",
                    &[&channel, &sender],
                )
                .await
                .map_err(pg_err)?;
            Ok(row.is_some())
        })
    }
}

impl CursorStore for PgStore {
    fn get_cursor(&self, name: &str) -> Result<Option<i64>, StoreError> {
        let name = name.to_owned();
        self.blocking(move |c| async move {
            let row = c
                .query_opt("SELECT value FROM cursors WHERE name = $1", &[&name])
                .await
                .map_err(pg_err)?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn cursors_ending(&self, suffix: &str) -> Result<Vec<(String, i64)>, StoreError> {
        let suffix = suffix.to_owned();
        let mut all = self.cursors_starting("")?;
        all.retain(|(name, _)| name.ends_with(&suffix));
        Ok(all)
    }

    fn cursors_starting(&self, prefix: &str) -> Result<Vec<(String, i64)>, StoreError> {
        let prefix = prefix.to_owned();
        self.blocking(move |c| async move {
            let rows = c
                .query(
                    "SELECT name, value FROM cursors WHERE starts_with(name, $1) ORDER BY name",
                    &[&prefix],
                )
                .await
                .map_err(pg_err)?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    fn set_cursor<'a>(&'a self, name: &'a str, value: i64) -> StoreFuture<'a, ()> {
        let name = name.to_owned();
        Box::pin(self.call(move |c| async move {
            c.execute(
                "INSERT INTO cursors (name, value) VALUES ($1, $2) \
                 ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
                &[&name, &value],
            )
            .await
            .map_err(pg_err)?;
            Ok(())
        }))
    }

    fn raise_cursor<'a>(&'a self, name: &'a str, value: i64) -> StoreFuture<'a, ()> {
        let name = name.to_owned();
        Box::pin(self.call(move |c| async move {
            c.execute(
                "INSERT INTO cursors (name, value) VALUES ($1, $2) \
                 ON CONFLICT (name) DO UPDATE SET value = GREATEST(cursors.value, EXCLUDED.value)",
                &[&name, &value],
            )
            .await
            .map_err(pg_err)?;
            Ok(())
        }))
    }

    fn save_group_history(&self, key: &str, lines: &[String]) -> Result<(), StoreError> {
        let (key, bytes) = (key.to_owned(), encode(lines)?);
        self.blocking(move |c| async move {
            c.execute(
                "INSERT INTO group_history (session_key, lines) VALUES ($1, $2) \
                 ON CONFLICT (session_key) DO UPDATE SET lines = EXCLUDED.lines",
                &[&key, &bytes],
            )
            .await
            .map_err(pg_err)?;
            Ok(())
        })
    }

    fn clear_group_history(&self, key: &str) -> Result<(), StoreError> {
        let key = key.to_owned();
        self.blocking(move |c| async move {
            c.execute("DELETE FROM group_history WHERE session_key = $1", &[&key])
                .await
                .map_err(pg_err)?;
            Ok(())
        })
    }

    fn append_group_line(
        &self,
        key: &str,
        line: &str,
        per_group: usize,
        groups: usize,
    ) -> Result<(), StoreError> {
        let (key, line) = (key.to_owned(), line.to_owned());
        let empty = encode(&Vec::<String>::new())?;
        let groups = i64::try_from(groups).unwrap_or(i64::MAX);
        self.blocking(move |c| async move {
            transaction(&c, async |c: &Conn| {
                // Writers of this schema's group history take turns: each locks its group's
                // row and its trim deletes other groups' rows, so two writers at the cap
                // would otherwise each wait for the row the other holds (a deadlock).
                c.execute(
                    "SELECT pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '')))",
                    &[&GROUP_HISTORY_LOCK],
                )
                .await
                .map_err(pg_err)?;
                // The row is made first, so that every writer locks the same row.
                c.execute(
                    "INSERT INTO group_history (session_key, lines) VALUES ($1, $2) \
                     ON CONFLICT (session_key) DO NOTHING",
                    &[&key, &empty],
                )
                .await
                .map_err(pg_err)?;
                let row = c
                    .query_one(
                        "SELECT lines FROM group_history WHERE session_key = $1 FOR UPDATE",
                        &[&key],
                    )
                    .await
                    .map_err(pg_err)?;
                let mut lines: Vec<String> = decode("group_history", row.get::<_, &[u8]>(0))?;
                lines.push(line);
                let over = lines.len().saturating_sub(per_group);
                lines.drain(..over);
                c.execute(
                    "UPDATE group_history SET lines = $2, touched = now() WHERE session_key = $1",
                    &[&key, &encode(&lines)?],
                )
                .await
                .map_err(pg_err)?;
                c.execute(
                    "DELETE FROM group_history WHERE session_key IN (SELECT session_key \
                     FROM group_history ORDER BY touched DESC, session_key OFFSET $1)",
                    &[&groups],
                )
                .await
                .map_err(pg_err)?;
                Ok(())
            })
            .await
        })
    }

    fn take_group_history(&self, key: &str) -> Result<Vec<String>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |c| async move {
            let row = c
                .query_opt(
                    "DELETE FROM group_history WHERE session_key = $1 RETURNING lines",
                    &[&key],
                )
                .await
                .map_err(pg_err)?;
            match row {
                Some(row) => decode("group_history", row.get::<_, &[u8]>(0)),
                None => Ok(Vec::new()),
            }
        })
    }

    fn group_histories(&self) -> Result<Vec<(String, Vec<String>)>, StoreError> {
        self.blocking(move |c| async move {
            let rows = c
                .query(
                    "SELECT session_key, lines FROM group_history ORDER BY session_key",
                    &[],
                )
                .await
                .map_err(pg_err)?;
            rows.iter()
                .map(|r| Ok((r.get(0), decode("group_history", r.get::<_, &[u8]>(1))?)))
                .collect()
        })
    }
}
