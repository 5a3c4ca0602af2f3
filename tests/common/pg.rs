//! PostgreSQL for the end-to-end tests: a fresh schema on the throwaway cluster that
//! `scripts/test.sh` (through `scripts/with-pg.sh`) starts and names in `CHELA_TEST_PG_URL`.

/// The test cluster's URL; fails the test, naming the script, when it is not set.
pub fn test_url() -> String {
    match std::env::var("CHELA_TEST_PG_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "CHELA_TEST_PG_URL is not set: the PostgreSQL tests need a PostgreSQL. Run them \
             with scripts/test.sh, which starts a private throwaway cluster and sets it"
        ),
    }
}

/// A store URL (`CHELA_STORE_URL`) for a new, empty schema of its own on the test cluster.
pub async fn fresh_store_url() -> String {
    let url = test_url();
    let schema = format!("e{}", uuid::Uuid::new_v4().simple());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    let conn = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("create a schema");
    drop(client);
    let _ = conn.await;
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-csearch_path%3D{schema}")
}
