//! Streaming a file to disk with a size limit: chunks go to `<dest>.part` as they arrive
//! (never the whole file in memory), which is renamed to `dest` once complete, both inside
//! the destination folder opened beneath the workspace without following links.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use crate::agent::tools::beneath::{self, BeneathError};

/// Why a file was not downloaded.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The file is bigger than `[media] max_mb` (its size, or the bytes seen so far).
    #[error("the file is too big ({0} bytes)")]
    TooBig(u64),
    /// The channel that received it does not run.
    #[error("the file's channel does not run")]
    NoChannel,
    /// The channel could not say where the file is.
    #[error("cannot locate the file: {0}")]
    Channel(#[from] chela_channel::ChannelError),
    /// The download failed (the URL is left out: it may carry a token).
    #[error("download failed: {0}")]
    Http(String),
    /// The file could not be written.
    #[error("cannot write the file: {0}")]
    Io(#[from] std::io::Error),
    /// The run was stopped (`/stop`) while the file came.
    #[error("the download was stopped")]
    Stopped,
}

/// The HTTP client of downloads and transcriptions (built once).
pub(super) fn client() -> Result<&'static reqwest::Client, FetchError> {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(client) = CLIENT.get() {
        return Ok(client);
    }
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| FetchError::Http(e.without_url().to_string()))?;
    Ok(CLIENT.get_or_init(|| client))
}

/// Downloads `url` to `dest` (resolved beneath `workspace`; its folder created), refusing
/// more than `limit` bytes; the number of bytes written. Nothing is left at `dest` when it
/// fails.
pub async fn download(
    url: &str,
    workspace: &Path,
    dest: &Path,
    limit: u64,
) -> Result<u64, FetchError> {
    download_until(url, None, workspace, dest, limit, &CancellationToken::new()).await
}

/// [`download`] with an `Authorization` header (when given) that `cancel` cuts short
/// ([`FetchError::Stopped`]); its `.part` file is
/// removed then too. The folder is opened beneath the workspace one step at a time and the
/// `.part` file made, written and renamed inside that open folder, so a folder swapped
/// for a link at any moment makes nothing outside ([`beneath`]).
pub async fn download_until(
    url: &str,
    authorization: Option<&str>,
    workspace: &Path,
    dest: &Path,
    limit: u64,
    cancel: &CancellationToken,
) -> Result<u64, FetchError> {
    if cancel.is_cancelled() {
        return Err(FetchError::Stopped);
    }
    let root = std::fs::canonicalize(workspace)?;
    let (folder, name) = beneath::split(&root, dest).map_err(outside)?;
    let dir = beneath::open_dir(&root, &folder, true).map_err(outside)?;
    let mut part = name.clone();
    part.push(".part");
    let result = tokio::select! {
        result = fetch(url, authorization, &dir, &part, limit) => result,
        () = cancel.cancelled() => Err(FetchError::Stopped),
    };
    match result {
        Ok(written) => match beneath::rename_in(&dir, &part, &name) {
            Ok(()) => Ok(written),
            Err(e) => {
                // Something else took the name (a folder): the download does not stay.
                let _ = beneath::remove_in(&dir, &part);
                Err(e.into())
            }
        },
        Err(e) => {
            let _ = beneath::remove_in(&dir, &part);
            Err(e)
        }
    }
}

/// A destination that is not beneath the workspace (any more), as an I/O error.
fn outside(e: BeneathError) -> FetchError {
    match e {
        BeneathError::Io(e) => FetchError::Io(e),
        e => FetchError::Io(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("refused: {e}"),
        )),
    }
}

/// The download itself: `url` into file `part` of the open folder `dir`.
async fn fetch(
    url: &str,
    authorization: Option<&str>,
    dir: &OwnedFd,
    part: &OsStr,
    limit: u64,
) -> Result<u64, FetchError> {
    let http = |e: reqwest::Error| FetchError::Http(e.without_url().to_string());
    let mut request = client()?.get(url);
    if let Some(value) = authorization {
        request = request.header(reqwest::header::AUTHORIZATION, value);
    }
    let mut response = request
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(http)?;
    if let Some(size) = response.content_length().filter(|&n| n > limit) {
        return Err(FetchError::TooBig(size));
    }
    // A `.part` left behind, or a link planted there, is removed (not followed), and the
    // new one is made only if nothing is there.
    beneath::remove_in(dir, part)?;
    let mut file = tokio::fs::File::from_std(beneath::open_for_writing(dir, part, true)?);
    let mut written = 0u64;
    while let Some(chunk) = response.chunk().await.map_err(http)? {
        written += chunk.len() as u64;
        if written > limit {
            return Err(FetchError::TooBig(written));
        }
        file.write_all(&chunk).await?;
    }
    file.sync_all().await?;
    Ok(written)
}
