//! DM pairing (SPEC 1.3): 8-character codes for unknown senders (valid 1 hour, at most
//! [`MAX_PENDING`](crate::store::ports::MAX_PENDING) pending per account), approved senders, and
//! owners. Pairing grants DM access only.

use super::{SledStore, db_err};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{
    CODE_TTL_MS, PairingOutcome, PairingRequest, PairingStore, StoreFuture, new_code,
    pending_outcome,
};

impl PairingStore for SledStore {
    /// Issues (or repeats) a pairing code for an unknown sender.
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
        self.inner
            .pairing
            .insert(code_key(channel, &code), encode(&request)?)
            .map_err(db_err)?;
        Ok(PairingOutcome::New(code))
    }

    /// Valid pairing requests (expired ones are removed on the way).
    fn pairing_requests(&self, now_ms: u64) -> Result<Vec<PairingRequest>, StoreError> {
        let mut out = Vec::new();
        for kv in self.inner.pairing.scan_prefix(b"code:") {
            let (key, value) = kv.map_err(db_err)?;
            let request: PairingRequest = decode("pairing", &value)?;
            if now_ms.saturating_sub(request.created_ms) > CODE_TTL_MS {
                self.inner.pairing.remove(key).map_err(db_err)?;
            } else {
                out.push(request);
            }
        }
        Ok(out)
    }

    /// Approves `code` on `channel`: the sender may DM the bot from now on. When
    /// `may_make_owner` (no owner is configured in `commands.owner_allow_from`), the first
    /// approval on a channel with no owner makes that sender the owner. Returns the request
    /// and whether the sender became owner, or `None` for an unknown or expired code.
    fn approve_pairing<'a>(
        &'a self,
        channel: &'a str,
        code: &'a str,
        now_ms: u64,
        may_make_owner: bool,
    ) -> StoreFuture<'a, Option<(PairingRequest, bool)>> {
        Box::pin(self.approve_now(channel, code, now_ms, may_make_owner))
    }

    /// Rejects `code`; returns the request it was, if any.
    fn reject_pairing<'a>(
        &'a self,
        channel: &'a str,
        code: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, Option<PairingRequest>> {
        Box::pin(async move {
            let taken = self.take_request(channel, &code.trim().to_uppercase(), now_ms)?;
            self.sync().await?;
            Ok(taken)
        })
    }

    /// Whether `sender_id` was approved by pairing on this channel account.
    fn is_paired(&self, channel: &str, account: &str, sender_id: &str) -> Result<bool, StoreError> {
        self.inner
            .pairing
            .contains_key(approved_key(channel, account, sender_id))
            .map_err(db_err)
    }

    /// Whether `sender_id` became owner of `channel` through pairing.
    fn is_paired_owner(&self, channel: &str, sender_id: &str) -> Result<bool, StoreError> {
        self.inner
            .pairing
            .contains_key(format!("owner:{channel}:{sender_id}"))
            .map_err(db_err)
    }
}

impl SledStore {
    /// [`PairingStore::approve_pairing`]: the approval and any owner, then a flush.
    async fn approve_now(
        &self,
        channel: &str,
        code: &str,
        now_ms: u64,
        may_make_owner: bool,
    ) -> Result<Option<(PairingRequest, bool)>, StoreError> {
        let code = code.trim().to_uppercase();
        let Some(request) = self.take_request(channel, &code, now_ms)? else {
            return Ok(None);
        };
        let pairing = &self.inner.pairing;
        pairing
            .insert(
                approved_key(channel, &request.account, &request.sender_id),
                &now_ms.to_be_bytes(),
            )
            .map_err(db_err)?;
        let owner_prefix = format!("owner:{channel}:");
        let has_owner = pairing
            .scan_prefix(owner_prefix.as_bytes())
            .next()
            .is_some();
        let becomes_owner = may_make_owner && !has_owner;
        if becomes_owner {
            pairing
                .insert(
                    format!("{owner_prefix}{}", request.sender_id),
                    &now_ms.to_be_bytes(),
                )
                .map_err(db_err)?;
        }
        self.sync().await?;
        Ok(Some((request, becomes_owner)))
    }

    /// Removes and returns the request of `code`, if it is there and not expired.
    fn take_request(
        &self,
        channel: &str,
        code: &str,
        now_ms: u64,
    ) -> Result<Option<PairingRequest>, StoreError> {
        let Some(bytes) = self
            .inner
            .pairing
            .remove(code_key(channel, code))
            .map_err(db_err)?
        else {
            return Ok(None);
        };
        let request: PairingRequest = decode("pairing", &bytes)?;
        Ok((now_ms.saturating_sub(request.created_ms) <= CODE_TTL_MS).then_some(request))
    }
}

fn code_key(channel: &str, code: &str) -> String {
    format!("code:{channel}:{code}")
}

fn approved_key(channel: &str, account: &str, sender_id: &str) -> String {
    format!("approved:{channel}:{account}:{sender_id}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::store::ports::ALPHABET;

    #[tokio::test]
    async fn a_code_is_issued_once_per_sender_and_at_most_max_pending_per_account() {
        let store = Store::temporary().unwrap();
        let PairingOutcome::New(code) = store
            .request_pairing("telegram", "default", "1", "Ann", 0)
            .unwrap()
        else {
            panic!("expected a new code");
        };
        assert_eq!(code.len(), 8);
        assert!(code.chars().all(|c| ALPHABET.contains(&(c as u8))));
        assert_eq!(
            store
                .request_pairing("telegram", "default", "1", "Ann", 10)
                .unwrap(),
            PairingOutcome::Existing(code)
        );
        for sender in 2..=crate::store::MAX_PENDING {
            let outcome = store
                .request_pairing("telegram", "default", &sender.to_string(), "B", 0)
                .unwrap();
            assert!(matches!(outcome, PairingOutcome::New(_)), "{outcome:?}");
        }
        assert_eq!(
            store
                .request_pairing("telegram", "default", "new", "D", 0)
                .unwrap(),
            PairingOutcome::TooMany {
                retry_after_ms: CODE_TTL_MS + 1
            }
        );
        // Codes expire after an hour, making room again.
        assert!(matches!(
            store
                .request_pairing("telegram", "default", "new", "D", CODE_TTL_MS + 1)
                .unwrap(),
            PairingOutcome::New(_)
        ));
    }

    #[tokio::test]
    async fn the_first_approval_makes_the_owner_and_grants_dm_access() {
        let store = Store::temporary().unwrap();
        let PairingOutcome::New(a) = store
            .request_pairing("telegram", "default", "1", "Ann", 0)
            .unwrap()
        else {
            panic!()
        };
        let PairingOutcome::New(b) = store
            .request_pairing("telegram", "default", "2", "Bo", 0)
            .unwrap()
        else {
            panic!()
        };
        assert!(!store.is_paired("telegram", "default", "1").unwrap());
        let (req, owner) = store
            .approve_pairing("telegram", &a.to_lowercase(), 5, true)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((req.sender_id.as_str(), owner), ("1", true));
        let (_, owner) = store
            .approve_pairing("telegram", &b, 5, true)
            .await
            .unwrap()
            .unwrap();
        assert!(!owner);
        assert!(store.is_paired("telegram", "default", "1").unwrap());
        assert!(store.is_paired_owner("telegram", "1").unwrap());
        assert!(!store.is_paired_owner("telegram", "2").unwrap());
        assert!(
            store
                .approve_pairing("telegram", &a, 5, true)
                .await
                .unwrap()
                .is_none(),
            "a code works once"
        );
    }

    #[tokio::test]
    async fn no_approval_makes_an_owner_when_owners_are_configured() {
        let store = Store::temporary().unwrap();
        let PairingOutcome::New(a) = store
            .request_pairing("telegram", "default", "1", "Ann", 0)
            .unwrap()
        else {
            panic!()
        };
        let (req, owner) = store
            .approve_pairing("telegram", &a, 5, false)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((req.sender_id.as_str(), owner), ("1", false));
        assert!(store.is_paired("telegram", "default", "1").unwrap());
        assert!(!store.is_paired_owner("telegram", "1").unwrap());
    }

    #[tokio::test]
    async fn expired_and_rejected_codes_do_not_approve() {
        let store = Store::temporary().unwrap();
        let PairingOutcome::New(a) = store
            .request_pairing("telegram", "default", "1", "Ann", 0)
            .unwrap()
        else {
            panic!()
        };
        assert!(
            store
                .approve_pairing("telegram", &a, CODE_TTL_MS + 1, true)
                .await
                .unwrap()
                .is_none()
        );
        let PairingOutcome::New(b) = store
            .request_pairing("telegram", "default", "1", "Ann", 0)
            .unwrap()
        else {
            panic!()
        };
        assert!(
            store
                .reject_pairing("telegram", &b, 1)
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            store
                .approve_pairing("telegram", &b, 1, true)
                .await
                .unwrap()
                .is_none()
        );
        assert!(!store.is_paired("telegram", "default", "1").unwrap());
    }
}
