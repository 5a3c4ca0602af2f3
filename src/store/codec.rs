//! Records as JSON: how every backend encodes what it stores and decodes what it reads back
//! (a record that does not decode is a [`StoreError::Corrupt`] naming its collection).

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::store::error::StoreError;

/// Encodes a record as JSON.
pub(super) fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Encode(e.to_string()))
}

/// Decodes a JSON record read from `collection`.
pub(super) fn decode<T: DeserializeOwned>(
    collection: &'static str,
    bytes: &[u8],
) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        collection,
        reason: e.to_string(),
    })
}
