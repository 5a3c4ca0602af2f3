//! Why a store operation failed: [`StoreError`], the one error of every backend and of the
//! traits in `ports/` (no backend type in it).

use std::path::PathBuf;

use crate::store::ports::version::NodeVersion;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process holds the store's lock.
    #[error("the store at {place} is in use by another chela process")]
    Locked {
        /// The store folder, or the PostgreSQL database (password hidden).
        place: String,
    },
    /// The store could not be opened.
    #[error("cannot open the store at {}: {reason}", path.display())]
    Open {
        /// The store folder.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The config asks for a part of the store this build left out (a cargo feature off).
    #[error(
        "{setting} needs {part}, which this chela was built without: build it with the cargo \
         feature `{feature}` (`--features {feature}`)"
    )]
    NotBuilt {
        /// The setting (or command) that asked for it.
        setting: String,
        /// What it needs (`the PostgreSQL store`, `the sled engine`).
        part: &'static str,
        /// The cargo feature that builds it.
        feature: &'static str,
    },
    /// The database failed to read or write.
    #[error("store i/o failed: {0}")]
    Db(String),
    /// A stored record could not be decoded.
    #[error("corrupt record in {collection}: {reason}")]
    Corrupt {
        /// The collection holding the record (`sessions`, `outbox`, ...).
        collection: &'static str,
        /// The decoding error.
        reason: String,
    },
    /// A record could not be encoded.
    #[error("cannot encode a record: {0}")]
    Encode(String),
    /// The session key has no session yet (see `SessionStore::ensure_session`).
    #[error("no session {0}")]
    UnknownSession(String),
    /// An import was asked for a key that already has a transcript.
    #[error("session {key} already has {entries} entries; import refuses to overwrite it")]
    SessionExists {
        /// The session key.
        key: String,
        /// How many entries it has.
        entries: u64,
    },
    /// An imported JSONL line was rejected.
    #[error("import line {line}: {reason}")]
    InvalidImport {
        /// 1-based line number.
        line: usize,
        /// Why it was rejected.
        reason: String,
    },
    /// The store holds less than it once made durable: its files were damaged or replaced
    /// by an older copy (see `highwater.rs`).
    #[error(
        "the store at {} has rolled back: it is at generation {found}, but generation {recorded} \
         was made durable earlier (recorded in {}). Writes made since were lost (damaged or \
         restored files), and chela could answer old messages again. chela refuses to start; \
         restore the store from a backup, or run again with --accept-store-rollback to continue \
         with what is left (messages older than the last recorded write are then not answered \
         again)",
        path.display(),
        mark.display()
    )]
    RolledBack {
        /// The store folder.
        path: PathBuf,
        /// The high-water file.
        mark: PathBuf,
        /// The generation found in the store.
        found: u64,
        /// The generation the high-water file recorded.
        recorded: u64,
    },
    /// The store's file is damaged (its pages fail their checksums, or it cannot be read or
    /// written): found at open by the engine's integrity check, or by a read or write later.
    #[error(
        "the store {} is damaged: {reason}. chela does not run on a damaged store: stop every \
         chela using it, then restore the folder {} from a backup, or move {} away to start \
         with an empty store (its sessions, queue and pairings are then lost). `chela store \
         check` checks a store without starting the gateway",
        file.display(),
        path.display(),
        file.display()
    )]
    Damaged {
        /// The store folder.
        path: PathBuf,
        /// The damaged file (`chela.redb`; the folder itself for sled).
        file: PathBuf,
        /// What the engine found.
        reason: String,
    },
    /// Reading an import or writing an export failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The PostgreSQL store could not be reached or refused the login, or its URL is wrong.
    #[error("cannot open the PostgreSQL store at {url} (set by {setting}): {reason}")]
    Connect {
        /// Where the URL came from: `store.url` or `CHELA_STORE_URL`.
        setting: String,
        /// The URL, its user, password and query hidden.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// A cluster node wrote for a session whose partition it does not hold (any more): its
    /// lease expired or went to another node (see `BaseStore::fence`).
    #[error("this node does not hold the lease of partition {partition} (session {session})")]
    NotOwner {
        /// The session written for.
        session: String,
        /// Its partition.
        partition: u32,
    },
    /// A cluster node settled a turn none of whose messages was pending any more: another
    /// node (or an earlier run here) answered it already, so this final is not recorded.
    #[error("the turn of session {session} was answered already; its second final is dropped")]
    AlreadySettled {
        /// The session of the turn.
        session: String,
    },
    /// `[store] engine` (or `CHELA_STORE_ENGINE`) names an engine other than the one whose
    /// store the folder holds.
    #[error(
        "{setting} = {named}, but {} holds {found}: chela does not start an empty store beside \
         it. Stop the gateway and run `chela store migrate --to redb` to move a sled store to \
         redb, or set {setting} to the folder's engine (or leave it unset)",
        path.display()
    )]
    Engine {
        /// `store.engine` or `CHELA_STORE_ENGINE`.
        setting: &'static str,
        /// The engine it names.
        named: &'static str,
        /// The store folder.
        path: PathBuf,
        /// What the folder holds.
        found: String,
    },
    /// A live node of the cluster speaks another cluster protocol than this chela: joining
    /// would mis-handle the commands it queues (or it would mis-handle this node's).
    #[error(
        "node {node} of the cluster runs {theirs}, but this is {ours}: nodes of different \
         cluster protocols cannot share a store. Run the same chela version on every node \
         (stop {node} first, or start this node with its version)"
    )]
    ProtocolMismatch {
        /// The live node.
        node: String,
        /// What it runs.
        theirs: NodeVersion,
        /// What this node runs.
        ours: NodeVersion,
    },
    /// Another running node holds this node's id (its node lock): two gateways with one
    /// `[cluster] node_id` would both run the same sessions.
    #[error(
        "node id {node} is in use by another running node of this cluster (it holds the \
         node's lock): give each node its own [cluster] node_id, or wait until the other \
         process is gone"
    )]
    NodeIdInUse {
        /// The node id.
        node: String,
    },
    /// Nodes of an older chela still hold leases in the store: migrating it would change the
    /// schema under them.
    #[error(
        "node(s) {nodes} still run on this store (they hold leases) and would not know schema \
         version {supported}, to which this chela would migrate it from {found}: stop them \
         first (a node killed without stopping lets its leases run out after [cluster] lease_s)"
    )]
    UpgradeUnderLiveNodes {
        /// The nodes holding leases, comma-separated.
        nodes: String,
        /// The schema version found.
        found: i32,
        /// The version this chela would migrate to.
        supported: i32,
    },
    /// The database's schema was written by a newer chela.
    #[error(
        "the PostgreSQL store has schema version {found}, newer than this chela's {supported}: \
         a newer chela migrated it; run that version (or newer) instead"
    )]
    SchemaTooNew {
        /// The version found in the database.
        found: i32,
        /// The newest version this binary knows.
        supported: i32,
    },
    /// chela's PostgreSQL tables are in another schema than the one the connection's
    /// `search_path` now creates tables in (a schema was added ahead of them, such as one
    /// named after the user): going on would start an empty store beside the real one.
    #[error(
        "the PostgreSQL store's tables are in schema {found}, but the connection's search_path \
         now puts tables in schema {current}: opening would start an empty store there. Add \
         options=-csearch_path%3D{found} to the store URL (or remove schema {current})"
    )]
    SchemaElsewhere {
        /// The schema on the search path that holds chela's tables.
        found: String,
        /// The schema new tables would go to.
        current: String,
    },
}
