//! Test support: a PostgreSQL for tests, from `CHELA_TEST_PG_URL` (set by `scripts/test.sh`,
//! which starts a private throwaway cluster), and the contract suite run against it, each
//! check in a schema of its own so the checks run in parallel.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::store::Store;
use crate::store::contract_tests::{Harness, store_contract_tests};

/// The variable naming the test cluster.
pub(crate) const TEST_URL_VAR: &str = "CHELA_TEST_PG_URL";

/// The test cluster's URL; panics, naming the script, when it is not set (never skips).
pub(crate) fn test_url() -> String {
    match std::env::var(TEST_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "{TEST_URL_VAR} is not set: the PostgreSQL store tests need a PostgreSQL. Run them \
             with scripts/test.sh, which starts a private throwaway cluster and sets it (or set \
             {TEST_URL_VAR}=postgres://user:password@127.0.0.1:PORT/postgres yourself)"
        ),
    }
}

/// `url` with its connections' `search_path` set to `schema`.
pub(crate) fn url_with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-csearch_path%3D{schema}")
}

/// Runs `f` with a client of its own on the test cluster, on a thread of its own (callers
/// may be inside a runtime).
fn on_cluster<T, F>(f: F) -> T
where
    T: Send + 'static,
    F: AsyncFnOnce(&tokio_postgres::Client) -> T + Send + 'static,
{
    let url = test_url();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            f(&client).await
        })
    })
    .join()
    .unwrap()
}

/// Runs `sql` on the test cluster (its own short connection).
pub(crate) fn admin(sql: &str) {
    let sql = sql.to_owned();
    on_cluster(async move |c: &tokio_postgres::Client| c.batch_execute(&sql).await.unwrap());
}

/// Runs `sql` on the test cluster and returns the bigint in its first row's first column.
pub(crate) fn admin_value(sql: &str) -> i64 {
    let sql = sql.to_owned();
    on_cluster(async move |c: &tokio_postgres::Client| {
        c.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0)
    })
}

/// A fresh, empty schema on the test cluster; returns its store URL.
pub(crate) fn fresh_schema() -> String {
    let schema = format!("t{}", uuid::Uuid::new_v4().simple());
    admin(&format!("CREATE SCHEMA {schema}"));
    url_with_schema(&test_url(), &schema)
}

/// PostgreSQL stores, each harness in a schema of its own; `reopen` drops the handle (its
/// worker and connection go) and connects again.
pub(crate) struct PgHarness {
    url: String,
}

impl PgHarness {
    pub(crate) fn new() -> PgHarness {
        PgHarness {
            url: fresh_schema(),
        }
    }
}

impl Harness for PgHarness {
    fn fresh(&self) -> Store {
        Store::new(crate::store::PgStore::open(&self.url, "test").unwrap())
    }

    fn reopen(&self, store: Store) -> Store {
        drop(store);
        self.fresh()
    }
}

store_contract_tests!(PgHarness::new());

mod tests {
    use super::*;
    use crate::store::{SCHEMA_VERSION, StoreError};

    #[test]
    fn stored_bytes_measure_the_stores_own_schema() {
        let store = PgHarness::new().fresh();
        let empty = store.stored_bytes().unwrap().unwrap();
        assert!(empty > 0, "the tables and indexes take pages");
        // Random text: TOAST compresses repeated bytes to almost nothing.
        let noise: Vec<String> = (0..8000)
            .map(|_| uuid::Uuid::new_v4().simple().to_string())
            .collect();
        let json = serde_json::to_vec(&noise).unwrap();
        store.put_settings_json("big", &json).unwrap();
        let grown = store.stored_bytes().unwrap().unwrap();
        assert!(grown > empty, "{grown} after a write, {empty} before");
    }

    #[test]
    fn a_newer_schema_is_refused_with_a_clear_error() {
        let url = fresh_schema();
        drop(crate::store::PgStore::open(&url, "store.url").unwrap());
        let schema = url.rsplit("%3D").next().unwrap().to_owned();
        admin(&format!(
            "UPDATE {schema}.chela_schema SET version = version + 1"
        ));
        let err = crate::store::PgStore::open(&url, "store.url").unwrap_err();
        assert!(
            matches!(err, StoreError::SchemaTooNew { found, supported }
                if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION),
            "{err:?}"
        );
        assert!(err.to_string().contains("newer than this chela's"), "{err}");
    }

    #[test]
    fn no_migration_while_nodes_of_the_older_version_hold_leases() {
        let url = fresh_schema();
        drop(crate::store::PgStore::open(&url, "store.url").unwrap());
        let schema = url.rsplit("%3D").next().unwrap().to_owned();
        // As if the store were one version older and node "old" held a partition.
        admin(&format!(
            "UPDATE {schema}.chela_schema SET version = version - 1; \
             UPDATE {schema}.leases SET node = 'old', expires = now() + interval '1 minute' \
             WHERE partition = 3"
        ));
        let err = crate::store::PgStore::open(&url, "store.url").unwrap_err();
        assert!(
            matches!(&err, StoreError::UpgradeUnderLiveNodes { nodes, found, supported }
                if nodes == "old" && *found == SCHEMA_VERSION - 1 && *supported == SCHEMA_VERSION),
            "{err:?}"
        );
        assert!(err.to_string().contains("stop them first"), "{err}");
        // Nothing was migrated meanwhile.
        let version = admin_value(&format!(
            "SELECT max(version)::bigint FROM {schema}.chela_schema"
        ));
        assert_eq!(version, i64::from(SCHEMA_VERSION - 1));
    }

    #[test]
    fn a_schema_added_ahead_of_the_tables_is_refused_instead_of_starting_empty() {
        let base = format!("t{}", uuid::Uuid::new_v4().simple());
        let ahead = format!("{base}_ahead");
        admin(&format!("CREATE SCHEMA {base}"));
        // The search path names a schema that does not exist yet, then the real one.
        let url = url_with_schema(&test_url(), &format!("{ahead}%2C{base}"));
        let store = crate::store::PgStore::open(&url, "store.url").unwrap();
        use crate::store::SessionStore;
        store.ensure_session("k", "/").unwrap();
        drop(store);
        admin(&format!("CREATE SCHEMA {ahead}"));
        let err = crate::store::PgStore::open(&url, "store.url").unwrap_err();
        assert!(
            matches!(&err, StoreError::SchemaElsewhere { found, current }
                if *found == base && *current == ahead),
            "{err:?}"
        );
        assert!(err.to_string().contains("search_path"), "{err}");
        // Nothing was created in the schema ahead.
        let tables = admin_value(&format!(
            "SELECT count(*) FROM pg_tables WHERE schemaname = '{ahead}'"
        ));
        assert_eq!(tables, 0);
    }

    #[test]
    fn reopening_keeps_the_schema_and_the_data() {
        let url = fresh_schema();
        let store = crate::store::PgStore::open(&url, "store.url").unwrap();
        use crate::store::SessionStore;
        store.ensure_session("k", "/").unwrap();
        drop(store);
        let store = crate::store::PgStore::open(&url, "store.url").unwrap();
        assert!(store.get_session("k").unwrap().is_some());
    }

    #[test]
    fn a_wrong_password_names_the_setting() {
        let mut url = url::Url::parse(&test_url()).unwrap();
        url.set_password(Some("not-the-password")).unwrap();
        let err = crate::store::PgStore::open(url.as_str(), "CHELA_STORE_URL").unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, StoreError::Connect { .. }), "{err:?}");
        assert!(text.contains("CHELA_STORE_URL"), "{text}");
        assert!(!text.contains("not-the-password"), "{text}");
    }

    /// The schema of a `fresh_schema` URL.
    fn schema_of(url: &str) -> String {
        url.rsplit("%3D").next().unwrap().to_owned()
    }

    /// Whether `err` is the store-in-use refusal, naming the database without its password.
    fn is_locked(err: &StoreError) -> bool {
        let text = err.to_string();
        let password = url::Url::parse(&test_url())
            .unwrap()
            .password()
            .map(str::to_owned);
        matches!(err, StoreError::Locked { .. })
            && text.contains("in use by another chela process")
            && password.is_none_or(|p| !text.contains(&p))
    }

    #[test]
    fn a_second_process_on_one_database_is_refused_until_the_first_closes() {
        use crate::store::{PgStore, Tenancy};
        let url = fresh_schema();
        let first = PgStore::open(&url, "store.url").unwrap();
        let err = PgStore::open(&url, "store.url").unwrap_err();
        assert!(is_locked(&err), "{err:?}");
        let err = PgStore::open_as(&url, "store.url", Tenancy::Shared).unwrap_err();
        assert!(
            is_locked(&err),
            "a cluster node joined a lone gateway's database: {err:?}"
        );
        // Another schema of the same database is another store.
        drop(PgStore::open(&fresh_schema(), "store.url").unwrap());
        // Closing gives the lock back before the drop returns.
        drop(first);
        drop(PgStore::open(&url, "store.url").unwrap());
    }

    #[test]
    fn cluster_nodes_share_the_database_and_keep_a_lone_process_out() {
        use crate::store::{PgStore, Tenancy};
        let url = fresh_schema();
        let a = PgStore::open_as(&url, "store.url", Tenancy::Shared).unwrap();
        let b = PgStore::open_as(&url, "store.url", Tenancy::Shared).unwrap();
        assert!(is_locked(&PgStore::open(&url, "store.url").unwrap_err()));
        drop(a);
        assert!(is_locked(&PgStore::open(&url, "store.url").unwrap_err()));
        drop(b);
        drop(PgStore::open(&url, "store.url").unwrap());
    }

    #[test]
    fn the_lock_is_taken_again_when_its_connection_is_cut() {
        use crate::store::PgStore;
        let url = fresh_schema();
        let schema = schema_of(&url);
        let store = PgStore::open(&url, "store.url").unwrap();
        let holders = format!(
            "FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND classid = 1667787873 \
             AND objid = (hashtext('{schema}')::bigint & 4294967295)::oid"
        );
        assert_eq!(admin_value(&format!("SELECT count(*) {holders}")), 1);
        let cut = admin_value(&format!(
            "SELECT count(pg_terminate_backend(pid)) {holders}"
        ));
        assert_eq!(cut, 1);
        // Bounded wait for the store to take it again (it does so at once when it can).
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while admin_value(&format!("SELECT count(*) {holders}")) == 0 {
            assert!(
                std::time::Instant::now() < give_up,
                "the lock was not taken again"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(is_locked(&PgStore::open(&url, "store.url").unwrap_err()));
        drop(store);
    }

    #[tokio::test]
    async fn sync_methods_work_on_a_current_thread_runtime_between_awaits() {
        use crate::store::{QueueStore, SessionStore};
        let store = crate::store::PgStore::open(&fresh_schema(), "test").unwrap();
        let turn = crate::store::contract_tests::turn("k", "m1");
        let seq = store.enqueue(&turn).await.unwrap();
        assert!(store.is_pending(seq).unwrap());
        store.ensure_session("k", "/").unwrap();
        let id = store
            .append("k", crate::store::EntryKind::Reset { reason: "r".into() })
            .unwrap();
        assert_eq!(store.last_entry_id("k").unwrap(), Some(id));
    }
}

/// A TCP proxy in front of the test cluster that can cut every connection and refuse new
/// ones until resumed: a database that goes away and comes back.
mod outage {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use tokio::net::{TcpListener, TcpStream};
    use tokio::task::JoinHandle;

    use super::*;
    use crate::store::SessionStore;

    struct Proxy {
        port: u16,
        /// The store URL without the proxy.
        direct: String,
        open: Arc<AtomicBool>,
        refused: Arc<AtomicUsize>,
        links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    }

    impl Proxy {
        async fn start(upstream: String) -> Proxy {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let proxy = Proxy {
                port: listener.local_addr().unwrap().port(),
                direct: String::new(),
                open: Arc::new(AtomicBool::new(true)),
                refused: Arc::new(AtomicUsize::new(0)),
                links: Arc::new(Mutex::new(Vec::new())),
            };
            let (open, refused, links) = (
                proxy.open.clone(),
                proxy.refused.clone(),
                proxy.links.clone(),
            );
            tokio::spawn(async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    if !open.load(Ordering::SeqCst) {
                        refused.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    let upstream = upstream.clone();
                    links.lock().unwrap().push(tokio::spawn(async move {
                        let mut server = TcpStream::connect(upstream).await.unwrap();
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }));
                }
            });
            proxy
        }

        /// Closes every connection; new ones are refused until [`Proxy::resume`].
        fn cut(&self) {
            self.open.store(false, Ordering::SeqCst);
            for link in self.links.lock().unwrap().drain(..) {
                link.abort();
            }
        }

        fn resume(&self) {
            self.open.store(true, Ordering::SeqCst);
        }
    }

    /// The direct (not proxied) URL of the store behind `proxy`.
    fn proxy_upstream_url(proxy: &Proxy) -> String {
        proxy.direct.clone()
    }

    /// A store on a fresh schema reached through a [`Proxy`].
    async fn behind_proxy() -> (Proxy, Arc<crate::store::PgStore>) {
        let direct = url::Url::parse(&fresh_schema()).unwrap();
        let upstream = format!(
            "{}:{}",
            direct.host_str().unwrap(),
            direct.port().unwrap_or(5432)
        );
        // The proxy runs on a runtime of its own, so it serves whatever the test's does.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                tx.send(Proxy::start(upstream).await).unwrap();
                std::future::pending::<()>().await
            })
        });
        let mut proxy: Proxy = rx.recv().unwrap();
        proxy.direct = direct.to_string();
        let mut through = direct.clone();
        through.set_port(Some(proxy.port)).unwrap();
        let store = Arc::new(crate::store::PgStore::open(through.as_str(), "store.url").unwrap());
        (proxy, store)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_whose_lock_another_process_took_meanwhile_refuses_to_write() {
        let (proxy, store) = behind_proxy().await;
        let direct = proxy_upstream_url(&proxy);
        store.ensure_session("k", "/").unwrap();
        // The database goes away for this store; meanwhile another process takes it.
        proxy.cut();
        let other = tokio::task::spawn_blocking({
            let direct = direct.clone();
            move || {
                let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
                loop {
                    match crate::store::PgStore::open(&direct, "store.url") {
                        Ok(other) => return other,
                        Err(e) => assert!(std::time::Instant::now() < give_up, "{e:?}"),
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
        })
        .await
        .unwrap();
        proxy.resume();
        // Back, this store finds the lock taken: it refuses instead of writing beside it.
        let asker = store.clone();
        let refused = tokio::task::spawn_blocking(move || {
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                match asker.ensure_session("k2", "/") {
                    Err(crate::store::StoreError::Locked { .. }) => return true,
                    _ if std::time::Instant::now() > give_up => return false,
                    _ => std::thread::sleep(std::time::Duration::from_millis(50)),
                }
            }
        });
        assert!(
            refused.await.unwrap(),
            "wrote while another process held the lock"
        );
        assert!(other.get_session("k2").unwrap().is_none());
        // Once the other process is gone, this one takes the lock again and goes on.
        drop(other);
        let asker = store.clone();
        let resumed = tokio::task::spawn_blocking(move || {
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while std::time::Instant::now() < give_up {
                if asker.ensure_session("k3", "/").is_ok() {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            false
        });
        assert!(resumed.await.unwrap(), "never took the lock again");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_waiting_for_the_database_do_not_freeze_the_runtime() {
        let (proxy, store) = behind_proxy().await;
        store.ensure_session("k", "/").unwrap();
        proxy.cut();
        // As many callers as the runtime has worker threads, each in a sync store call that
        // waits for the database (the first call after the cut may fail; then they wait).
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { while store.get_session("k").is_err() {} })
            })
            .collect();
        while proxy.refused.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        // Other tasks still run meanwhile. Bounded by a plain thread (a frozen runtime fires
        // no timers), so a frozen runtime fails the test instead of hanging it.
        let other = tokio::spawn(async { "ran" });
        let (give_up, gave_up) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(20));
            let _ = give_up.send(());
        });
        let ran = tokio::select! {
            ran = other => Ok(ran),
            _ = gave_up => Err(()),
        };
        let waiting = callers.iter().all(|c| !c.is_finished());
        proxy.resume();
        assert_eq!(
            ran.ok().map(Result::unwrap),
            Some("ran"),
            "the runtime froze"
        );
        assert!(waiting, "answered while away");
        for caller in callers {
            caller.await.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_connection_pauses_store_calls_until_the_database_is_back() {
        let (proxy, store) = behind_proxy().await;
        store.ensure_session("k", "/").unwrap();

        proxy.cut();
        // A caller keeps asking until it gets an answer (the call running when the
        // connection went may fail; the next ones wait for the reconnection).
        let asker = store.clone();
        let answered = tokio::task::spawn_blocking(move || {
            // Bounded, so a store that never recovers fails the test instead of hanging it.
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while std::time::Instant::now() < give_up {
                if let Ok(meta) = asker.get_session("k") {
                    return meta;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            None
        });
        // The store is reconnecting (and refused): the caller is paused, not answered.
        let reconnecting = || proxy.refused.load(Ordering::SeqCst) >= 2;
        for _ in 0..600 {
            if reconnecting() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(reconnecting(), "the store never tried to reconnect");
        assert!(
            !answered.is_finished(),
            "answered while the database was away"
        );

        proxy.resume();
        let meta = answered.await.unwrap();
        assert_eq!(meta.map(|m| m.key), Some("k".to_owned()));
        assert!(store.get_session("k").unwrap().is_some());
    }
}
