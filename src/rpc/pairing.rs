//! `pairing.list`, `pairing.approve`, `pairing.reject`: the owner's side of DM pairing while
//! the gateway holds the store (`chela pairing` uses them then).

use serde::Deserialize;
use serde_json::{Value, json};

use super::api::GatewayApi;
use super::protocol::{self, Fault};
use crate::domain::message::now_ms;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CodeParams {
    channel: String,
    code: String,
}

/// Runs pairing method `method`; `None` when it is not one.
pub(super) async fn call(
    api: &dyn GatewayApi,
    method: &str,
    params: &Value,
) -> Option<Result<Value, Fault>> {
    let store = api.store();
    let internal = |e: crate::store::StoreError| Fault::internal(e.to_string());
    let may_make_owner = api.config().commands.pairing_makes_owners();
    let result = match method {
        "pairing.list" => protocol::params::<protocol::NoParams>(params).and_then(|_| {
            let requests = store.pairing_requests(now_ms()).map_err(internal)?;
            Ok(json!({ "requests": requests }))
        }),
        "pairing.approve" => match protocol::params::<CodeParams>(params) {
            Ok(p) => match store
                .approve_pairing(&p.channel, &p.code, now_ms(), may_make_owner)
                .await
            {
                Ok(Some((request, owner))) => {
                    api.pairing_answered(request.clone(), true).await;
                    Ok(json!({ "request": request, "owner": owner }))
                }
                Ok(None) => Ok(json!({ "request": null, "owner": false })),
                Err(e) => Err(internal(e)),
            },
            Err(e) => Err(e),
        },
        "pairing.reject" => match protocol::params::<CodeParams>(params) {
            Ok(p) => match store.reject_pairing(&p.channel, &p.code, now_ms()).await {
                Ok(request) => {
                    if let Some(request) = &request {
                        api.pairing_answered(request.clone(), false).await;
                    }
                    Ok(json!({ "request": request }))
                }
                Err(e) => Err(internal(e)),
            },
            Err(e) => Err(e),
        },
        _ => return None,
    };
    Some(result)
}
