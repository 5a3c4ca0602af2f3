//! Streaming a file to disk with a size limit: chunks go to `<dest>.part` as they arrive
//! (never the whole file in memory), which is renamed to `dest` once complete.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

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

/// Downloads `url` to `dest` (its folder created), refusing more than `limit` bytes; the
/// number of bytes written. Nothing is left at `dest` when it fails.
pub async fn download(url: &str, dest: &Path, limit: u64) -> Result<u64, FetchError> {
    download_until(url, dest, limit, &CancellationToken::new()).await
}

/// [`download`] that `cancel` cuts short ([`FetchError::Stopped`]); its `.part` file is
/// removed then too.
pub async fn download_until(
    url: &str,
    dest: &Path,
    limit: u64,
    cancel: &CancellationToken,
) -> Result<u64, FetchError> {
    if cancel.is_cancelled() {
        return Err(FetchError::Stopped);
    }
    let mut part = dest.as_os_str().to_owned();
    part.push(".part");
    let part = std::path::PathBuf::from(part);
    let result = tokio::select! {
        result = fetch(url, dest, &part, limit) => result,
        () = cancel.cancelled() => Err(FetchError::Stopped),
    };
    if result.is_err() {
        let _ = tokio::fs::remove_file(&part).await;
    }
    result
}

/// The download itself: `url` into `part`, renamed to `dest` once complete.
async fn fetch(url: &str, dest: &Path, part: &Path, limit: u64) -> Result<u64, FetchError> {
    let http = |e: reqwest::Error| FetchError::Http(e.without_url().to_string());
    let mut response = client()?
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(http)?;
    if let Some(size) = response.content_length().filter(|&n| n > limit) {
        return Err(FetchError::TooBig(size));
    }
    if let Some(folder) = dest.parent() {
        tokio::fs::create_dir_all(folder).await?;
    }
    let result = async {
        // A `.part` left behind, or a symlink planted there, is removed (not followed), and
        // the new one is created only if nothing is there (`O_EXCL` follows no link).
        match tokio::fs::remove_file(part).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(part)
            .await?;
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
    .await;
    let written = result?;
    tokio::fs::rename(part, dest).await?;
    Ok(written)
}
