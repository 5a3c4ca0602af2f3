//! The intake layouts nodes advertise (`discord#/4`), against a real PostgreSQL: listed with
//! the node while unexpired, gone once withdrawn, expired, or the node left.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::{Joining, PgCoordinator};
use crate::store::postgres::testing::{admin, test_url, url_with_schema};
use crate::store::{Coordinator, NodeVersion, PgStore};

/// Node `node`'s coordinator on a store at `url` (migrated first).
async fn node(url: &str, node: &str) -> PgCoordinator {
    drop(PgStore::open_as(url, "test", crate::store::Tenancy::Shared).unwrap());
    let joining = Joining {
        node,
        version: NodeVersion::current(),
        alive_s: 10,
    };
    PgCoordinator::connect(url, "test", joining).await.unwrap()
}

/// The layouts each node advertises, by node.
async fn layouts(c: &PgCoordinator) -> Vec<(String, Vec<String>)> {
    let nodes = c.nodes().await.unwrap();
    nodes.into_iter().map(|n| (n.id, n.layouts)).collect()
}

fn pair(node: &str, layouts: &[&str]) -> (String, Vec<String>) {
    (
        node.to_owned(),
        layouts.iter().map(|l| (*l).to_owned()).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_list_the_layouts_they_advertise_until_withdrawn_expired_or_gone() {
    let schema = format!("t{}", uuid::Uuid::new_v4().simple());
    admin(&format!("CREATE SCHEMA {schema}"));
    let url = url_with_schema(&test_url(), &schema);
    let a = node(&url, "a").await;
    let b = node(&url, "b").await;
    a.advertise_layout("discord#/2", 10).await.unwrap();
    a.advertise_layout("discord#/2", 10).await.unwrap();
    b.advertise_layout("discord#/2", 10).await.unwrap();
    b.advertise_layout("discord#/3", 10).await.unwrap();
    assert_eq!(
        layouts(&a).await,
        [
            pair("a", &["discord#/2"]),
            pair("b", &["discord#/2", "discord#/3"])
        ]
    );
    b.withdraw_layout("discord#/3").await.unwrap();
    // a's advert expires (as if it had not renewed it in time).
    admin(&format!(
        "UPDATE {schema}.intake_layouts SET expires = now() - interval '1 second' WHERE node = 'a'"
    ));
    assert_eq!(
        layouts(&b).await,
        [pair("a", &[]), pair("b", &["discord#/2"])]
    );
    b.leave().await.unwrap();
    assert_eq!(layouts(&a).await, [pair("a", &[])]);
    a.advertise_layout("discord#/2", 10).await.unwrap();
    assert_eq!(layouts(&a).await, [pair("a", &["discord#/2"])]);
}
