//! DM pairing (`pairing`): `code:<channel>:<code>` -> [`PairingRequest`],
//! `approved:<channel>:<account>:<sender>` and `owner:<channel>:<sender>` -> approval ms.

use redb::WriteTransaction;

use super::{PAIRING, RedbStore, db_err, get, scan};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{
    CODE_TTL_MS, PairingOutcome, PairingRequest, PairingStore, StoreFuture, new_code,
    pending_outcome,
};

impl PairingStore for RedbStore {
    fn request_pairing(
        &self,
        channel: &str,
        account: &str,
        sender_id: &str,
        sender_name: &str,
        now_ms: u64,
    ) -> Result<PairingOutcome, StoreError> {
        let pending = self.pairing_requests(now_ms)?;
        if let Some(outcome) = pending_outcome(&pending, channel, account, sender_id, now_ms) {
            return Ok(outcome);
        }
        let code = new_code();
        let request = PairingRequest {
            code: code.clone(),
            channel: channel.into(),
            account: account.into(),
            sender_id: sender_id.into(),
            sender_name: sender_name.into(),
            created_ms: now_ms,
        };
        self.insert(
            PAIRING,
            code_key(channel, &code).as_bytes(),
            &encode(&request)?,
        )?;
        Ok(PairingOutcome::New(code))
    }

    /// The unexpired requests; expired ones are removed on the way.
    fn pairing_requests(&self, now_ms: u64) -> Result<Vec<PairingRequest>, StoreError> {
        let mut out = Vec::new();
        let mut expired = Vec::new();
        for (key, value) in self.scan(PAIRING, b"code:")? {
            let request: PairingRequest = decode("pairing", &value)?;
            if now_ms.saturating_sub(request.created_ms) > CODE_TTL_MS {
                expired.push(key);
            } else {
                out.push(request);
            }
        }
        if !expired.is_empty() {
            self.write(|tx| {
                let mut table = tx.open_table(PAIRING).map_err(db_err)?;
                for key in &expired {
                    table.remove(key.as_slice()).map_err(db_err)?;
                }
                Ok(())
            })?;
        }
        Ok(out)
    }

    fn approve_pairing<'a>(
        &'a self,
        channel: &'a str,
        code: &'a str,
        now_ms: u64,
        may_make_owner: bool,
    ) -> StoreFuture<'a, Option<(PairingRequest, bool)>> {
        Box::pin(async move {
            let code = code.trim().to_uppercase();
            let approved = self.write(|tx| {
                let Some(request) = take_request(tx, channel, &code, now_ms)? else {
                    return Ok(None);
                };
                let mut table = tx.open_table(PAIRING).map_err(db_err)?;
                let approved = approved_key(channel, &request.account, &request.sender_id);
                table
                    .insert(approved.as_bytes(), &now_ms.to_be_bytes()[..])
                    .map_err(db_err)?;
                let owner_prefix = format!("owner:{channel}:");
                let has_owner = !scan(&table, owner_prefix.as_bytes())?.is_empty();
                let becomes_owner = may_make_owner && !has_owner;
                if becomes_owner {
                    let owner = format!("{owner_prefix}{}", request.sender_id);
                    table
                        .insert(owner.as_bytes(), &now_ms.to_be_bytes()[..])
                        .map_err(db_err)?;
                }
                Ok(Some((request, becomes_owner)))
            })?;
            self.sync().await?;
            Ok(approved)
        })
    }

    fn reject_pairing<'a>(
        &'a self,
        channel: &'a str,
        code: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, Option<PairingRequest>> {
        Box::pin(async move {
            let code = code.trim().to_uppercase();
            let taken = self.write(|tx| take_request(tx, channel, &code, now_ms))?;
            self.sync().await?;
            Ok(taken)
        })
    }

    fn is_paired(&self, channel: &str, account: &str, sender_id: &str) -> Result<bool, StoreError> {
        let key = approved_key(channel, account, sender_id);
        Ok(self.get(PAIRING, key.as_bytes())?.is_some())
    }

    fn is_paired_owner(&self, channel: &str, sender_id: &str) -> Result<bool, StoreError> {
        let key = format!("owner:{channel}:{sender_id}");
        Ok(self.get(PAIRING, key.as_bytes())?.is_some())
    }
}

/// Inside a transaction: removes the request with `code`; returns it when it had not
/// expired.
fn take_request(
    tx: &WriteTransaction,
    channel: &str,
    code: &str,
    now_ms: u64,
) -> Result<Option<PairingRequest>, StoreError> {
    let mut table = tx.open_table(PAIRING).map_err(db_err)?;
    let key = code_key(channel, code);
    let Some(bytes) = get(&table, key.as_bytes())? else {
        return Ok(None);
    };
    table.remove(key.as_bytes()).map_err(db_err)?;
    let request: PairingRequest = decode("pairing", &bytes)?;
    Ok((now_ms.saturating_sub(request.created_ms) <= CODE_TTL_MS).then_some(request))
}

/// The key of pairing code `code` on `channel`.
fn code_key(channel: &str, code: &str) -> String {
    format!("code:{channel}:{code}")
}

/// The key of an approved sender.
fn approved_key(channel: &str, account: &str, sender_id: &str) -> String {
    format!("approved:{channel}:{account}:{sender_id}")
}
